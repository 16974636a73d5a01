"""`bench calibrate-judge` against a scripted judge on 127.0.0.1 and the shipped dataset."""

from __future__ import annotations

import json
from pathlib import Path

from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.http_fakes import ScriptedServer, messages_reply

DATASET = Path(__file__).resolve().parent.parent / "data" / "calibration" / "labeled.json"
FLIPPED = {"pagination-offset-only", "due-date-order-good-with-test", "rate-limiter-threads-good"}


def test_calibrate_judge_prints_agreement_and_records_it(bench_home, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")
    items = json.loads(DATASET.read_text())

    def handler(rec):
        content = rec.body["messages"][0]["content"]
        (item,) = [i for i in items if i["patch_or_answer"] in content]
        agrees = item["id"] not in FLIPPED
        verdict = "pass" if (item["label"] == 1) == agrees else "fail"
        block = {
            "type": "tool_use",
            "id": "t1",
            "name": "record_verdict",
            "input": {"verdict": verdict, "reason": "scripted"},
        }
        return messages_reply([block], stop_reason="tool_use")

    rubric = tmp_path / "rubric.md"
    rubric.write_text("Pass only when every criterion holds.")
    with ScriptedServer(handler=handler) as server:
        code, out, err = run_bench(
            "calibrate-judge",
            "--rubric",
            str(rubric),
            "--dataset",
            str(DATASET),
            "--model",
            "judge-model-x",
            "--base-url",
            server.url,
            home=bench_home,
        )
    assert code == 0, err
    assert len(server.requests) == 20
    assert server.requests[0].body["model"] == "judge-model-x"

    # by hand
    truth = [i["label"] for i in items]
    pred = [1 - i["label"] if i["id"] in FLIPPED else i["label"] for i in items]
    n = len(items)
    tp = sum(t == 1 and p == 1 for t, p in zip(truth, pred, strict=True))
    tn = sum(t == 0 and p == 0 for t, p in zip(truth, pred, strict=True))
    fp = sum(t == 0 and p == 1 for t, p in zip(truth, pred, strict=True))
    fn = sum(t == 1 and p == 0 for t, p in zip(truth, pred, strict=True))
    po = (tp + tn) / n
    pe = ((tp + fn) / n) * ((tp + fp) / n) + ((tn + fp) / n) * ((tn + fn) / n)
    kappa = (po - pe) / (1 - pe)
    assert f"accuracy {po:.3f}" in out
    assert f"Cohen's kappa {kappa:.3f}" in out
    assert f"human=1          {tp:>7}  {fn:>7}" in out
    assert f"human=0          {fp:>7}  {tn:>7}" in out

    # recorded: results can tell that this judge configuration was calibrated
    from bench_pipeline.formats.model import Judge
    from bench_pipeline.runs.calibration import judge_calibration
    from bench_pipeline.warehouse.store import Warehouse

    wh = Warehouse(bench_home / "warehouse")
    record = judge_calibration(wh, Judge(model="judge-model-x", base_url="http://elsewhere"))
    assert record is not None
    assert abs(record["accuracy"] - po) < 1e-12 and abs(record["kappa"] - kappa) < 1e-12
    assert record["confusion"] == {"tp": tp, "fn": fn, "fp": fp, "tn": tn}
    assert record["items"] == 20 and record["dataset_sha256"]
    assert judge_calibration(wh, Judge(model="another-model")) is None
    assert judge_calibration(wh, None) is None


def test_calibrate_judge_bad_dataset_is_one_line(bench_home, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"id": "a", "prompt": "p", "criteria": ["c"], "label": 3}]))
    code, _, err = run_bench("calibrate-judge", "--dataset", str(bad), home=bench_home)
    assert code == 2
    assert err.strip().count("\n") == 0 and "bad.json" in err


def test_calibrate_judge_files_that_are_not_utf8_are_one_line(bench_home, tmp_path, monkeypatch):
    # (read as the locale's text with no check: a traceback)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-real")
    latin1 = tmp_path / "labels.json"
    latin1.write_bytes(b'[{"id": "caf\xe9"}]')
    code, _, err = run_bench("calibrate-judge", "--dataset", str(latin1), home=bench_home)
    assert code == 2
    assert err == f"error: {latin1}: not UTF-8 (byte 0xe9 at offset 12); save it as UTF-8\n"
    rubric = tmp_path / "rubric.md"
    rubric.write_bytes(b"Grade caf\xe9 strictly.\n")
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps([{"id": "a", "prompt": "p", "criteria": ["c"], "patch_or_answer": "x",
                     "label": 1}])
    )  # fmt: skip
    code, _, err = run_bench(
        "calibrate-judge", "--dataset", str(good), "--rubric", str(rubric), home=bench_home
    )
    assert code == 2
    assert err == f"error: {rubric}: not UTF-8 (byte 0xe9 at offset 9); save it as UTF-8\n"
