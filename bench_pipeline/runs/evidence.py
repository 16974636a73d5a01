"""Gather each trial's evidence (diff, transcript, checks, turns) for the results explorer.

`gather_evidence(trials, check_commands(run)) -> (evidence, caps)`: a dict trial_id -> bounded snippets read
from the trial's evidence folder, and the caps that bounded them (the page says when a piece
was cut). Failing and infrastructure trials are read first, so when the whole-report budget
runs out it is the passing trials whose evidence is left out (and the page says so).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pandas as pd

from bench_pipeline.runs.benchmark_run import BenchmarkRun

# Bounds that keep a report of a big run a file a browser opens quickly.
DIFF_CAP = 60_000  # characters of changes.patch per trial
OUTPUT_CAP = 8_000  # characters of one check's output
FIELD_CAP = 4_000  # characters of one string inside a transcript event
EVENTS_CAP = 300  # transcript events per trial
TURN_CAP = 8_000  # characters of one text-task answer
TOTAL_CAP = 30_000_000  # characters of evidence in the whole report
CAPS = {
    "diff_chars": DIFF_CAP,
    "check_output_chars": OUTPUT_CAP,
    "event_field_chars": FIELD_CAP,
    "events": EVENTS_CAP,
    "turn_chars": TURN_CAP,
    "total_chars": TOTAL_CAP,
}


def _cut(text: str | None, cap: int) -> tuple[str | None, bool]:
    if text is None or len(text) <= cap:
        return text, False
    return text[:cap], True


LIST_CAP = 200  # items of one list inside a transcript event, a turn or an attempt
# JSON text shorter than this holds no string longer than FIELD_CAP characters and no list of
# more than LIST_CAP items (each item takes a character and a comma): its value needs no
# bounding, and most events of a transcript are that short (a walk of each costs more than
# reading it).
_ALWAYS_BOUNDED = min(FIELD_CAP, 2 * LIST_CAP + 2)


def _bounded(value: Any, cap: int = FIELD_CAP) -> Any:
    """A JSON value with every long string cut to `cap` (marked with the cut length)."""
    if isinstance(value, str):
        return value if len(value) <= cap else value[:cap] + f" … [cut: {len(value)} chars]"
    if isinstance(value, list):
        return [_bounded(v, cap) for v in value[:LIST_CAP]]
    if isinstance(value, dict):
        return {str(k): _bounded(v, cap) for k, v in value.items()}
    return value


def _files(folder: Path) -> set[str]:
    """The names of the regular files in `folder` (one listing, not a stat per name)."""
    with os.scandir(folder) as entries:
        return {e.name for e in entries if e.is_file()}


def _read(path: Path, files: set[str]) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace") if path.name in files else None
    except OSError:
        return None


def _json(path: Path, files: set[str], default: Any) -> Any:
    text = _read(path, files)
    if text is None:
        return default
    try:
        return json.loads(text)
    except ValueError:
        return default


def _transcript(folder: Path, files: set[str]) -> tuple[list[dict[str, Any]], int]:
    text = _read(folder / "transcript.jsonl", files) or ""
    events: list[dict[str, Any]] = []
    total = 0
    for line in text.splitlines():
        if not line.strip():
            continue
        total += 1
        if len(events) >= EVENTS_CAP:
            continue
        try:
            event = json.loads(line)
            events.append(event if len(line) < _ALWAYS_BOUNDED else _bounded(event))
        except ValueError:
            events.append({"event": "unreadable line", "text": line[:FIELD_CAP]})
    return events, total


def trial_evidence(folder: Path, commands: dict[str, list[str]]) -> dict[str, Any]:
    """One trial's bounded evidence; `commands` maps check id -> its command (from the task)."""
    try:
        files = _files(folder)
    except OSError:  # (gone, or not a folder: as a folder without its files)
        files = set()
    diff, diff_cut = _cut(_read(folder / "changes.patch", files), DIFF_CAP)
    events, total_events = _transcript(folder, files)
    checks = []
    for c in _json(folder / "checks.json", files, []):
        output, output_cut = _cut(c.get("output"), OUTPUT_CAP)
        checks.append(
            {
                "id": c.get("id"),
                "description": c.get("description"),
                "command": commands.get(str(c.get("id"))),
                "status": c.get("status"),
                "exit_code": c.get("exit_code"),
                "timed_out": c.get("timed_out"),
                "duration_seconds": c.get("duration_seconds"),
                "output": output,
                "output_cut": output_cut,
            }
        )
    turns = [
        {
            **_bounded({k: v for k, v in t.items() if k != "response"}),
            "response": _cut(t.get("response"), TURN_CAP)[0],
            "response_cut": _cut(t.get("response"), TURN_CAP)[1],
        }
        for t in _json(folder / "turns.json", files, [])
        if isinstance(t, dict)
    ]
    return {
        "diff": diff,
        "diff_cut": diff_cut,
        "events": events,
        "events_total": total_events,
        "checks": checks,
        "turns": turns,
    }


def _size(evidence: dict[str, Any]) -> int:
    return len(json.dumps(evidence, default=str))


def check_commands(run: BenchmarkRun) -> dict[str, dict[str, list[str]]]:
    """task id -> check id -> the check's command, as frozen in the run."""
    return {t.id: {c.id: list(c.command) for c in t.checks} for t in run.taskset.tasks}


def gather_evidence(
    trials: pd.DataFrame,
    commands: dict[str, dict[str, list[str]]],
    total_cap: int = TOTAL_CAP,
) -> tuple[dict[str, dict[str, Any]], dict[str, int]]:
    """Bounded evidence of every trial of `trials` (latest row per trial), see module doc;
    `commands` from `check_commands(run)`."""
    order = trials.assign(_ok=(trials["outcome"] == "succeeded").astype(int)).sort_values(
        ["_ok", "trial_id"]
    )
    out: dict[str, dict[str, Any]] = {}
    used = 0
    for row in order.itertuples():
        folder = Path(str(row.evidence_dir)) if isinstance(row.evidence_dir, str) else None
        if folder is None or not folder.is_dir():
            out[row.trial_id] = {"missing": f"no evidence folder at {row.evidence_dir}"}
            continue
        if used >= total_cap:
            out[row.trial_id] = {
                "omitted": f"left out: the report's evidence budget ({total_cap:,} characters) "
                f"was spent on earlier trials; the evidence is in {folder}"
            }
            continue
        ev = trial_evidence(folder, commands.get(row.task_id, {}))
        used += _size(ev)
        out[row.trial_id] = ev
    return out, {**CAPS, "total_chars": total_cap}
