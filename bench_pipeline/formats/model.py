"""Frozen, validated views of the factory files. Built only by `formats.loader`."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

EFFORTS = ("low", "medium", "high")
TOOLS = ("list_files", "read_file", "write_file", "edit_file", "run_command")
BUILTIN_CRITERIA = ("correctness", "efficiency", "verbosity")
ASSERT_TYPES = (
    "contains",
    "not_contains",
    "regex",
    "min_links",
    "min_urls",
    "valid_urls",
    "min_chars",
    "max_elapsed_ms",
    "max_completion_tokens",
    "max_cost_usd",
)
MAX_TRIALS, MAX_TASKS, MAX_CONFIGS, MAX_REPETITIONS = 500, 100, 8, 10
# Trials at once per configuration (a launch's or config's max_parallel, `--parallel`).
MAX_PARALLEL = 64
# The longest a trial may take (an agent's timeout_seconds, `--timeout`): a day.
MAX_TIMEOUT_SECONDS = 86400
# What a failed attempt's findings tell the next attempt: the output of failing checks and
# tests (`full`), only their ids and descriptions (`names`), or nothing but "try again" (`none`).
FINDINGS = ("full", "names", "none")
TEST_RUNNERS = ("pytest", "command")
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
_ID = re.compile(ID_PATTERN)
# Ids become file and folder names (evidence, references, partitions), some joined with
# others: well below the file systems' 255 bytes a name.
MAX_ID_LENGTH = 100


def valid_id(value: object) -> bool:
    """An id of a task, config, check, criterion or suite: the whole text must match (a
    trailing newline, which `$` alone lets through, is refused), in at most MAX_ID_LENGTH
    characters."""
    return (
        isinstance(value, str) and len(value) <= MAX_ID_LENGTH and _ID.fullmatch(value) is not None
    )


def content_hash(value: Any, length: int = 16) -> str:
    """Stable hash of JSON-able content (sorted keys), used for revisions and config hashes."""
    blob = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:length]


@dataclass(frozen=True)
class FrozenText:
    """A prompt or skill file frozen at launch: its text and hash travel with the run."""

    path: str  # relative to the factory root
    text: str
    sha256: str


@dataclass(frozen=True)
class AgentSpec:
    name: str
    kind: str
    model: str | None = None
    effort: str | None = None
    system_prompt: FrozenText | None = None
    skills: tuple[FrozenText, ...] = ()
    tools: tuple[str, ...] = TOOLS
    budget_usd: float | None = None
    max_iterations: int = 1
    max_turns: int = 50
    timeout_seconds: float = 1800.0
    env: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    preset: str | None = None  # command agents: claude-code | codex
    url: str | None = None
    api_key_env: str | None = None
    base_url: str | None = None  # anthropic: API base URL (a proxy or a test server)
    max_output_tokens: int = 8192
    # None = the default: `sandbox` where bubblewrap works (else `process`, with a warning).
    isolation: str | None = None
    network: str | None = None  # None = `model` for command/preset agents given env, else none
    mounts: tuple[str, ...] = ()  # extra paths visible in the sandbox: "/abs" (ro), "/abs:rw"
    source_file: str = ""

    def with_overrides(self, **overrides: Any) -> AgentSpec:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})

    def frozen_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("source_file", None)
        # Unset isolation keys are left out so configs that do not use them keep the hash
        # they had before the keys existed (baselines and drift compare hashes across runs).
        for key in ("isolation", "network", "mounts"):
            if d.get(key) in (None, ()):
                d.pop(key, None)
        return d


@dataclass(frozen=True)
class Check:
    id: str
    description: str
    command: tuple[str, ...]
    files: tuple[str, ...]  # relative to the suite directory
    timeout_seconds: float = 60.0
    # Exit codes that mean passed / failed; any other code is a grader fault (inconclusive).
    passed_codes: tuple[int, ...] = (0,)
    failed_codes: tuple[int, ...] = (1,)
    # Variables set for the command (a None value unsets one the harness would set).
    env: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class TestsSpec:
    """A task graded with the repository's own tests (the SWE-bench FAIL_TO_PASS rule).

    The test `files` (workspace-relative paths) come from the suite folder (`source_dir`) or
    from a commit of the task's repo (`from_sha`); they are snapshotted before the agent runs
    and copied into the workspace only to grade, then removed again.
    """

    __test__ = False  # not a pytest test class, whatever its name says

    files: tuple[str, ...] = ()
    source_dir: str | None = None  # suite-relative folder holding `files`
    from_ref: str | None = None
    from_sha: str | None = None  # from_ref resolved at load time
    fail_to_pass: tuple[str, ...] = ()
    pass_to_pass: tuple[str, ...] = ()
    flaky: tuple[str, ...] = ()  # known flaky ids: run and reported, never scored
    runner: str = "pytest"  # pytest | command
    command: tuple[str, ...] = ()  # `command` runner: writes JUnit XML to {junit}
    python: str = "python"  # pytest runner's interpreter (e.g. .venv/bin/python after prepare)
    plugins: bool = False  # pytest: let installed plugins auto-load (off: faster, reproducible)
    env: tuple[tuple[str, str | None], ...] = ()
    timeout_seconds: float = 300.0

    @property
    def graded_ids(self) -> tuple[str, ...]:
        flaky = set(self.flaky)
        ids = (*self.fail_to_pass, *self.pass_to_pass)
        return tuple(t for t in dict.fromkeys(ids) if t not in flaky)

    @property
    def suite_files(self) -> tuple[str, ...]:
        """Suite-relative files to snapshot (none when the tests come from a commit)."""
        if self.source_dir is None:
            return ()
        return tuple(f"{self.source_dir}/{rel}" for rel in self.files)


@dataclass(frozen=True)
class Assertion:
    type: str
    value: Any


@dataclass(frozen=True)
class Turn:
    user: str
    asserts: tuple[Assertion, ...] = ()


@dataclass(frozen=True)
class Original:
    """The answer the factory really gave, replayed as the baseline."""

    patch: str | None = None  # patch text (read from the file at load time)
    patch_file: str | None = None
    text: str | None = None
    model: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None


@dataclass(frozen=True)
class Task:
    id: str
    suite: str
    title: str
    prompt: str
    repo: str | None  # resolved: absolute path or URL; None for text tasks
    base_ref: str | None
    base_sha: str | None  # resolved at load time
    tags: tuple[str, ...] = ()
    difficulty: str | None = None
    holdout: bool = False
    reference_patch: str | None = None  # relative to the suite directory
    criteria: tuple[str, ...] = ()
    checks: tuple[Check, ...] = ()
    asserts: tuple[Assertion, ...] = ()
    turns: tuple[Turn, ...] = ()
    original: Original | None = None
    tests: TestsSpec | None = None
    prepare: tuple[tuple[str, ...], ...] = ()  # task's own, run after the suite's
    findings: str | None = None  # None: the suite's setting (see FINDINGS)
    source_file: str = ""

    @property
    def is_text(self) -> bool:
        return self.repo is None

    @property
    def input_files(self) -> tuple[str, ...]:
        """Suite-relative files snapshotted before any agent runs."""
        files = [f for c in self.checks for f in c.files]
        if self.tests is not None:
            files.extend(self.tests.suite_files)
        if self.reference_patch:
            files.append(self.reference_patch)
        return tuple(dict.fromkeys(files))


@dataclass(frozen=True)
class Tolerance:
    overall: float = 0.05
    cost: float = 0.25


@dataclass(frozen=True)
class Suite:
    name: str
    title: str
    agent: str
    repo: str | None
    directory: Path
    defaults: dict[str, Any] = field(default_factory=dict)
    prepare_commands: tuple[tuple[str, ...], ...] = ()
    tolerance: Tolerance = Tolerance()
    nightly: bool = False
    nightly_cron: str = "0 2 * * *"
    notify: str | None = None
    scorers: tuple[str, ...] = ("checks",)
    findings: str | None = None  # None = the default (see `findings_mode`)


def findings_mode(task: Task, suite_setting: str | None = None) -> str:
    """What failing checks and tests tell the next attempt. Default: `names` when the task has
    hidden tests (their source must not reach the agent), else `full`."""
    return task.findings or suite_setting or ("names" if task.tests is not None else "full")


@dataclass(frozen=True)
class JudgeCriterion:
    id: str
    weight: float = 1.0
    prompt: str | None = None


@dataclass(frozen=True)
class Judge:
    model: str = "claude-sonnet-4-6"
    effort: str | None = None
    criteria: tuple[JudgeCriterion, ...] = ()
    scale_max: float = 1.0
    base_url: str | None = None
    api_key_env: str = "ANTHROPIC_API_KEY"


@dataclass(frozen=True)
class CISettings:
    remote: str  # git URL or path the trial branches are pushed to
    repo: str  # "owner/name" for the checks API
    api_url: str = "https://api.github.com"
    token_env: str = "GITHUB_TOKEN"
    timeout_seconds: float = 3600.0
    default_branch: str = "main"


@dataclass(frozen=True)
class Config:
    """One configuration of a launch: an agent with its overrides, frozen."""

    id: str
    agent: AgentSpec
    max_parallel: int = 2
    factory_ref: str | None = None
    factory_sha: str | None = None
    overrides: tuple[tuple[str, Any], ...] = ()

    @property
    def hash(self) -> str:
        return content_hash({"agent": self.agent.frozen_dict(), "factory_sha": self.factory_sha})


STOP_SEPARATED, STOP_CI_WIDTH = "separated", "ci_width"
STOP_RULES = (STOP_SEPARATED, STOP_CI_WIDTH)


@dataclass(frozen=True)
class RepetitionPlan:
    """Adaptive repetitions: run `min` rounds, then add one round at a time until the stop rule
    holds (`separated`: the leading config is separated from the runner-up; `ci_width`: every
    paired interval is narrower than `ci_width`), `max` rounds are done, or the next round could
    spend more than `max_cost_usd`."""

    min: int = 2
    max: int = 10
    stop: str = STOP_SEPARATED
    ci_width: float | None = None
    max_cost_usd: float | None = None


@dataclass(frozen=True)
class Launch:
    name: str
    suite: Suite
    configs: tuple[Config, ...]
    tasks: tuple[Task, ...]  # after the tasks/tags filters
    repetitions: int = 2  # with `adaptive`, its max (what limits and cost caps count)
    scorers: tuple[str, ...] = ("checks",)
    judge: Judge | None = None
    include_baseline: bool = False
    max_parallel: int = 2
    ci: CISettings | None = None
    factory_root: Path = Path(".")
    source_file: str = ""
    adaptive: RepetitionPlan | None = None

    @property
    def adds_original_config(self) -> bool:
        """`include_baseline` adds the recorded originals (a replay config) unless one is there."""
        return self.include_baseline and not any(c.agent.kind == "replay" for c in self.configs)

    @property
    def trial_count(self) -> int:
        """Trials the launch runs, the recorded originals' config included."""
        configs = len(self.configs) + (1 if self.adds_original_config else 0)
        return len(self.tasks) * configs * self.repetitions


@dataclass(frozen=True)
class Prices:
    """USD per million tokens, per model."""

    rates: dict[str, dict[str, float]] = field(default_factory=dict)

    def cost(
        self,
        model: str | None,
        input_tokens: int = 0,
        output_tokens: int = 0,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> float | None:
        """Cost of the tokens, or None when the model has no price (unknown, never zero)."""
        rate = self.rates.get(model or "")
        if rate is None:
            return None
        return (
            input_tokens * rate["input"]
            + output_tokens * rate["output"]
            + cache_read_tokens * rate.get("cache_read", rate["input"])
            + cache_write_tokens * rate.get("cache_write", rate["input"])
        ) / 1_000_000
