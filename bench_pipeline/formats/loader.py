"""Read and validate the factory: agents, suites, tasks, launches and prices.

Everything is checked before anything runs, and every problem is a `BenchInputError` whose
message is one line naming the file, the key and what would be valid.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import yaml

from bench_pipeline.formats.errors import BenchInputError, closest, malformed_yaml, utf8_text
from bench_pipeline.formats.git import is_git_repo, rev_parse
from bench_pipeline.formats.model import (
    ASSERT_TYPES,
    BUILTIN_CRITERIA,
    EFFORTS,
    ID_PATTERN,
    MAX_CONFIGS,
    MAX_ID_LENGTH,
    MAX_PARALLEL,
    MAX_REPETITIONS,
    MAX_TASKS,
    MAX_TIMEOUT_SECONDS,
    MAX_TRIALS,
    STOP_CI_WIDTH,
    STOP_RULES,
    STOP_SEPARATED,
    TOOLS,
    AgentSpec,
    Assertion,
    Check,
    CISettings,
    Config,
    FrozenText,
    Judge,
    JudgeCriterion,
    Launch,
    Original,
    Prices,
    RepetitionPlan,
    Suite,
    Task,
    Tolerance,
    Turn,
    valid_id,
)
from bench_pipeline.formats.refs import FactoryView, GitFactoryView, normalized, resolve_commit
from bench_pipeline.formats.registry import AGENT_KINDS, SCORER_KINDS
from bench_pipeline.formats.vocabulary import ISOLATION_MODES, NETWORK_MODES, UNTAGGED

AGENT_KEYS = {
    "kind",
    "model",
    "effort",
    "system_prompt",
    "skills",
    "tools",
    "budget_usd",
    "max_iterations",
    "max_turns",
    "timeout_seconds",
    "env",
    "command",
    "preset",
    "url",
    "api_key_env",
    "base_url",
    "max_output_tokens",
    "description",
    "isolation",
    "network",
    "mounts",
}
LIMIT_KEYS = {"budget_usd", "max_iterations", "max_turns", "timeout_seconds"}
SUITE_KEYS = {
    "title",
    "agent",
    "repo",
    "defaults",
    "prepare_commands",
    "tolerance",
    "nightly",
    "nightly_cron",
    "notify",
    "scorers",
    "description",
    "prepare",
    "findings",
}
TASK_KEYS = {
    "id",
    "title",
    "repo",
    "base_ref",
    "prompt",
    "tags",
    "difficulty",
    "holdout",
    "reference_patch",
    "criteria",
    "checks",
    "assert",
    "turns",
    "original",
    "tests",
    "prepare",
    "findings",
}
CHECK_KEYS = {"id", "description", "command", "files", "timeout_seconds", "exit_codes", "env"}
ORIGINAL_KEYS = {
    "patch",
    "text",
    "model",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
}
LAUNCH_KEYS = {
    "kind",
    "suite",
    "configs",
    "repetitions",
    "scorers",
    "judge",
    "tasks",
    "tags",
    "include_baseline",
    "max_parallel",
    "ci",
    "title",
    "description",
}
CONFIG_KEYS = {
    "id",
    "agent",
    "factory_ref",
    "model",
    "effort",
    "system_prompt",
    "skills",
    "budget_usd",
    "max_iterations",
    "max_turns",
    "timeout_seconds",
    "max_parallel",
    "url",
    "base_url",
    "command",
    "preset",
    "isolation",
    "network",
}
JUDGE_KEYS = {"model", "effort", "criteria", "scale_max", "base_url", "api_key_env"}
CRITERION_KEYS = {"id", "weight", "prompt"}
CI_KEYS = {"remote", "repo", "api_url", "token_env", "timeout_seconds", "default_branch"}
PRICE_KEYS = {"input", "output", "cache_read", "cache_write"}
MAX_CHECK_TIMEOUT = 600
# Whole numbers are stored as int64 (warehouse columns, parquet): a larger one crashes the
# run's first write, after the trials ran.
MAX_INTEGER = 2**63 - 1


# --------------------------------------------------------------------------- reading

# Size limits, so a runaway file cannot fill the manifest, every evidence folder and every
# prompt (README "The factory"): any text field 64 KiB, long texts (prompt, a turn's user
# message, a recorded original answer) 2 MiB, one YAML file 8 MiB.
TEXT_LIMIT_BYTES = 64 * 1024
LONG_TEXT_LIMIT_BYTES = 2 * 1024 * 1024
YAML_FILE_LIMIT_BYTES = 8 * 1024 * 1024
LONG_TEXT_FIELDS = frozenset({"prompt", "user", "text"})


_FAST_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def read_yaml(path: Path, factory: FactoryView | None = None) -> dict[str, Any]:
    """Read one YAML mapping: UTF-8 only, one clear line for any problem."""
    shown = factory.display(path) if factory else str(path)
    try:
        raw = factory.read_bytes(path) if factory else path.read_bytes()
    except FileNotFoundError:
        raise BenchInputError(shown, None, "file not found") from None
    except OSError as exc:
        raise BenchInputError(shown, None, f"cannot read: {exc.strerror}") from None
    if len(raw) > YAML_FILE_LIMIT_BYTES:
        raise BenchInputError(
            shown,
            None,
            f"is {len(raw):,} bytes; a factory file may have at most {YAML_FILE_LIMIT_BYTES:,}",
        )
    text = utf8_text(raw, shown)
    try:
        try:
            # libyaml's parser with the safe constructor: ~10x faster than the pure-Python
            # one (a suite is a file per task, read at every launch and every Dagster load).
            data = yaml.load(text, Loader=_FAST_SAFE_LOADER)
        except yaml.YAMLError:
            data = yaml.safe_load(text)  # the pure-Python parser's wording for the problem
    except yaml.YAMLError as exc:
        raise BenchInputError(shown, None, malformed_yaml(exc)) from None
    except ValueError as exc:  # a scalar its constructor refuses: 2024-13-45, a 5000-digit int
        problem = str(exc).split(";")[0]  # (not Python's advice to raise its digit limit)
        raise BenchInputError(
            shown, None, f"malformed YAML: a value cannot be read: {problem}"
        ) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise BenchInputError(shown, None, f"expected a mapping of keys, got {_kind(data)}")
    return data


def _bounds(lo: float | None, hi: float | None) -> str:
    def shown(bound: float | None) -> str:
        return str(bound) if isinstance(bound, int) else f"{bound:g}"

    if hi is None:
        return f"at least {shown(lo)}"
    return f"between {shown(lo)} and {shown(hi)}" if lo is not None else f"at most {shown(hi)}"


def _kind(value: Any) -> str:
    return {list: "a list", str: "a string", int: "a number", float: "a number"}.get(
        type(value), type(value).__name__
    )


class _Fields:
    """Typed access to one mapping of a file, each problem named by file and dotted key."""

    def __init__(self, file: str, data: Mapping[str, Any], allowed: set[str], prefix: str = ""):
        self.file, self.data, self.prefix = file, data, prefix
        for key in data:
            if not isinstance(key, str):
                raise BenchInputError(file, prefix.rstrip(".") or None, f"key {key!r} is not text")
            if key not in allowed:
                raise BenchInputError(file, self.key(key), f"unknown key; {closest(key, allowed)}")

    def key(self, name: str) -> str:
        return f"{self.prefix}{name}"

    def fail(self, name: str, problem: str) -> BenchInputError:
        return BenchInputError(self.file, self.key(name), problem)

    def get(self, name: str, default: Any = None) -> Any:
        return self.data.get(name, default)

    def str(self, name: str, default: str | None = None, required: bool = False) -> str | None:
        value = self.data.get(name)
        if value is None:
            if required:
                raise self.fail(name, "is required")
            return default
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            raise self.fail(name, f"expected text, got {_kind(value)}")
        text = str(value)
        limit = LONG_TEXT_LIMIT_BYTES if name in LONG_TEXT_FIELDS else TEXT_LIMIT_BYTES
        size = len(text.encode("utf-8"))
        if size > limit:
            raise self.fail(name, f"is {size:,} bytes; the limit is {limit:,} bytes: shorten it")
        return text

    def choice(self, name: str, options: tuple[str, ...], default: str | None = None) -> str | None:
        value = self.str(name, default)
        if value is not None and value not in options:
            raise self.fail(name, f"'{value}' is not allowed; {closest(value, options)}")
        return value

    def number(
        self,
        name: str,
        default: float | None = None,
        lo: float | None = None,
        hi: float | None = None,
    ) -> float | None:
        value = self.data.get(name)
        if value is None:
            return default
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(name, f"expected a number, got {_kind(value)}")
        if isinstance(value, int) and abs(value) > MAX_INTEGER:  # (math.isfinite(10**400) raises)
            bounds = _bounds(lo, MAX_INTEGER if hi is None else hi)
            raise self.fail(name, f"is out of range; use a value {bounds}")
        if not math.isfinite(value):  # YAML's .nan and .inf pass every range check below
            raise self.fail(name, f"expected a finite number, got {value}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            shown = str(value) if isinstance(value, int) else f"{value:g}"
            raise self.fail(name, f"{shown} is out of range; use a value {_bounds(lo, hi)}")
        return float(value)

    def integer(
        self, name: str, default: int | None = None, lo: int | None = None, hi: int | None = None
    ) -> int | None:
        value = self.number(name, None, lo, MAX_INTEGER if hi is None else hi)
        if value is None:
            return default
        if value != int(value):
            raise self.fail(name, f"expected a whole number, got {value:g}")
        raw = self.data.get(name)
        # (an int as it was written: through a float, 2**63 - 1 would become 2**63)
        return raw if isinstance(raw, int) else int(value)

    def bool(self, name: str, default: bool = False) -> bool:
        value = self.data.get(name)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(name, f"expected true or false, got {value!r}")
        return value

    def str_list(self, name: str, default: tuple[str, ...] = ()) -> tuple[str, ...]:
        value = self.data.get(name)
        if value is None:
            return default
        if isinstance(value, str) or not isinstance(value, list):
            raise self.fail(name, f"expected a list, got {_kind(value)}")
        for i, item in enumerate(value):
            if isinstance(item, bool) or not isinstance(item, str | int | float):
                raise self.fail(f"{name}[{i}]", f"expected text, got {_kind(item)}")
        return tuple(str(v) for v in value)

    def argv(self, name: str, required: bool = False) -> tuple[str, ...]:
        value = self.str_list(name)
        if required and not value:
            raise self.fail(name, "is required: an argument array such as [python, script.py]")
        if isinstance(self.data.get(name), str):
            raise self.fail(name, "must be an argument array, not a shell string")
        return value

    def mapping(self, name: str) -> dict[str, Any]:
        value = self.data.get(name)
        if value is None:
            return {}
        if not isinstance(value, dict):
            raise self.fail(name, f"expected a mapping, got {_kind(value)}")
        return value

    def section(self, name: str, allowed: set[str], shape: str) -> _Fields | None:
        """An optional nested mapping (`judge:`, `ci:`, `original:`), or None when absent."""
        raw = self.data.get(name)
        if raw is None:
            return None
        return self.nested(name, raw, allowed, shape)

    def nested(self, name: str, raw: Any, allowed: set[str], shape: str) -> _Fields:
        """One nested mapping (a list item such as `checks[0]`) with its own allowed keys."""
        if not isinstance(raw, dict):
            raise self.fail(name, f"expected {shape}")
        return _Fields(self.file, raw, allowed, f"{self.key(name)}.")

    def items(self, name: str) -> list[Any]:
        value = self.data.get(name)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self.fail(name, f"expected a list, got {_kind(value)}")
        return value


def _check_id(f: _Fields, name: str, value: str) -> str:
    if len(value) > MAX_ID_LENGTH:
        raise f.fail(
            name,
            f"is {len(value):,} characters; an id has at most {MAX_ID_LENGTH} "
            "(it names files and folders): shorten it",
        )
    if not valid_id(value):
        raise f.fail(
            name,
            f"{value!r} is not a valid id; use letters, digits, '_', '.', '-' "
            f"(pattern {ID_PATTERN})",
        )
    return value


# --------------------------------------------------------------------------- prices, agents


def load_prices(factory: FactoryView) -> Prices:
    path = factory.root / "prices.yaml"
    if not factory.exists(path):
        return Prices({})
    data = read_yaml(path, factory)
    shown = factory.display(path)
    rates: dict[str, dict[str, float]] = {}
    for model, rate in data.items():
        if not isinstance(rate, dict):
            raise BenchInputError(
                shown, str(model), "expected {input, output, cache_read, cache_write}"
            )
        f = _Fields(shown, rate, PRICE_KEYS, f"{model}.")
        rates[str(model)] = {}
        for k in ("input", "output"):
            value = f.number(k, lo=0)
            if value is None:
                raise f.fail(k, "is required: USD per million tokens")
            rates[str(model)][k] = value
        for k in ("cache_read", "cache_write"):
            value = f.number(k, lo=0)
            if value is not None:
                rates[str(model)][k] = value
    return Prices(rates)


def load_agent(
    factory: FactoryView, name: str, defaults: Mapping[str, Any] | None = None
) -> AgentSpec:
    path = factory.root / "agents" / f"{name}.yaml"
    if not factory.exists(path):
        problem = factory.not_a_file(path)
        if problem is not None:
            raise BenchInputError(
                factory.display(path), None, f"{problem}; replace it with the agent's YAML file"
            )
        known = factory.agent_names()
        raise BenchInputError(
            factory.display(path), None, f"no agent named '{name}'; {closest(name, known)}"
        )
    data = read_yaml(path, factory)
    shown = factory.display(path)
    merged = {**(defaults or {}), **data}
    f = _Fields(shown, merged, AGENT_KEYS)
    kind = f.choice("kind", AGENT_KINDS.names())
    if kind is None:
        raise f.fail("kind", f"is required; valid: {', '.join(AGENT_KINDS.names())}")
    tools = f.str_list("tools", TOOLS)
    for i, tool in enumerate(tools):
        if tool not in TOOLS:
            raise f.fail(f"tools[{i}]", f"'{tool}' is not a tool; {closest(tool, TOOLS)}")
    spec = AgentSpec(
        name=name,
        kind=kind,
        model=f.str("model"),
        effort=f.choice("effort", EFFORTS),
        system_prompt=_frozen(factory, path, f, "system_prompt"),
        skills=tuple(_frozen_list(factory, path, f, "skills")),
        tools=tools,
        budget_usd=f.number("budget_usd", lo=0),
        max_iterations=f.integer("max_iterations", 1, 1, 10),
        max_turns=f.integer("max_turns", 50, 1, 1000),
        timeout_seconds=f.number("timeout_seconds", 1800.0, 1, MAX_TIMEOUT_SECONDS),
        env=f.str_list("env"),
        command=f.argv("command"),
        preset=f.choice("preset", ("claude-code", "codex")),
        url=_url(f, "url"),
        api_key_env=f.str("api_key_env"),
        base_url=_url(f, "base_url"),
        max_output_tokens=f.integer("max_output_tokens", 8192, 1, 200_000),
        isolation=f.choice("isolation", ISOLATION_MODES),
        network=f.choice("network", NETWORK_MODES),
        mounts=_mounts(f),
        source_file=shown,
    )
    problem = AGENT_KINDS.get(kind).spec_problem(spec)
    if problem is not None:
        raise f.fail(*problem)
    return spec


def _url(f: _Fields, name: str) -> str | None:
    """An endpoint the run will call: http(s) with a host, refused now rather than after the
    run's minutes of retries against it."""
    value = f.str(name)
    if value is None:
        return None
    try:
        parts = urlsplit(value)
        usable = parts.scheme in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 (raises for a port that is not a number)
    except ValueError:
        usable = False
    if not usable or any(ch.isspace() for ch in value):
        raise f.fail(name, f"'{value}' is not an http(s) URL; give one such as https://host/v1")
    return value


def _frozen(factory: FactoryView, owner: Path, f: _Fields, key: str) -> FrozenText | None:
    rel = f.str(key)
    if rel is None:
        return None
    return factory.frozen_text(owner, rel, f.file, f.key(key))


def _frozen_list(factory: FactoryView, owner: Path, f: _Fields, key: str) -> list[FrozenText]:
    return [
        factory.frozen_text(owner, rel, f.file, f.key(f"{key}[{i}]"))
        for i, rel in enumerate(f.str_list(key))
    ]


# --------------------------------------------------------------------------- suites, tasks


def load_suite(factory: FactoryView, name: str) -> Suite:
    directory = factory.root / "benchmarks" / name
    path = directory / "suite.yaml"
    if not factory.exists(path):
        problem = factory.not_a_file(path)
        if problem is not None:
            raise BenchInputError(
                factory.display(path), None, f"{problem}; replace it with the suite's YAML file"
            )
        raise BenchInputError(
            factory.display(path),
            None,
            f"no suite named '{name}'; {closest(name, factory.suite_names())}",
        )
    if not valid_id(name):  # (a suite's name is part of run and partition keys)
        raise BenchInputError(
            factory.display(directory),
            None,
            f"suite folder name is not a valid id; rename it to at most {MAX_ID_LENGTH} "
            f"letters, digits, '_', '.', '-' (pattern {ID_PATTERN})",
        )
    data = read_yaml(path, factory)
    shown = factory.display(path)
    f = _Fields(shown, data, SUITE_KEYS)
    agent = f.str("agent", required=True)
    if agent and agent not in factory.agent_names():
        raise f.fail(
            "agent", f"no agent file agents/{agent}.yaml; {closest(agent, factory.agent_names())}"
        )
    defaults = f.mapping("defaults")
    for key in defaults:
        if key not in LIMIT_KEYS:
            raise f.fail(f"defaults.{key}", f"unknown limit; {closest(str(key), LIMIT_KEYS)}")
    tol = _Fields(shown, f.mapping("tolerance"), {"overall", "cost"}, "tolerance.")
    prepare = []
    for i, cmd in enumerate(f.items("prepare_commands")):
        if not isinstance(cmd, list) or not cmd:
            raise f.fail(f"prepare_commands[{i}]", "must be a non-empty argument array")
        prepare.append(tuple(str(a) for a in cmd))
    from bench_pipeline.formats import tests_format

    prepare.extend(tests_format.parse_prepare(f))  # `prepare` (after `prepare_commands`)
    scorers = f.str_list("scorers", ("checks",))
    _check_scorers(factory, shown, f, scorers)
    repo = f.str("repo")
    return Suite(
        name=name,
        title=f.str("title", name) or name,
        agent=agent or "",
        repo=_resolve_repo(directory, repo) if repo else None,
        directory=directory,
        defaults=dict(defaults),
        prepare_commands=tuple(prepare),
        tolerance=Tolerance(
            overall=tol.number("overall", 0.05, 0, 1) or 0.0,
            cost=tol.number("cost", 0.25, 0) or 0.0,
        ),
        nightly=f.bool("nightly"),
        nightly_cron=f.str("nightly_cron", "0 2 * * *") or "0 2 * * *",
        notify=f.str("notify"),
        scorers=scorers,
        findings=tests_format.parse_findings(f),
    )


def _resolve_repo(base: Path, repo: str) -> str:
    if "://" in repo or repo.startswith("git@"):
        return repo
    path = Path(repo)
    return str((path if path.is_absolute() else base / path).resolve())


def load_tasks(factory: FactoryView, suite: Suite) -> list[Task]:
    tasks_dir = suite.directory / "tasks"
    files = factory.list_yaml(tasks_dir)
    if not files:
        raise BenchInputError(factory.display(tasks_dir), None, "no task files (*.yaml) found")
    tasks: list[Task] = []
    seen: dict[str, str] = {}
    # (repo, ref) -> commit: most tasks of a suite start from a few refs of one repository,
    # and each look-up is a git process (~3 ms; a 14-task launch made 14 for 2 refs)
    commits: dict[tuple[str, str], str] = {}
    for path in files:
        task = load_task(factory, suite, path, commits)
        if task.id in seen:
            raise BenchInputError(
                factory.display(path),
                "id",
                f"duplicate task id '{task.id}' (also in {seen[task.id]}); give each task its own id",
            )
        seen[task.id] = factory.display(path)
        tasks.append(task)
    if len(tasks) > MAX_TASKS:
        raise BenchInputError(
            factory.display(tasks_dir),
            None,
            f"{len(tasks)} tasks; a suite holds at most {MAX_TASKS}",
        )
    return tasks


def load_task(
    factory: FactoryView,
    suite: Suite,
    path: Path,
    commits: dict[tuple[str, str], str] | None = None,
) -> Task:
    """One task file; `commits`: (repo, ref) -> commit already resolved for this load."""
    data = read_yaml(path, factory)
    shown = factory.display(path)
    f = _Fields(shown, data, TASK_KEYS)
    task_id = _check_id(f, "id", f.str("id", path.stem) or path.stem)
    repo_value = f.str("repo")
    repo = _resolve_repo(path.parent, repo_value) if repo_value else suite.repo
    base_ref = f.str("base_ref")
    turns = _turns(f)
    prompt = _message(f, "prompt")
    if prompt is None and not turns:
        raise f.fail("prompt", "is required (or give `turns` for a multi-turn scenario)")
    # A text task has nothing to check out; anything with checks or a patch is a coding task.
    text_task = (
        base_ref is None
        and repo_value is None
        and not f.get("checks")
        and not f.get("tests")
        and f.get("reference_patch") is None
    )
    if not text_task and base_ref is None:
        raise f.fail(
            "base_ref", "is required for a coding task: the commit, tag or branch to start from"
        )
    base_sha = None
    if not text_task:
        if repo is None:
            raise f.fail("repo", "is required: set it here or in suite.yaml")
        known = commits if commits is not None else {}
        base_sha = known.get((repo, base_ref or ""))
        if base_sha is None:
            base_sha = known[(repo, base_ref or "")] = resolve_commit(repo, base_ref or "", shown)
    tags = f.str_list("tags")
    for i, tag in enumerate(tags):
        if tag == UNTAGGED:
            raise f.fail(
                f"tags[{i}]", f"'{UNTAGGED}' is reserved for untagged tasks; pick another tag"
            )
    checks = _checks(factory, suite, f)
    reference = f.str("reference_patch")
    default_ref = suite.directory / "references" / f"{task_id}.patch"
    if reference is not None:
        factory.inside(suite.directory, reference, shown, "reference_patch", must_exist=True)
    elif not text_task and factory.exists(default_ref):
        reference = f"references/{task_id}.patch"
    asserts = _asserts(f, "assert")
    difficulty = f.choice("difficulty", ("easy", "medium", "hard"))
    if text_task and checks:
        raise f.fail("checks", "a text task (no repo/base_ref) cannot run checks; use `assert`")
    return Task(
        id=task_id,
        suite=suite.name,
        title=f.str("title", task_id) or task_id,
        prompt=prompt or turns[0].user,
        repo=None if text_task else repo,
        base_ref=base_ref,
        base_sha=base_sha,
        tags=tags,
        difficulty=difficulty,
        holdout=f.bool("holdout"),
        reference_patch=reference,
        criteria=f.str_list("criteria"),
        checks=checks,
        asserts=asserts,
        turns=turns,
        original=_original(factory, suite, f),
        **_repo_tests(factory, suite, f, None if text_task else repo, shown),
        source_file=shown,
    )


def _repo_tests(
    factory: FactoryView, suite: Suite, f: _Fields, repo: str | None, shown: str
) -> dict[str, Any]:
    """The task's `tests`, `prepare` and `findings` (formats.tests_format parses them)."""
    from bench_pipeline.formats import tests_format

    tests = tests_format.parse_tests(factory, suite.directory, f, repo, shown)
    if tests is not None and repo is None:
        raise f.fail("tests", "a text task (no repo/base_ref) cannot run tests")
    return {
        "tests": tests,
        "prepare": tests_format.parse_prepare(f),
        "findings": tests_format.parse_findings(f) or suite.findings,
    }


def _checks(factory: FactoryView, suite: Suite, f: _Fields) -> tuple[Check, ...]:
    checks: list[Check] = []
    ids: set[str] = set()
    for i, raw in enumerate(f.items("checks")):
        c = f.nested(f"checks[{i}]", raw, CHECK_KEYS, "a mapping {id, description, command, files}")
        # Required: results, findings, rescores and the CI gate refer to a check by its id, and
        # a position-based default would silently rename checks when one is inserted.
        check_id = _check_id(c, "id", c.str("id", required=True) or "")
        if check_id in ids:
            raise c.fail("id", f"duplicate check id '{check_id}'")
        ids.add(check_id)
        files = c.str_list("files")
        for j, rel in enumerate(files):
            factory.inside(suite.directory, rel, f.file, c.key(f"files[{j}]"), must_exist=True)
        command = c.argv("command", required=True)
        for j, arg in enumerate(command):
            for ref in re.findall(r"\{inputs\}/([^\s\"']+)", arg):
                factory.inside(
                    suite.directory, ref, f.file, c.key(f"command[{j}]"), must_exist=False
                )
        checks.append(
            Check(
                id=check_id,
                description=c.str("description", "") or "",
                command=command,
                files=files,
                timeout_seconds=c.number("timeout_seconds", 60.0, 1, MAX_CHECK_TIMEOUT) or 60.0,
                **_check_codes(c),
            )
        )
    return tuple(checks)


def _check_codes(c: _Fields) -> dict[str, Any]:
    from bench_pipeline.formats import tests_format

    passed, failed = tests_format.parse_exit_codes(c)
    return {"passed_codes": passed, "failed_codes": failed, "env": tests_format.parse_env(c)}


def _asserts(f: _Fields, key: str) -> tuple[Assertion, ...]:
    out = []
    for i, raw in enumerate(f.items(key)):
        a = f.nested(f"{key}[{i}]", raw, {"type", "value"}, "{type, value}")
        kind = a.choice("type", ASSERT_TYPES)
        if kind is None:
            raise a.fail("type", f"is required; valid: {', '.join(ASSERT_TYPES)}")
        value = raw.get("value")
        if kind == "regex":
            try:
                re.compile(str(value))
            except re.error as exc:
                raise a.fail("value", f"invalid regular expression: {exc}") from None
        if kind.startswith(("min_", "max_")) and (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)  # (a NaN bound: every comparison false)
        ):
            raise a.fail("value", f"expected a finite number for {kind}")
        out.append(Assertion(kind, value))
    return tuple(out)


def _turns(f: _Fields) -> tuple[Turn, ...]:
    turns = []
    for i, raw in enumerate(f.items("turns")):
        t = f.nested(f"turns[{i}]", raw, {"user", "assert"}, "{user, assert}")
        turns.append(Turn(_message(t, "user", required=True) or "", _asserts(t, "assert")))
    return tuple(turns)


def _message(f: _Fields, name: str, required: bool = False) -> str | None:
    """What the agent is asked (`prompt`, a turn's `user`): text, never a YAML number or
    true (`prompt: 42` is a slip, not a task), and not blank: an empty prompt asks nothing."""
    value = f.get(name)
    if value is not None and not isinstance(value, str):
        raise f.fail(name, f"expected text, got {_kind(value)}; write the request as text")
    text = f.str(name, required=required)
    if text is not None and not text.strip():
        raise f.fail(name, "is empty; write what the agent should do")
    return text


def _original(factory: FactoryView, suite: Suite, f: _Fields) -> Original | None:
    o = f.section("original", ORIGINAL_KEYS, "a mapping {patch|text, model, tokens, cost_usd}")
    if o is None:
        return None
    patch_file = o.str("patch")
    patch = None
    if patch_file is not None:
        path = factory.inside(
            suite.directory, patch_file, f.file, "original.patch", must_exist=True
        )
        patch = factory.read_text(path, f.file, "original.patch")
    text = o.str("text")
    if patch is None and text is None:
        raise o.fail("patch", "an original needs `patch` (a file) or `text`")
    return Original(
        patch=patch,
        patch_file=patch_file,
        text=text,
        model=o.str("model"),
        input_tokens=o.integer("input_tokens", lo=0),
        output_tokens=o.integer("output_tokens", lo=0),
        cache_read_tokens=o.integer("cache_read_tokens", lo=0),
        cache_write_tokens=o.integer("cache_write_tokens", lo=0),
        cost_usd=o.number("cost_usd", lo=0),
    )


# --------------------------------------------------------------------------- launches


def scorer_spec_problem(spec: str) -> str | None:
    """Why a launch's scorer entry names no registered scorer, or None when it does."""
    kind, _, arg = spec.partition(":")
    takes_argument = SCORER_KINDS.trait(kind, "takes_argument")
    if kind in SCORER_KINDS and bool(arg) == takes_argument:
        return None
    if takes_argument:
        return f"'{spec}' needs an id: {kind}:<id>"
    valid = [
        f"{n}:<id>" if SCORER_KINDS.trait(n, "takes_argument") else n for n in SCORER_KINDS.names()
    ]
    return f"unknown scorer '{spec}'; {closest(spec, valid)}"


def _validate_scorer(factory: FactoryView, file: str, key: str, spec: str) -> None:
    kind, _, arg = spec.partition(":")
    if kind == "workflow":
        if not arg or not valid_id(arg):
            raise BenchInputError(file, key, f"'{spec}' needs an id: workflow:<id>")
        py, yml = factory.root / "scorers" / f"{arg}.py", factory.root / "scorers" / f"{arg}.yaml"
        if not (factory.exists(py) or factory.exists(yml)):
            raise BenchInputError(
                file,
                key,
                f"no user scorer 'scorers/{arg}.py' or 'scorers/{arg}.yaml' in the factory",
            )
        return
    problem = scorer_spec_problem(spec)
    if problem is not None:
        raise BenchInputError(file, key, problem)


def _check_scorers(factory: FactoryView, shown: str, f: _Fields, scorers: Sequence[str]) -> None:
    """Each scorer known, and listed once: a second entry grades every trial again (a judge's
    calls paid twice) into rows the analysis keeps only one of."""
    for i, spec in enumerate(scorers):
        _validate_scorer(factory, shown, f"scorers[{i}]", spec)
        if spec in scorers[:i]:
            raise f.fail(f"scorers[{i}]", f"'{spec}' is listed twice; list each scorer once")


def load_launch(path: str | Path, factory_root: str | Path | None = None) -> Launch:
    """Load a launch file and everything it names; the factory is the launch's grandparent."""
    path = normalized(Path(path))
    root = normalized(Path(factory_root)) if factory_root else _find_factory_root(path)
    factory = FactoryView(root)
    data = read_yaml(path, factory)
    shown = factory.display(path)
    f = _Fields(shown, data, LAUNCH_KEYS)
    if f.str("kind", "BenchmarkLaunch") != "BenchmarkLaunch":
        raise f.fail("kind", "must be 'BenchmarkLaunch'")
    # (an id, not a path: `suite: /tmp/x` would read /tmp/x/suite.yaml)
    suite_name = _check_id(f, "suite", f.str("suite", required=True) or "")
    suite = load_suite(factory, suite_name)
    all_tasks = load_tasks(factory, suite)
    tasks = _filter_tasks(f, all_tasks)
    adaptive = _repetition_plan(f)
    repetitions = adaptive.max if adaptive else f.integer("repetitions", 2, 1, MAX_REPETITIONS) or 2
    max_parallel = f.integer("max_parallel", 2, 1, MAX_PARALLEL) or 2
    scorers = f.str_list("scorers", suite.scorers)
    if not scorers:
        raise f.fail("scorers", "needs at least one scorer, e.g. [checks]")
    _check_scorers(factory, shown, f, scorers)
    judge = _judge(f)
    if judge is None and any(s.split(":")[0] in ("rubric", "llm_judge") for s in scorers):
        judge = Judge()
    raw_configs = f.items("configs")
    if not raw_configs:
        raise f.fail("configs", f"needs 1 to {MAX_CONFIGS} configurations")
    if len(raw_configs) > MAX_CONFIGS:
        raise f.fail("configs", f"{len(raw_configs)} configurations; at most {MAX_CONFIGS}")
    configs = [
        _config(factory, suite, f, i, raw, max_parallel, path) for i, raw in enumerate(raw_configs)
    ]
    ids = [c.id for c in configs]
    for i, cid in enumerate(ids):
        if cid in ids[:i]:
            raise f.fail(f"configs[{i}].id", f"duplicate configuration id '{cid}'")
    launch = Launch(
        name=path.stem,
        suite=suite,
        configs=tuple(configs),
        tasks=tuple(tasks),
        repetitions=repetitions,
        scorers=scorers,
        judge=judge,
        include_baseline=f.bool("include_baseline"),
        max_parallel=max_parallel,
        ci=_ci(f),
        factory_root=root,
        source_file=shown,
        adaptive=adaptive,
    )
    if "ci" in scorers and launch.ci is None:
        raise f.fail("ci", "the `ci` scorer needs ci: {remote, repo} to push trial branches to")
    if launch.trial_count > MAX_TRIALS:
        raise f.fail(
            "repetitions",
            f"{len(tasks)} tasks x {len(configs)} configs x {repetitions} repetitions = "
            f"{launch.trial_count} trials; a launch runs at most {MAX_TRIALS} "
            "(filter with `tasks`/`tags` or lower `repetitions`)",
        )
    return launch


def _find_factory_root(launch_path: Path) -> Path:
    for parent in launch_path.parents:
        if (parent / "agents").is_dir() and (parent / "benchmarks").is_dir():
            return parent
    raise BenchInputError(
        str(launch_path),
        None,
        "not inside a factory (no parent folder holds agents/ and benchmarks/)",
    )


def _filter_tasks(f: _Fields, tasks: list[Task]) -> list[Task]:
    wanted = f.str_list("tasks")
    tags = set(f.str_list("tags"))
    by_id = {t.id: t for t in tasks}
    seen: set[str] = set()
    for i, tid in enumerate(wanted):
        if tid not in by_id:
            raise f.fail(f"tasks[{i}]", f"no task '{tid}' in the suite; {closest(tid, by_id)}")
        if tid in seen:
            raise f.fail(f"tasks[{i}]", f"'{tid}' is listed twice; list each task once")
        seen.add(tid)
    selected = [by_id[t] for t in wanted] if wanted else tasks
    if tags:
        selected = [t for t in selected if tags & (set(t.tags) or {UNTAGGED})]
        if not selected:
            raise f.fail("tags", f"no task has any of the tags {sorted(tags)}")
    return selected


def _config(
    factory: FactoryView,
    suite: Suite,
    f: _Fields,
    i: int,
    raw: Any,
    default_parallel: int,
    launch_path: Path,
) -> Config:
    c = f.nested(f"configs[{i}]", raw, CONFIG_KEYS, "a mapping {id, ...overrides}")
    cid = _check_id(c, "id", c.str("id", required=True) or "")
    agent_name = _agent_name(factory, c, c.str("agent", suite.agent) or suite.agent)
    factory_ref = c.str("factory_ref")
    factory_sha = None
    live = load_agent(factory, agent_name, suite.defaults)
    if factory_ref is not None:
        spec, factory_sha = agent_at_ref(factory, agent_name, factory_ref, suite.defaults, c)
        _refuse_widening(c, spec, live)
    else:
        spec = live
    overrides: dict[str, Any] = {
        "model": c.str("model"),
        "effort": c.choice("effort", EFFORTS),
        "budget_usd": c.number("budget_usd", lo=0),
        "max_iterations": c.integer("max_iterations", lo=1, hi=10),
        "max_turns": c.integer("max_turns", lo=1, hi=1000),
        "timeout_seconds": c.number("timeout_seconds", lo=1, hi=MAX_TIMEOUT_SECONDS),
        "url": _url(c, "url"),
        "base_url": _url(c, "base_url"),
        "preset": c.choice("preset", ("claude-code", "codex")),
        "command": c.argv("command") or None,
        "isolation": c.choice("isolation", ISOLATION_MODES),
        "network": c.choice("network", NETWORK_MODES),
        # Paths in a launch are relative to the launch file, like every factory path.
        "system_prompt": _frozen(factory, launch_path, c, "system_prompt"),
        "skills": tuple(_frozen_list(factory, launch_path, c, "skills")) or None,
    }
    spec = spec.with_overrides(**overrides)
    return Config(
        id=cid,
        agent=spec,
        max_parallel=c.integer("max_parallel", default_parallel, 1, MAX_PARALLEL)
        or default_parallel,
        factory_ref=factory_ref,
        factory_sha=factory_sha,
        overrides=tuple((k, v) for k, v in raw.items() if k != "id"),
    )


def _agent_name(factory: FactoryView, c: _Fields, name: str) -> str:
    """A config's `agent`: the name of a file of agents/, never a path, which would read any
    YAML file as an agent (`../prices`: prices.yaml; `../../x`, `/tmp/x`: outside the factory)."""
    agents = factory.root / "agents"
    if PurePosixPath(name).is_absolute() or Path(name).is_absolute():
        problem = f"'{name}' is an absolute path"
    elif "/" in name or "\\" in name or name in (".", ".."):
        inside = Path(os.path.normpath(agents / name)).is_relative_to(factory.root)
        problem = f"'{name}' is a path" if inside else f"'{name}' escapes the factory"
    elif len(name) > MAX_ID_LENGTH:
        problem = f"is {len(name):,} characters; an agent name has at most {MAX_ID_LENGTH}"
    else:
        return name
    raise c.fail(
        "agent",
        f"{problem}; name an agent by its file in agents/ without .yaml; "
        f"{closest(name, factory.agent_names())}",
    )


def _mounts(f: _Fields) -> tuple[str, ...]:
    """`mounts`: absolute paths made visible in the sandbox, `PATH` read-only or `PATH:rw`."""
    mounts = f.str_list("mounts")
    for i, m in enumerate(mounts):
        path = m[:-3] if m.endswith(":rw") else m
        if not os.path.isabs(path):
            raise f.fail(f"mounts[{i}]", f"'{m}' must be an absolute path (optionally ':rw')")
    return mounts


def _refuse_widening(c: _Fields, at_ref: AgentSpec, live: AgentSpec) -> None:
    for what, key in (("tools", "tools"), ("variables", "env")):
        wider = set(getattr(at_ref, key)) - set(getattr(live, key))
        if wider:
            raise c.fail(
                "factory_ref",
                f"the agent at this ref {'allows' if key == 'tools' else 'passes'} {what} "
                f"{sorted(wider)} that the live agent does not; a factory_ref may not widen {key}",
            )


def read_criterion(file: str | None, item: Any, key: str) -> dict[str, Any]:
    """One judge criterion `{id, weight, prompt}` (a bare string is an id), checked, with only
    the fields it gives (a rescore merges criteria by id: an absent field keeps its value)."""
    if isinstance(item, str):
        item = {"id": item}
    if not isinstance(item, dict):
        raise BenchInputError(file, key, "expected {id, weight, prompt}")
    c = _Fields(file or "", item, CRITERION_KEYS, f"{key}.")
    fields: dict[str, Any] = {"id": _check_id(c, "id", c.str("id", required=True) or "")}
    if item.get("weight") is not None:
        fields["weight"] = c.number("weight", lo=0)
    if item.get("prompt") is not None:
        fields["prompt"] = c.str("prompt")
    return fields


def custom_criterion_problem(criterion_id: str, prompt: str | None) -> str | None:
    """A criterion that is not built in must say what it grades."""
    if criterion_id in BUILTIN_CRITERIA or (prompt or "").strip():
        return None
    return f"criterion '{criterion_id}' is not built in ({', '.join(BUILTIN_CRITERIA)}); give it a prompt"


def _judge(f: _Fields) -> Judge | None:
    j = f.section("judge", JUDGE_KEYS, "a mapping {model, effort, criteria}")
    if j is None:
        return None
    criteria = []
    for i, item in enumerate(j.items("criteria")):
        key = f"judge.criteria[{i}]"
        fields = read_criterion(f.file, item, key)
        problem = custom_criterion_problem(fields["id"], fields.get("prompt"))
        if problem is not None:
            raise BenchInputError(f.file, f"{key}.prompt", problem)
        weight = fields.get("weight")
        criteria.append(
            JudgeCriterion(fields["id"], 1.0 if weight is None else weight, fields.get("prompt"))
        )
    return Judge(
        model=j.str("model", "claude-sonnet-4-6") or "claude-sonnet-4-6",
        effort=j.choice("effort", EFFORTS),
        criteria=tuple(criteria),
        scale_max=j.number("scale_max", 1.0, 1) or 1.0,
        base_url=_url(j, "base_url"),
        api_key_env=j.str("api_key_env", "ANTHROPIC_API_KEY") or "ANTHROPIC_API_KEY",
    )


REPETITION_PLAN_KEYS = {"min", "max", "stop", "ci_width", "max_cost_usd"}


def _repetition_plan(f: _Fields) -> RepetitionPlan | None:
    """`repetitions: {min, max, stop: separated | ci_width, ci_width, max_cost_usd}`; a plain
    number is a fixed count (None here)."""
    if not isinstance(f.get("repetitions"), Mapping):
        return None
    r = f.section(
        "repetitions",
        REPETITION_PLAN_KEYS,
        "a number or a mapping {min, max, stop: separated | ci_width, ci_width}",
    )
    assert r is not None  # a mapping, checked above
    lo = r.integer("min", 2, 1, MAX_REPETITIONS) or 2
    hi = r.integer("max", MAX_REPETITIONS, 1, MAX_REPETITIONS) or MAX_REPETITIONS
    if hi < lo:
        raise r.fail("max", f"{hi} is below min {lo}; use max >= min")
    width = r.number("ci_width", None, 0)
    stop = r.choice("stop", STOP_RULES, STOP_CI_WIDTH if width is not None else STOP_SEPARATED)
    if stop == STOP_CI_WIDTH and (width is None or width <= 0):
        raise r.fail("ci_width", "stop: ci_width needs a positive ci_width, e.g. 0.1")
    return RepetitionPlan(
        min=lo,
        max=hi,
        stop=stop or STOP_SEPARATED,
        ci_width=width,
        max_cost_usd=r.number("max_cost_usd", None, 0),
    )


def _ci(f: _Fields) -> CISettings | None:
    c = f.section("ci", CI_KEYS, "a mapping {remote, repo, api_url, token_env, timeout_seconds}")
    if c is None:
        return None
    repo = c.str("repo", required=True) or ""
    if not re.match(r"^[\w.-]+/[\w.-]+$", repo):
        raise c.fail("repo", f"'{repo}' must be owner/name")
    return CISettings(
        remote=c.str("remote", required=True) or "",
        repo=repo,
        api_url=_url(c, "api_url") or "https://api.github.com",
        token_env=c.str("token_env", "GITHUB_TOKEN") or "GITHUB_TOKEN",
        timeout_seconds=c.number("timeout_seconds", 3600.0, 1) or 3600.0,
        default_branch=c.str("default_branch", "main") or "main",
    )


def agent_at_ref(
    factory: FactoryView, name: str, ref: str, defaults: Mapping[str, Any], c: Any
) -> tuple[AgentSpec, str]:
    """The agent `name` as it is at `ref` of the factory repository, and the resolved sha."""
    if not is_git_repo(factory.root):
        raise c.fail("factory_ref", "the factory is not a git repository; commit it to use refs")
    sha = rev_parse(str(factory.root), ref)
    if sha is None:
        raise c.fail("factory_ref", f"'{ref}' is not a branch, tag or commit of the factory")
    view = GitFactoryView(factory.root, sha, factory)
    path = factory.root / "agents" / f"{name}.yaml"
    if not view.exists(path):
        raise c.fail(
            "factory_ref",
            f"the factory at '{ref}' has no agent '{name}'; {closest(name, view.agent_names())}",
        )
    return load_agent(view, name, defaults), sha
