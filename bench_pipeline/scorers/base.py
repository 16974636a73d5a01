"""The scorer interface (Inspect AI's 'scorer'): grade one finished trial from its evidence.

Scorers never rerun agents and never need the workspace: everything they read is in the
trial's evidence (patch, answer, turns, check results, transcript). That is what makes
rescoring a cheap backfill of the score partitions.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bench_pipeline.formats.model import Config, Judge, Prices, Task
from bench_pipeline.formats.registry import SCORER_KINDS
from bench_pipeline.formats.vocabulary import (
    SCORE_ERROR,
    SCORE_INCONCLUSIVE,
    SCORE_MISSING,
    SCORE_NOT_SCORED,
    SCORE_SCORED,
)

__all__ = [
    "SCORE_ERROR",
    "SCORE_INCONCLUSIVE",
    "SCORE_MISSING",
    "SCORE_NOT_SCORED",
    "SCORE_SCORED",
    "ScoreResult",
    "Scorer",
    "ScorerContext",
    "TrialEvidence",
    "register_scorer",
    "make_scorer",
]


@dataclass
class ScoreResult:
    scorer: str  # "checks", "llm_judge:efficiency", "workflow:lint"
    status: str
    value: float | None = None  # normalized to [0, 1]; None unless scored
    reason: str = ""
    raw_value: float | None = None
    scale_max: float = 1.0
    weight: float = 1.0
    group: str | None = None  # defaults to the scorer name; "llm_judge" for every criterion
    cost_usd: float | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def scored(cls, scorer: str, raw: float, scale_max: float = 1.0, **kw: Any) -> ScoreResult:
        value = max(0.0, min(1.0, raw / scale_max)) if scale_max else raw
        return cls(scorer, SCORE_SCORED, value, raw_value=raw, scale_max=scale_max, **kw)


_UNREAD: Any = type("_Unread", (), {"__repr__": lambda self: "<unread>"})()


class EvidenceFile:
    """A TrialEvidence field held in one file of the trial's evidence folder (or one key of
    the JSON object in it).

    Given to the constructor, it is that value. Not given, it is the file's content when the
    evidence was made `from_files` (read on first access, once: a scorer reads one or two of
    the files, and opening the others was most of a text case's scoring), else empty.
    A missing file (a text task has no changes.patch nor checks.json) reads as empty, and so
    do JSON cut short by the evidence cap and JSON of another shape: what a reader of the
    folder sees."""

    def __init__(
        self, filename: str, kind: type[str] | type[list] | type[dict], key: str | None = None
    ) -> None:
        # `key`: the field is that key of the file's JSON object (the attempts are metadata's)
        self.filename, self.kind, self.key = filename, kind, key

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = f"_{name}"

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            return _UNREAD  # the dataclass field's default: "not given"
        value = obj.__dict__.get(self.slot, _UNREAD)
        if value is _UNREAD:
            value = self._read(obj.evidence_dir) if obj.from_files else self._empty()
            obj.__dict__[self.slot] = value
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.slot] = value

    def _empty(self) -> Any:
        return None if self.kind is str else self.kind()

    def _read(self, folder: Path) -> Any:
        try:
            text = (folder / self.filename).read_text(encoding="utf-8")
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return self._empty()
        if self.kind is str:
            return text
        try:
            value = json.loads(text) if text else self._empty()
        except ValueError:  # cut by the evidence cap (metadata says so)
            return self._empty()
        if self.key is not None:
            value = value.get(self.key) if isinstance(value, dict) else None
        return value if isinstance(value, self.kind) else self._empty()


@dataclass
class TrialEvidence:
    """Everything a scorer may read about one finished trial (loaded from its evidence dir:
    the file-backed fields are read when a scorer first uses them, see EvidenceFile)."""

    run_id: str
    trial_id: str
    task: Task
    config: Config
    repetition: int
    outcome: str
    error: str | None
    evidence_dir: Path
    iterations: int = 1
    patch: str | None = EvidenceFile("changes.patch", str)  # None for text tasks
    answer: str | None = EvidenceFile("answer.txt", str)  # final text answer
    # per-turn: user, response, ...
    turns: list[dict[str, Any]] = EvidenceFile("turns.json", list)
    # the final attempt's check results
    checks: list[dict[str, Any]] = EvidenceFile("checks.json", list)
    # every attempt's status, error and usage
    attempts: list[dict[str, Any]] = EvidenceFile("metadata.json", list, key="attempts")
    cost_usd: float | None = None
    duration_seconds: float | None = None
    metadata: dict[str, Any] = EvidenceFile("metadata.json", dict)
    # the fields above not given are read from evidence_dir (else empty)
    from_files: bool = field(default=False, repr=False, compare=False)

    @property
    def transcript_path(self) -> Path:
        return self.evidence_dir / "transcript.jsonl"

    @property
    def reference_patch(self) -> str | None:
        path = self.evidence_dir / "inputs" / (self.task.reference_patch or "")
        return path.read_text() if self.task.reference_patch and path.is_file() else None

    def as_json(self) -> dict[str, Any]:
        """The evidence handed to user scorers (workflow:<id>)."""
        return {
            "run_id": self.run_id,
            "trial_id": self.trial_id,
            "task": {
                "id": self.task.id,
                "title": self.task.title,
                "prompt": self.task.prompt,
                "criteria": list(self.task.criteria),
                "tags": list(self.task.tags),
            },
            "config": {"id": self.config.id, "hash": self.config.hash, **_jsonable(self.config)},
            "repetition": self.repetition,
            "outcome": self.outcome,
            "error": self.error,
            "iterations": self.iterations,
            "diff": self.patch,
            "answer": self.answer,
            "turns": self.turns,
            "checks": self.checks,
            "transcript_path": str(self.transcript_path),
            "evidence_dir": str(self.evidence_dir),
            "cost_usd": self.cost_usd,
            "duration_seconds": self.duration_seconds,
        }


def _jsonable(config: Config) -> dict[str, Any]:
    spec = config.agent
    return json.loads(
        json.dumps(
            {"agent": spec.name, "kind": spec.kind, "model": spec.model, "effort": spec.effort},
            default=str,
        )
    )


@dataclass
class ScorerContext:
    """Run-wide settings a scorer may need."""

    judge: Judge | None
    prices: Prices
    factory_root: Path
    config_models: tuple[str, ...] = ()  # models of the run's configs (judge-grades-itself flag)
    environ: dict[str, str] = field(default_factory=dict)  # where API keys are read from


class Scorer(ABC):
    name: ClassVar[str]  # registry key: "checks", "llm_judge", "workflow" (for workflow:<id>)
    uses_judge: ClassVar[bool] = False  # calls the judge model (needs its key; cost is scorer cost)
    takes_argument: ClassVar[bool] = False  # written `<name>:<id>` in a launch, e.g. workflow:fmt

    def __init__(self, context: ScorerContext, arg: str | None = None):
        self.context = context
        self.arg = arg  # "<id>" of "workflow:<id>"

    def preflight(self) -> None:  # noqa: B027 - optional hook
        """Refuse early (BenchInputError) what would fail for every trial, e.g. a missing key."""

    @abstractmethod
    def score(self, trial: TrialEvidence) -> list[ScoreResult]: ...


def register_scorer(cls: type[Scorer]) -> type[Scorer]:
    """Class decorator: make `cls` the scorer named `cls.name` in a launch's `scorers:`."""
    SCORER_KINDS.register(cls)
    return cls


def make_scorer(spec: str, context: ScorerContext) -> Scorer:
    """`spec` is a launch's scorer entry: "checks" or "workflow:<id>"."""
    kind, _, arg = spec.partition(":")
    return SCORER_KINDS.get(kind)(context, arg or None)
