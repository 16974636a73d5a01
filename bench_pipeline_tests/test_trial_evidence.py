"""A trial's evidence as scorers see it (`scorers.base.TrialEvidence`): the fields held in the
evidence folder's files are read when a scorer first uses them, once, and only those."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench_pipeline.formats.model import Assertion
from bench_pipeline.formats.vocabulary import SCORE_SCORED
from bench_pipeline.scorers.base import make_scorer
from bench_pipeline_tests.test_scorer_support import code_task, context, text_task, trial

ANSWER = "Refunds are accepted within 30 days."
_opened: list[str] = []
_watching: list[Path] = []


def _audit(event: str, args: tuple) -> None:
    # The interpreter's own record of every file opened (audit hooks cannot be removed:
    # this one only records under a folder a test names).
    if event == "open" and _watching and isinstance(args[0], str | Path):
        path = Path(args[0])
        if _watching[0] in path.parents:
            _opened.append(path.name)


sys.addaudithook(_audit)


def _evidence_folder(tmp: Path) -> Path:
    folder = tmp / "evidence"
    folder.mkdir()
    turns = [{"turn": 1, "user": "How long?", "response": ANSWER, "completion_tokens": 9}]
    (folder / "turns.json").write_text(json.dumps(turns))
    (folder / "answer.txt").write_text(ANSWER)
    (folder / "checks.json").write_text(json.dumps([{"id": "AC-1", "status": "passed"}]))
    (folder / "metadata.json").write_text('{"output_tokens": 9, "cut sho')  # cut by a cap
    return folder


def test_a_scorer_reads_the_files_it_uses_once_and_no_other(tmp_path: Path) -> None:
    folder = _evidence_folder(tmp_path)
    task = text_task(asserts=(Assertion("contains", "30 days"),))
    evidence = trial(task, folder, from_files=True)
    scorer = make_scorer("assert", context(tmp_path))
    _opened.clear()
    _watching[:] = [folder]
    try:
        (first,) = scorer.score(evidence)
        (again,) = scorer.score(evidence)
    finally:
        _watching.clear()
    assert (first.status, first.value) == (SCORE_SCORED, 1.0) and again.value == 1.0
    assert _opened == ["turns.json"]  # not the patch, checks, attempts nor metadata


def test_file_fields_read_as_the_folder_holds_them(tmp_path: Path) -> None:
    folder = _evidence_folder(tmp_path)
    evidence = trial(code_task(), folder, from_files=True)
    assert evidence.answer == ANSWER
    assert evidence.turns[0]["response"] == ANSWER
    assert evidence.checks == [{"id": "AC-1", "status": "passed"}]
    assert evidence.patch is None  # no changes.patch: a text task's evidence has none
    assert evidence.metadata == {}  # JSON cut short by the evidence cap reads as empty
    assert evidence.attempts == []  # (the attempts are metadata's: as cut short)
    # read once: the value a scorer saw stays the trial's, whatever happens to the file
    (folder / "answer.txt").write_text("changed")
    assert evidence.answer == ANSWER
    assert evidence.as_json()["answer"] == ANSWER


def test_given_fields_are_used_as_given_and_no_folder_is_read_without_from_files(
    tmp_path: Path,
) -> None:
    folder = _evidence_folder(tmp_path)
    given = trial(text_task(), folder, from_files=True, answer="given", turns=[])
    assert (given.answer, given.turns) == ("given", [])
    assert given.checks == [{"id": "AC-1", "status": "passed"}]  # not given: from the file
    hand_built = trial(text_task(), folder)
    _opened.clear()
    _watching[:] = [folder]
    try:
        fields = (hand_built.patch, hand_built.answer, hand_built.turns, hand_built.metadata)
    finally:
        _watching.clear()
    assert fields == (None, None, [], {}) and _opened == []
    hand_built.turns.append({"turn": 1})  # a mutable default is the instance's own
    assert hand_built.turns == [{"turn": 1}] and trial(text_task(), folder).turns == []


def test_the_attempts_are_the_metadata_files_and_a_text_case_writes_no_checks(
    tmp_path: Path,
) -> None:
    folder = _evidence_folder(tmp_path)
    attempts = [{"attempt": 1, "status": "failed"}, {"attempt": 2, "status": "completed"}]
    (folder / "metadata.json").write_text(
        json.dumps({"outcome": "succeeded", "attempts": attempts})
    )
    (folder / "checks.json").unlink()
    evidence = trial(text_task(), folder, from_files=True)
    assert evidence.attempts == attempts
    assert evidence.checks == []  # no checks.json: the task has no checks
    assert evidence.metadata["attempts"] == attempts
    (folder / "metadata.json").write_text(json.dumps({"attempts": {"not": "a list"}}))
    assert trial(text_task(), folder, from_files=True).attempts == []
