"""Evidence for the explorer stays bounded: each piece is cut at its cap and marked, and the
whole report's budget leaves later (passing) trials out with a note. Real files on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd

from bench_pipeline.runs import evidence as E


def _trial_dir(root: Path, name: str, patch_chars: int) -> Path:
    d = root / name
    d.mkdir(parents=True)
    (d / "changes.patch").write_text("+" * patch_chars)
    events = [{"event": "tool_result", "content": "x" * (E.FIELD_CAP * 2)}] * (E.EVENTS_CAP + 5)
    (d / "transcript.jsonl").write_text("\n".join(json.dumps(e) for e in events))
    (d / "checks.json").write_text(
        json.dumps(
            [{"id": "AC-1", "status": "failed", "exit_code": 1, "output": "o" * (E.OUTPUT_CAP + 1)}]
        )
    )
    return d


def test_caps_cut_and_mark(tmp_path: Path) -> None:
    d = _trial_dir(tmp_path, "t1", E.DIFF_CAP + 10)
    ev = E.trial_evidence(d, {"AC-1": ["python", "grader.py"]})
    assert ev["diff_cut"] and len(ev["diff"]) == E.DIFF_CAP
    assert len(ev["events"]) == E.EVENTS_CAP and ev["events_total"] == E.EVENTS_CAP + 5
    assert ev["events"][0]["content"].endswith(f"[cut: {E.FIELD_CAP * 2} chars]")
    (check,) = ev["checks"]
    assert check["output_cut"] and len(check["output"]) == E.OUTPUT_CAP
    assert check["command"] == ["python", "grader.py"] and check["exit_code"] == 1


def test_report_budget_leaves_passing_trials_out(tmp_path: Path) -> None:
    failing = _trial_dir(tmp_path, "fail", 100)
    passing = _trial_dir(tmp_path, "pass", 100)
    trials = pd.DataFrame(
        [
            {
                "trial_id": "a/x/1",
                "task_id": "a",
                "outcome": "succeeded",
                "evidence_dir": str(passing),
            },
            {
                "trial_id": "b/x/1",
                "task_id": "b",
                "outcome": "agent_error",
                "evidence_dir": str(failing),
            },
            {
                "trial_id": "c/x/1",
                "task_id": "c",
                "outcome": "succeeded",
                "evidence_dir": str(tmp_path / "gone"),
            },
        ]
    )
    out, caps = E.gather_evidence(trials, {}, total_cap=10)
    assert "diff" in out["b/x/1"]  # the failing trial is read first
    assert "budget" in out["a/x/1"]["omitted"] and str(passing) in out["a/x/1"]["omitted"]
    assert "no evidence folder" in out["c/x/1"]["missing"]
    assert caps["total_chars"] == 10


def test_every_event_is_bounded_as_the_full_walk_bounds_it(tmp_path: Path) -> None:
    """Short transcript lines are kept as read (no string or list in them can reach a cap);
    the shortest lines that hold a list over LIST_CAP items or a string over FIELD_CAP
    characters, and everything longer, are cut as the full walk cuts them."""
    events = [
        {"event": "turn", "text": "short"},
        [1] * (E.LIST_CAP + 1),  # the shortest over-long list: 2 x 201 + 1 characters
        {"e": [0] * (E.LIST_CAP + 1)},
        {"event": "tool_result", "content": "y" * (E.FIELD_CAP + 1)},
        {"nested": {"deep": ["z" * (E.FIELD_CAP + 5)]}},
        {"list": list(range(E.LIST_CAP))},  # at the cap: kept whole
        "a bare string",
    ]
    d = tmp_path / "t"
    d.mkdir()
    lines = [json.dumps(e, separators=(",", ":")) for e in events]
    assert len(lines[1]) == 2 * (E.LIST_CAP + 1) + 1
    (d / "transcript.jsonl").write_text("\n".join(lines) + "\n")
    ev = E.trial_evidence(d, {})
    assert ev["events"] == [E._bounded(e) for e in events]
    assert len(ev["events"][1]) == E.LIST_CAP and len(ev["events"][2]["e"]) == E.LIST_CAP
    assert ev["events"][3]["content"].endswith(f"[cut: {E.FIELD_CAP + 1} chars]")
    assert ev["events"][4]["nested"]["deep"][0].endswith(f"[cut: {E.FIELD_CAP + 5} chars]")
    assert ev["events"][5] == events[5]
