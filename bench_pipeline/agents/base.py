"""The agent interface: one small class per kind, registered by name (Inspect AI's 'solver').

An agent gets an `AgentRequest` for one attempt of one trial and returns an `AgentResult`.
It never grades itself: after each attempt the trial runner runs the deterministic checks and,
if attempts remain, calls the agent again with the failing findings in `request.prompt`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from bench_pipeline.agents.transcript import Transcript
from bench_pipeline.formats.model import AgentSpec, Prices, Task
from bench_pipeline.formats.registry import AGENT_KINDS

# Attempt statuses. `completed` means the agent finished on its own; the checks decide quality.
COMPLETED = "completed"
ERROR = "error"
BUDGET = "budget"  # known spend above budget_usd
TIMEOUT = "timeout"
MAX_TURNS = "max_turns"


@dataclass
class Usage:
    """Tokens and cost. `None` means unknown, never zero."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    cost_unknown_reason: str | None = None

    def __add__(self, other: Usage) -> Usage:
        def plus(a: Any, b: Any) -> Any:
            if a is None and b is None:
                return None
            return (a or 0) + (b or 0)

        unknown = self.cost_unknown_reason or other.cost_unknown_reason
        cost = None if unknown else plus(self.cost_usd, other.cost_usd)
        return Usage(
            plus(self.input_tokens, other.input_tokens),
            plus(self.output_tokens, other.output_tokens),
            plus(self.cache_read_tokens, other.cache_read_tokens),
            plus(self.cache_write_tokens, other.cache_write_tokens),
            cost,
            unknown,
        )

    @classmethod
    def unknown(cls, reason: str) -> Usage:
        return cls(cost_unknown_reason=reason)

    @classmethod
    def free(cls) -> Usage:
        """A stand-in agent that calls no model: its cost is known to be zero."""
        return cls(0, 0, 0, 0, 0.0, None)


@dataclass
class AgentRequest:
    task: Task
    agent: AgentSpec  # fully resolved: config overrides and suite defaults applied
    workspace: Path | None  # None for text tasks
    prompt: str  # the task prompt; on later attempts followed by the failing-check findings
    attempt: int  # 1-based
    deadline: float  # time.monotonic() by which the whole trial must end
    spent_usd: float | None  # known spend of earlier attempts (None = unknown)
    inputs_dir: Path  # snapshot of the suite's grader files and references (read-only for agents)
    evidence_dir: Path  # this trial's evidence folder (agents may write files here)
    transcript: Transcript
    prices: Prices
    env: dict[str, str]  # scrubbed environment plus the agent's allow-listed variables
    state: dict[str, Any] = field(default_factory=dict)  # carried across attempts of one trial
    cancelled: Callable[[], bool] = lambda: False
    # This trial's private work area (beside the workspace), removed after the trial: where an
    # agent keeps what must not become evidence (a CLI's home, config and session files).
    work_dir: Path | None = None
    # Where files passed to and from the agent's processes go (prompt, usage) when they cannot
    # see the evidence folder (isolation: sandbox); None = evidence_dir.
    scratch_dir: Path | None = None

    def seconds_left(self) -> float:
        return self.deadline - time.monotonic()


@dataclass
class AgentResult:
    status: str  # COMPLETED | ERROR | BUDGET | TIMEOUT | MAX_TURNS
    usage: Usage
    error: str | None = None
    answer: str | None = None  # text answer (text and scenario tasks)
    turns: list[dict[str, Any]] = field(default_factory=list)  # per-turn records (scenarios)
    retries: int = 0  # transient API errors retried
    model: str | None = None  # the model that answered when not the spec's (replay: recorded)


class Agent(ABC):
    kind: ClassVar[str]  # the registry name, as written in an agent file's `kind:`
    # True for agents that call no model and spend nothing (the offline stand-ins): the
    # estimate caps them at $0 and they need no API key.
    offline: ClassVar[bool] = False
    # True for the controls that bound the scale (the oracle, the do-nothing agent): shown in
    # results, never recommended.
    control: ClassVar[bool] = False
    # False for agents whose answer cannot change with feedback (the offline stand-ins): the
    # trial then ends after one attempt whatever max_iterations says.
    takes_feedback: ClassVar[bool] = True
    # False for agents that run inside this process and start no process (a chat endpoint
    # called through httpx): a text task then gets no private home, tmp and scratch folders,
    # which nothing would use (making and removing them was ~2 ms of a ~5 ms text case).
    starts_processes: ClassVar[bool] = True

    def __init__(self, spec: AgentSpec):
        self.spec = spec

    @classmethod
    def spec_problem(cls, spec: AgentSpec) -> tuple[str, str] | None:
        """(key, problem) when an agent file of this kind lacks what the kind needs; the loader
        reports it as the file's error."""
        return None

    def task_problem(self, task: Task) -> tuple[str, str] | None:
        """(key of the task, problem) when this agent could never be given `task` as
        configured (e.g. a prompt too long to pass as an argument); refused before the run."""
        return None

    def not_applicable(self, task: Task) -> tuple[str, str] | None:
        """(message, short reason) when this agent cannot run `task` at all; None otherwise.
        Checked before a workspace is made, so nothing is spent on such a trial."""
        return None

    def preflight(self, environ: dict[str, str]) -> None:  # noqa: B027 - optional hook
        """Refuse early (raise BenchInputError) what would fail mid-run, e.g. a missing API key."""

    @abstractmethod
    def run(self, request: AgentRequest) -> AgentResult: ...


class TaskFault(Exception):
    """The task, not the agent, is broken (a reference or recorded patch that does not apply
    to its base): the trial is a task error, an infrastructure outcome never scored."""


def register_agent(cls: type[Agent]) -> type[Agent]:
    """Class decorator: make `cls` the agent of `kind: <cls.kind>` in agent files."""
    AGENT_KINDS.register(cls)
    return cls


def make_agent(spec: AgentSpec) -> Agent:
    return AGENT_KINDS.get(spec.kind)(spec)
