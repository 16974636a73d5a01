from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench_pipeline.formats.model import Judge
from bench_pipeline.scorers.calibrate import (
    calibrate_judge,
    cohen_kappa,
    confusion,
    format_report,
    load_dataset,
)
from bench_pipeline_tests.http_fakes import ScriptedServer, messages_reply
from bench_pipeline_tests.test_scorer_support import JUDGE_MODEL, PRICES

DATASET = Path(__file__).resolve().parent.parent / "data" / "calibration" / "labeled.json"
FLIPPED = {"pagination-offset-only", "due-date-order-good-with-test", "rate-limiter-threads-good"}
ABSTAINED = {"tax-rounding-good"}


def test_shipped_dataset_is_realistic_and_valid():
    items = load_dataset(DATASET)
    assert len(items) == 20
    assert {i["label"] for i in items} == {0, 1}
    assert all(i["patch_or_answer"].startswith("diff --git a/invoices/") for i in items)
    assert 8 <= sum(i["label"] for i in items) <= 12


def scripted_judge(items):
    def handler(rec):
        content = rec.body["messages"][0]["content"]
        (item,) = [i for i in items if i["patch_or_answer"] in content]
        if item["id"] in ABSTAINED:
            verdict = "abstain"
        else:
            agrees = item["id"] not in FLIPPED
            verdict = "pass" if (item["label"] == 1) == agrees else "fail"
        block = {
            "type": "tool_use",
            "id": "t1",
            "name": "record_verdict",
            "input": {"verdict": verdict, "reason": f"graded {item['id']}"},
        }
        return messages_reply([block], stop_reason="tool_use", model=JUDGE_MODEL)

    return handler


def test_calibrate_against_hand_computed_agreement(tmp_path):
    items = json.loads(DATASET.read_text())
    rubric = tmp_path / "rubric.md"
    rubric.write_text("A change passes only if every criterion holds; tests are optional.")
    with ScriptedServer(handler=scripted_judge(items)) as server:
        judge = Judge(model=JUDGE_MODEL, base_url=server.url, api_key_env="JUDGE_KEY")
        report = calibrate_judge(str(rubric), str(DATASET), judge, {"JUDGE_KEY": "k"}, PRICES)
    assert len(server.requests) == 20
    assert "tests are optional" in server.requests[0].body["messages"][0]["content"]

    # By hand: the abstained item is left out; the rest are graded.
    graded = [i for i in items if i["id"] not in ABSTAINED]
    n = len(graded)
    truth = [i["label"] for i in graded]
    pred = [i["label"] if i["id"] not in FLIPPED else 1 - i["label"] for i in graded]
    tp = sum(1 for t, p in zip(truth, pred, strict=True) if t == 1 and p == 1)
    tn = sum(1 for t, p in zip(truth, pred, strict=True) if t == 0 and p == 0)
    fp = sum(1 for t, p in zip(truth, pred, strict=True) if t == 0 and p == 1)
    fn = sum(1 for t, p in zip(truth, pred, strict=True) if t == 1 and p == 0)
    assert (tp, fn, fp, tn) == (8, 2, 1, 8)
    po = (tp + tn) / n  # observed agreement
    pe = ((tp + fn) / n) * ((tp + fp) / n) + ((tn + fp) / n) * ((tn + fn) / n)  # chance
    kappa = (po - pe) / (1 - pe)
    assert kappa == pytest.approx(124 / 181)

    assert report["items"] == 20 and report["graded"] == 19 and report["abstained"] == 1
    assert report["accuracy"] == pytest.approx(po) == pytest.approx(16 / 19)
    assert report["kappa"] == pytest.approx(kappa)
    assert report["confusion"] == {"tp": tp, "fn": fn, "fp": fp, "tn": tn}
    assert report["confusion_table"]["values"] == [[tp, fn], [fp, tn]]
    assert sorted(report["disagreements"]) == sorted(FLIPPED)
    # 20 calls of 100 input + 20 output tokens at $3/$15 per million
    assert report["cost_usd"] == pytest.approx(20 * (100 * 3 + 20 * 15) / 1e6)
    assert "Cohen's kappa 0.685" in format_report(report)


def test_kappa_and_confusion_helpers():
    assert cohen_kappa([1, 1, 0, 0], [1, 1, 0, 0]) == 1.0
    assert cohen_kappa([1, 0, 1, 0], [0, 1, 0, 1]) == pytest.approx(-1.0)
    # po = 0.75, pe = 0.5*0.75 + 0.5*0.25 = 0.5 -> kappa 0.5
    assert cohen_kappa([1, 1, 0, 0], [1, 1, 1, 0]) == pytest.approx(0.5)
    assert cohen_kappa([1, 1], [1, 1]) is None  # chance agreement 1: undefined
    assert confusion([1, 1, 0, 0], [1, 0, 1, 0]) == {"tp": 1, "fn": 1, "fp": 1, "tn": 1}
