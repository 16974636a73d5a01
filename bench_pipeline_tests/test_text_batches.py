"""Quick text cases' rows are written together (warehouse/trial_rows.py): every case keeps its
trial row, score rows and evidence; held rows reach the disk within the hold time while other
cases run; a kill -9 and `--resume` lose and duplicate nothing; a case run again leaves no
earlier row behind in a shared file."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import Warehouse
from bench_pipeline.warehouse.trial_rows import TrialRowWriter, forget_trials, is_quick
from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.http_fakes import Recorded, Reply, ScriptedServer

ANSWER = "Refunds are accepted within 30 days of purchase."


def _reply(_: Recorded) -> Reply:
    return Reply(
        200,
        {
            "choices": [{"message": {"role": "assistant", "content": ANSWER}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 9},
        },
    )


def _factory(root: Path, url: str, tasks: int, reps: int = 1) -> Path:
    (root / "agents").mkdir(parents=True)
    (root / "launches").mkdir()
    tasks_dir = root / "benchmarks" / "text" / "tasks"
    tasks_dir.mkdir(parents=True)
    (root / "prices.yaml").write_text("chat-model: {input: 1.0, output: 5.0}\n")
    (root / "agents" / "bot.yaml").write_text(
        f"kind: http-chat\nmodel: chat-model\nurl: {url}/v1\ntimeout_seconds: 120\n"
    )
    (root / "benchmarks" / "text" / "suite.yaml").write_text("title: Text\nagent: bot\n")
    for i in range(tasks):
        (tasks_dir / f"case-{i:02d}.yaml").write_text(
            f"id: case-{i:02d}\nprompt: 'Case {i}: how long is the refund window?'\n"
            "assert:\n"
            '  - {type: contains, value: "30 days"}\n'
            '  - {type: not_contains, value: "sk_live_"}\n'
        )
    launch = root / "launches" / "text.yaml"
    launch.write_text(
        "kind: BenchmarkLaunch\nsuite: text\nconfigs:\n  - {id: bot, agent: bot}\n"
        f"repetitions: {reps}\nscorers: [assert]\nmax_parallel: 1\n"
    )
    return launch


def _case_of(rec: Recorded) -> str:
    return re.search(r"Case (\d+)", rec.body["messages"][-1]["content"]).group(1)


def _trial_files(home: Path, run_id: str | None = None) -> list[Path]:
    base = home / "warehouse" / "trials"
    return sorted((base / run_id if run_id else base).rglob("*.parquet"))


def _assert_every_case_once(home: Path, run_id: str, total: int) -> None:
    wh = Warehouse(home / "warehouse")
    trials = wh.read("trials", run_id)
    counts = Counter(trials["trial_id"])
    assert len(counts) == total and set(counts.values()) == {1}, counts
    assert set(trials["outcome"]) == {"succeeded"}, trials[["trial_id", "outcome"]]
    scores = wh.read("scores", run_id)
    graded = Counter(scores.loc[scores["scorer"] == "assert", "trial_id"])
    assert graded == Counter({t: 1 for t in counts}), scores
    for folder in trials["evidence_dir"]:
        assert (Path(folder) / "answer.txt").read_text() == ANSWER
        meta = json.loads((Path(folder) / "metadata.json").read_text())
        assert meta["outcome"] == "succeeded" and meta["input_tokens"] == 12
        assert [a["status"] for a in meta["attempts"]] == ["completed"]
        # a text case's files: no checks (it has none), no patch, the attempts in metadata
        assert sorted(p.name for p in Path(folder).iterdir()) == [
            "answer.txt",
            "metadata.json",
            "transcript.jsonl",
            "turns.json",
        ]


def test_a_text_run_writes_each_case_once_with_its_scores_and_evidence(
    tmp_path: Path, bench_home: Path
) -> None:
    with ScriptedServer(_reply) as server:
        launch = _factory(tmp_path / "factory", server.url, tasks=6, reps=2)
        code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
        assert code == 0, err
        assert len(server.requests) == 12
    result = json.loads(out)
    run_id = result["run"]["run_id"]
    assert result["config_table"][0]["overall"] == 1.0
    _assert_every_case_once(bench_home, run_id, 12)
    # Every file is either one case's own (named after its task) or a batch of several.
    wh = Warehouse(bench_home / "warehouse")
    import pyarrow.parquet as pq

    for path in _trial_files(bench_home, run_id):
        rows = pq.read_table(path).to_pylist()
        if path.parent.name == layout.BATCHES:
            assert len(rows) >= 2
            assert {r["repetition"] for r in rows} == {int(path.parent.parent.name[3:])}
        else:
            assert [r["task_id"] for r in rows] == [path.stem]
    assert len(wh.read("trials", run_id, under=layout.partition_dir("bot", 1))) == 6


def test_a_long_answer_is_capped_in_the_evidence_and_said_so(
    tmp_path: Path, bench_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_MAX_EVIDENCE_FILE_BYTES", "4096")
    long = ANSWER + " " + "more " * 2000

    def reply(_: Recorded) -> Reply:
        return Reply(200, {"choices": [{"message": {"content": long}}], "usage": {}})

    with ScriptedServer(reply) as server:
        launch = _factory(tmp_path / "factory", server.url, tasks=2)
        code, out, err = run_bench("run", str(launch), "--json", home=bench_home)
        assert code == 0, err
    run_id = json.loads(out)["run"]["run_id"]
    trials = Warehouse(bench_home / "warehouse").read("trials", run_id)
    assert list(trials["evidence_truncated"]) == [True, True]
    for folder in trials["evidence_dir"]:
        assert (Path(folder) / "answer.txt").stat().st_size == 4096
        meta = json.loads((Path(folder) / "metadata.json").read_text())
        assert meta["evidence"]["files"]["answer.txt"]["full_bytes"] == len(long.encode())
        # turns.json (the response again) is cut too: no longer JSON, and still scored.
        assert meta["evidence"]["files"]["turns.json"]["truncated"]
    scores = Warehouse(bench_home / "warehouse").read("scores", run_id)
    assert list(scores.loc[scores["scorer"] == "assert", "status"]) == ["scored", "scored"]


def _row(task: str, rep: int = 1, outcome: str = "succeeded") -> dict:
    return {
        "run_id": "r1",
        "trial_id": f"{task}/bot/{rep}",
        "task_id": task,
        "config_id": "bot",
        "repetition": rep,
        "outcome": outcome,
        "duration_seconds": 0.01,
    }


def test_held_rows_are_written_together_and_a_slow_trial_alone(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    writer = TrialRowWriter(wh, "r1", hold_seconds=3600)
    for i in range(3):
        writer.add(_row(f"t{i}"), [], [], quick=True)
    assert not list((tmp_path / "trials").rglob("*.parquet"))  # held: nothing on disk yet
    check = {"run_id": "r1", "trial_id": "slow/bot/1", "check_id": "c", "attempt": 1}
    writer.add(_row("slow"), [check], [], quick=False)  # written at once, the held ones first
    files = sorted((tmp_path / "trials").rglob("*.parquet"))
    assert [f.relative_to(tmp_path / "trials" / "r1").parts[:3] for f in files] == [
        ("bot", "rep1", layout.BATCHES),
        ("bot", "rep1", "slow.parquet"),
    ]
    assert len(wh.read("trials", "r1")) == 4
    assert list(wh.read("check_results", "r1")["trial_id"]) == ["slow/bot/1"]
    writer.add(_row("t9", rep=2), [], [], quick=True)
    writer.close()  # a single held row: its own file, as if never held
    assert (tmp_path / "trials" / "r1" / "bot" / "rep2" / "t9.parquet").exists()
    assert is_quick(0.2) and not is_quick(5.0) and not is_quick(None)


def test_held_rows_reach_the_disk_within_the_hold_time(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    writer = TrialRowWriter(wh, "r1", hold_seconds=0.05)
    writer.add(_row("a"), [], [], quick=True)
    writer.add(_row("b"), [], [], quick=True)
    deadline = time.monotonic() + 60  # the timer fires after 0.05 s; generous on a loaded box
    while len(wh.read("trials", "r1")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(wh.read("trials", "r1")["task_id"]) == ["a", "b"]


def test_forget_trials_removes_a_trials_rows_from_batches_and_own_files(tmp_path: Path) -> None:
    from dataclasses import replace

    from bench_pipeline.formats.model import Config
    from bench_pipeline.trials.runner import TrialSpec
    from bench_pipeline_tests.test_agent_support import make_spec, make_task

    wh = Warehouse(tmp_path)
    writer = TrialRowWriter(wh, "r1", hold_seconds=3600)
    for task in ("a", "b", "c"):
        writer.add(_row(task, outcome="cancelled"), [], [], quick=True)
    writer.flush(("bot", 1))
    writer.add(_row("d", outcome="cancelled"), [], [], quick=False)
    writer.add(_row("e", rep=2), [], [], quick=False)
    config = Config(id="bot", agent=make_spec("http-chat", url="http://127.0.0.1:9/v1"))

    def spec(task: str, rep: int = 1) -> TrialSpec:
        return TrialSpec(replace(make_task(text=True), id=task), config, rep)

    again = [spec("a"), spec("b"), spec("d")]
    assert forget_trials(wh, "r1", [("bot", 1), ("bot", 2)], again) == 2
    assert sorted(wh.read("trials", "r1")["task_id"]) == ["c", "e"]
    assert forget_trials(wh, "r1", [("bot", 1)], [spec("c")]) == 1  # the batch file goes
    assert not list((tmp_path / "trials" / "r1" / "bot" / "rep1").rglob("*.parquet"))
    assert forget_trials(wh, "fresh", [("bot", 1)], again) == 0  # nothing written: no-op


@pytest.mark.slow
def test_sigkill_during_text_cases_then_resume_loses_and_duplicates_nothing(
    tmp_path: Path, bench_home: Path
) -> None:
    """The 5th chat request hangs: the four cases before it reach the disk (the hold timer)
    while it is in flight; kill -9 there, then `--resume` asks only for the cases without a
    row, and every case ends with one row, its scores and its evidence."""
    release = threading.Event()
    seen: list[str] = []
    lock = threading.Lock()

    def reply(rec: Recorded) -> Reply:
        with lock:
            seen.append(_case_of(rec))
            hang = len(seen) == 5
        if hang:
            release.wait(120)
        return _reply(rec)

    with ScriptedServer(reply) as server:
        launch = _factory(tmp_path / "factory", server.url, tasks=8)
        bench = Path(sys.executable).parent / "bench"
        proc = subprocess.Popen(
            [str(bench), "--home", str(bench_home), "run", str(launch), "--quiet"],
            env={**os.environ, "BENCH_HOME": str(bench_home)},
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        try:
            run_id = re.match(r"run (\S+):", proc.stderr.readline()).group(1)
            wh = Warehouse(bench_home / "warehouse")
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and (
                len(seen) < 5 or len(wh.read("trials", run_id)) < 4
            ):
                time.sleep(0.1)
            written = {int(t[5:]) for t in wh.read("trials", run_id)["task_id"]}
            assert len(written) == 4 and len(seen) == 5, (written, seen)
        finally:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            release.set()
        before = list(seen)
        code, out, err = run_bench("run", "--resume", run_id, "--json", home=bench_home)
        assert code == 0, err
    _assert_every_case_once(bench_home, run_id, 8)
    again = Counter(seen[len(before) :])
    # The cases on disk before the kill were never asked again; the one in flight was.
    assert not {int(c) for c in again} & written, (again, written)
    assert Counter(seen) == Counter({str(i): 1 for i in range(8)}) + Counter({before[-1]: 1}), seen
