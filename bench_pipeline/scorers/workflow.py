"""`workflow:<id>`: a user scorer from the factory, `<factory>/scorers/<id>.py` or `.yaml`.

- Python: the module exposes `score(trial: dict) -> {"score": float, "reason": str}`; it is
  imported by file path (fresh module per scorer instance) and called in-process with
  `TrialEvidence.as_json()`. A `sys.exit` there (at import or in `score`) is a scorer error like
any exception; `os._exit` cannot be caught in-process: it ends `bench` (the factory's own
code, trusted; a `.yaml` command scorer runs in a process of its own).
- Command: `<id>.yaml` (or `.yml`) with `command: [argv...]` and optional `timeout_seconds`
  (default 60, at most 600) and `env` (names passed through the scrubbed environment). Each
  argument gets `{evidence}` (a JSON file of `trial.as_json()`), `{factory}` (the factory root)
  and `{scorers}` (the scorers directory) substituted; no shell; cwd = factory root. The
  command prints the JSON object on stdout - the last line that parses as a JSON object wins, so
  log lines before it (and stderr, which `run_command` interleaves) are tolerated.

Returned JSON: `score` (number in 0..scale_max, or null = not scored with the reason), `reason`
(string), optional `scale_max` (> 0, default 1) and `details` (object). Anything else - an
exception, a non-zero exit, a timeout, bad JSON, a score out of range - records SCORE_ERROR
with the reason. `<id>` must match the id pattern and the file must resolve (symlinks
included) inside the factory; both a .py and a .yaml for one id is refused as ambiguous.
"""

from __future__ import annotations

import importlib.util
import json
import tempfile
import traceback
from pathlib import Path
from typing import Any

import yaml

from bench_pipeline.formats.errors import (
    BenchInputError,
    closest,
    malformed_yaml,
    read_input_text,
)
from bench_pipeline.formats.model import ID_PATTERN, valid_id
from bench_pipeline.formats.vocabulary import SCORE_ERROR, SCORE_NOT_SCORED
from bench_pipeline.scorers.base import (
    Scorer,
    ScorerContext,
    ScoreResult,
    TrialEvidence,
    register_scorer,
)
from bench_pipeline.scorers.outcome import outcome_gate
from bench_pipeline.workspace.process import GRADER_DEFAULTS, run_command, scrubbed_env

COMMAND_KEYS = ("command", "timeout_seconds", "env", "description")
DEFAULT_TIMEOUT, MAX_TIMEOUT = 60.0, 600.0


def resolve_scorer_file(factory_root: Path, scorer_id: str | None) -> Path:
    """The one file defining `workflow:<id>`; BenchInputError when absent, ambiguous or
    escaping the factory."""
    key = f"workflow:{scorer_id}"
    if not scorer_id or not valid_id(scorer_id):
        raise BenchInputError(None, key, f"scorer id must match {ID_PATTERN}")
    root = factory_root.resolve()
    found = []
    for ext in (".py", ".yaml", ".yml"):
        path = factory_root / "scorers" / f"{scorer_id}{ext}"
        if path.exists() or path.is_symlink():
            real = path.resolve()
            if not real.is_relative_to(root):
                raise BenchInputError(path, key, "scorer file resolves outside the factory")
            if not real.is_file():
                raise BenchInputError(path, key, "scorer path is not a file")
            found.append(path)
    if not found:
        raise BenchInputError(
            factory_root / "scorers", key, f"no scorers/{scorer_id}.py or scorers/{scorer_id}.yaml"
        )
    if len(found) > 1:
        names = ", ".join(p.name for p in found)
        raise BenchInputError(factory_root / "scorers", key, f"ambiguous: {names}")
    return found[0]


def load_command_spec(path: Path) -> dict[str, Any]:
    try:
        spec = yaml.safe_load(read_input_text(path))
    except yaml.YAMLError as exc:
        raise BenchInputError(path, None, malformed_yaml(exc)) from None
    if not isinstance(spec, dict):
        raise BenchInputError(path, None, "expected a mapping with a 'command' key")
    for key in spec:
        if key not in COMMAND_KEYS:
            raise BenchInputError(path, str(key), f"unknown key; {closest(str(key), COMMAND_KEYS)}")
    command = spec.get("command")
    if (
        not isinstance(command, list)
        or not command
        or not all(isinstance(a, str | int | float) for a in command)
    ):
        raise BenchInputError(path, "command", "must be a non-empty argument array")
    timeout = spec.get("timeout_seconds", DEFAULT_TIMEOUT)
    if (
        isinstance(timeout, bool)
        or not isinstance(timeout, int | float)
        or not 0 < timeout <= MAX_TIMEOUT
    ):
        raise BenchInputError(path, "timeout_seconds", f"must be a number in (0, {MAX_TIMEOUT:g}]")
    env = spec.get("env", [])
    if not isinstance(env, list) or not all(isinstance(e, str) for e in env):
        raise BenchInputError(path, "env", "must be a list of variable names")
    return {"command": [str(a) for a in command], "timeout_seconds": float(timeout), "env": env}


def parse_scorer_output(value: Any) -> dict[str, Any]:
    """Validate a user scorer's answer; ValueError with the reason when it is unusable."""
    if not isinstance(value, dict):
        raise ValueError(f"scorer must return a JSON object, got {type(value).__name__}")
    scale = value.get("scale_max", 1.0)
    if isinstance(scale, bool) or not isinstance(scale, int | float) or scale <= 0:
        raise ValueError(f"scale_max must be a positive number, got {scale!r}")
    score = value.get("score", "missing")
    if score == "missing":
        raise ValueError("scorer answer has no 'score'")
    if score is not None:
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise ValueError(f"score must be a number, got {score!r}")
        if not 0 <= score <= scale:
            raise ValueError(f"score {score} outside 0..{scale:g}")
    reason = value.get("reason", "")
    if not isinstance(reason, str):
        raise ValueError("reason must be a string")
    details = value.get("details", {})
    if not isinstance(details, dict):
        raise ValueError("details must be an object")
    return {"score": score, "reason": reason, "scale_max": float(scale), "details": details}


def last_json_object(output: str) -> Any:
    """The whole output as JSON, else the last line that is a JSON object."""
    try:
        return json.loads(output)
    except json.JSONDecodeError:
        pass
    for line in reversed(output.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                continue
    raise ValueError(f"scorer printed no JSON object: {output.strip()[-300:]!r}")


@register_scorer
class WorkflowScorer(Scorer):
    name = "workflow"
    takes_argument = True

    def __init__(self, context: ScorerContext, arg: str | None = None):
        super().__init__(context, arg)
        self.scorer_name = f"{self.name}:{arg}"
        self._path: Path | None = None
        self._function: Any = None

    def preflight(self) -> None:
        path = self.path
        if path.suffix == ".py":
            self._load_function()
        else:
            load_command_spec(path)

    @property
    def path(self) -> Path:
        if self._path is None:
            self._path = resolve_scorer_file(self.context.factory_root, self.arg)
        return self._path

    def _load_function(self) -> Any:
        if self._function is None:
            module_name = f"bench_user_scorer_{self.arg}_{id(self)}".replace(".", "_").replace(
                "-", "_"
            )
            spec = importlib.util.spec_from_file_location(module_name, self.path)
            if spec is None or spec.loader is None:
                raise BenchInputError(self.path, None, "cannot import scorer module")
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            # (sys.exit in the user's module would end bench itself, silently, with its code)
            except (Exception, SystemExit) as exc:
                raise BenchInputError(
                    self.path, None, f"import failed: {type(exc).__name__}: {exc}"
                ) from None
            function = getattr(module, "score", None)
            if not callable(function):
                raise BenchInputError(self.path, "score", "module must define score(trial: dict)")
            self._function = function
        return self._function

    def score(self, trial: TrialEvidence) -> list[ScoreResult]:
        gate = outcome_gate(trial)
        if gate is not None:
            return [gate.result(self.scorer_name)]
        details: dict[str, Any] = {}
        try:
            path = self.path
            details["scorer_file"] = str(path)
            if path.suffix == ".py":
                raw = self._run_python(trial)
            else:
                raw, output = self._run_command(trial, path)
                details["output_tail"] = output[-2000:]
            answer = parse_scorer_output(raw)
        except Exception as exc:  # the user's code: any failure is a scorer error, never a 0
            reason = f"{type(exc).__name__}: {exc}" if not isinstance(exc, ValueError) else str(exc)
            return [ScoreResult(self.scorer_name, SCORE_ERROR, reason=reason, details=details)]
        details.update(answer["details"])
        if answer["score"] is None:
            return [
                ScoreResult(
                    self.scorer_name,
                    SCORE_NOT_SCORED,
                    reason=answer["reason"] or "scorer returned no score",
                    details=details,
                )
            ]
        return [
            ScoreResult.scored(
                self.scorer_name,
                float(answer["score"]),
                scale_max=answer["scale_max"],
                reason=answer["reason"],
                details=details,
            )
        ]

    def _run_python(self, trial: TrialEvidence) -> Any:
        function = self._load_function()
        try:
            return function(trial.as_json())
        except (Exception, SystemExit) as exc:  # (sys.exit in score() ended the whole run)
            tb = traceback.format_exception_only(type(exc), exc)[-1].strip()
            raise RuntimeError(f"scorer raised {tb}") from exc

    def _run_command(self, trial: TrialEvidence, path: Path) -> tuple[Any, str]:
        spec = load_command_spec(path)
        root = self.context.factory_root.resolve()
        with tempfile.TemporaryDirectory(prefix="bench-scorer-") as tmp:
            evidence = Path(tmp) / "evidence.json"
            evidence.write_text(json.dumps(trial.as_json(), default=str))
            subs = {
                "{evidence}": str(evidence),
                "{factory}": str(root),
                "{scorers}": str(path.parent.resolve()),
            }
            argv = []
            for arg in spec["command"]:
                for k, v in subs.items():
                    arg = arg.replace(k, v)
                argv.append(arg)
            result = run_command(
                argv,
                cwd=root,
                # a grader like checks: the documented GRADER_DEFAULTS included
                env=scrubbed_env(allow=spec["env"], home=Path(tmp), extra=GRADER_DEFAULTS),
                timeout=spec["timeout_seconds"],
            )
        if result.timed_out:
            raise RuntimeError(f"scorer command timed out after {spec['timeout_seconds']:g}s")
        if result.exit_code != 0:
            raise RuntimeError(
                f"scorer command exited {result.exit_code}: {result.output.strip()[-500:]}"
            )
        return last_json_object(result.output), result.output
