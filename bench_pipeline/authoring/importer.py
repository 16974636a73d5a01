"""`bench import manifest.json`: a Yard-style manifest (schema_version 1) -> a factory suite
plus a launch.

Manifest (JSON; paths relative to the manifest file):

```json
{
  "schema_version": 1,
  "name": "invoices",                      # optional suite name (else --suite, else file stem)
  "title": "...",                          # optional
  "repository": "../service-repo",         # path (relative to the manifest) or URL
  "initial_commit": "v1.0",                # commit/tag/branch every case starts from
  "prepare_commands": [["python", "-m", "pip", "install", "-e", "."]],
  "repetitions": 2, "max_attempts": 2, "timeout_seconds": 900, "max_cost_usd": 1.0,
  "cases": [{
      "id": "amount-precision", "title": "...", "prompt": "...",
      "initial_commit": "v1.1",            # optional per-case override
      "tags": ["validation"], "holdout": false,
      "reference_patch": "patches/amount.patch",   # optional
      "files": ["graders/common.py"],       # optional, shared by all criteria of the case
      "criteria": [
        "free text for model graders",
        {"id": "AC-1", "description": "...", "command": ["python", "graders/amount.py", "{workspace}"],
         "files": ["graders/amount.py"], "timeout_seconds": 60}
      ]}],
  "variants": [
      {"id": "sonnet", "agent": "coder", "model": "claude-sonnet-4-5", "effort": "medium"},
      {"id": "script", "kind": "command", "command": ["python", "/opt/agent.py", "{prompt_file}"]}
  ]
}
```

Mapping:
- the suite is `benchmarks/<suite>/` with `suite.yaml` (`repo` = repository, written relative to
  the suite file when local; `prepare_commands`; `defaults` from `max_attempts` ->
  `max_iterations`, `timeout_seconds`, `max_cost_usd` -> `budget_usd`), one `tasks/<id>.yaml`
  per case (`initial_commit` -> `base_ref`), `references/<id>.patch` when a case has one;
- every criterion becomes a bullet of the task's `criteria` (its `description`, or the text);
  a criterion with a `command` also becomes a deterministic check (`id` default `AC-<n>`);
- criterion and case `files` are copied to `graders/<case-id>/<path>` and snapshotted as the
  check's `files`; in the command an argument equal to a listed path, or `{inputs}/<path>`,
  is rewritten to `{inputs}/graders/<case-id>/<path>`; `{workspace}` stays as is;
- variants -> the launch's `configs`: a variant naming an existing factory `agent` becomes
  `{id, agent, ...overrides}`; a variant with a `kind` gets its own agent file
  `agents/<suite>-<variant-id>.yaml`; `model`, `effort`, `max_cost_usd`/`budget_usd`,
  `max_attempts`, `timeout_seconds` are per-config overrides;
- `launches/<suite>.yaml`: the suite, the configs, `repetitions`, scorers `[checks]`.

Nothing is overwritten: an existing suite, launch or generated agent file is refused. After
writing, the new launch is loaded with the normal loader; if it does not validate, every file
written is removed again and the loader's error is reported.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from bench_pipeline.formats.errors import BenchInputError, closest
from bench_pipeline.formats.model import EFFORTS, ID_PATTERN, MAX_CONFIGS, valid_id
from bench_pipeline.formats.registry import AGENT_KINDS

TOP_KEYS = {
    "schema_version",
    "name",
    "title",
    "repository",
    "initial_commit",
    "prepare_commands",
    "cases",
    "variants",
    "repetitions",
    "max_attempts",
    "timeout_seconds",
    "max_cost_usd",
}
CASE_KEYS = {
    "id",
    "title",
    "prompt",
    "initial_commit",
    "tags",
    "holdout",
    "reference_patch",
    "files",
    "criteria",
}
CRITERION_KEYS = {"id", "description", "command", "files", "timeout_seconds"}
VARIANT_AGENT_KEYS = {
    "kind",
    "command",
    "preset",
    "url",
    "api_key_env",
    "base_url",
    "env",
    "system_prompt",
}
VARIANT_KEYS = {
    "id",
    "agent",
    "model",
    "effort",
    "max_cost_usd",
    "budget_usd",
    "max_attempts",
    "timeout_seconds",
} | VARIANT_AGENT_KEYS


class _M:
    """Checked access to one mapping of the manifest; errors name the file and dotted key."""

    def __init__(self, file: str, data: Any, allowed: set[str], prefix: str):
        self.file, self.prefix = file, prefix
        if not isinstance(data, dict):
            raise BenchInputError(file, prefix.rstrip(".") or None, "expected an object")
        for key in data:
            if key not in allowed:
                raise BenchInputError(
                    file, prefix + str(key), f"unknown key; {closest(str(key), allowed)}"
                )
        self.data = data

    def fail(self, key: str, problem: str) -> BenchInputError:
        return BenchInputError(self.file, self.prefix + key, problem)

    def text(self, key: str, required: bool = False) -> str | None:
        v = self.data.get(key)
        if v is None:
            if required:
                raise self.fail(key, "is required")
            return None
        if not isinstance(v, str) or not v.strip():
            raise self.fail(key, "expected non-empty text")
        return v

    def ident(self, key: str, default: str | None = None) -> str:
        v = self.text(key) or default
        if v is None:
            raise self.fail(key, "is required")
        if not valid_id(v):
            raise self.fail(key, f"'{v}' is not a valid id (pattern {ID_PATTERN})")
        return v

    def number(self, key: str, lo: float, hi: float | None = None, whole: bool = False):
        v = self.data.get(key)
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int | float) or (whole and v != int(v)):
            raise self.fail(key, "expected a whole number" if whole else "expected a number")
        if v < lo or (hi is not None and v > hi):
            raise self.fail(key, f"{v} is out of range ({lo}..{hi if hi is not None else ''})")
        return int(v) if whole else v

    def argv(self, key: str) -> list[str] | None:
        v = self.data.get(key)
        if v is None:
            return None
        if not isinstance(v, list) or not v or not all(isinstance(a, str | int | float) for a in v):
            raise self.fail(key, 'expected an argument array such as ["python", "check.py"]')
        return [str(a) for a in v]

    def str_list(self, key: str) -> list[str]:
        v = self.data.get(key)
        if v is None:
            return []
        if not isinstance(v, list) or not all(isinstance(a, str) for a in v):
            raise self.fail(key, "expected a list of text")
        return list(v)


def _rel_file(m: _M, key: str, rel: str, base: Path) -> tuple[str, Path]:
    p = PurePosixPath(rel)
    if p.is_absolute() or ".." in p.parts or not p.parts:
        raise m.fail(key, f"'{rel}' must be a path relative to the manifest, without '..'")
    src = base / rel
    if not src.is_file():
        raise m.fail(key, f"'{rel}' does not exist (looked in {base})")
    return p.as_posix(), src


def read_manifest(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise BenchInputError(str(path), None, f"cannot read: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise BenchInputError(str(path), None, f"not valid JSON: {exc}") from None
    return data


def plan_import(manifest: dict[str, Any], manifest_path: Path, suite: str | None) -> dict[str, Any]:
    """Validate the manifest and compute every file to write (pure: nothing is written).

    Returns {"suite": name, "files": {factory-relative path: text}, "copies": {factory-relative
    path: source path}, "agents": [names generated]}.
    """
    file = str(manifest_path)
    base = manifest_path.parent.absolute()
    m = _M(file, manifest, TOP_KEYS, "")
    if manifest.get("schema_version") != 1:
        raise m.fail("schema_version", f"must be 1 (got {manifest.get('schema_version')!r})")
    name = suite or m.text("name") or manifest_path.stem
    if not valid_id(name):
        raise m.fail("name", f"suite name '{name}' is not a valid id (pattern {ID_PATTERN})")
    repository = m.text("repository", required=True) or ""
    if "://" in repository or repository.startswith("git@"):
        repo_abs: str | None = None
    else:
        repo_abs = str((base / repository).resolve())
        if not Path(repo_abs).is_dir():
            raise m.fail("repository", f"'{repository}' is not a folder (looked in {base})")
    initial = m.text("initial_commit", required=True)
    prepare = []
    raw_prepare = manifest.get("prepare_commands") or []
    if not isinstance(raw_prepare, list):
        raise m.fail("prepare_commands", "expected a list of argument arrays")
    for i, cmd in enumerate(raw_prepare):
        if not isinstance(cmd, list) or not cmd or not all(isinstance(a, str) for a in cmd):
            raise m.fail(f"prepare_commands[{i}]", "expected a non-empty argument array")
        prepare.append(list(cmd))
    defaults: dict[str, Any] = {}
    if (v := m.number("max_attempts", 1, 10, whole=True)) is not None:
        defaults["max_iterations"] = v
    if (v := m.number("timeout_seconds", 1, 86400)) is not None:
        defaults["timeout_seconds"] = v
    if (v := m.number("max_cost_usd", 0)) is not None:
        defaults["budget_usd"] = v
    repetitions = m.number("repetitions", 1, 10, whole=True) or 2

    files: dict[str, str] = {}
    copies: dict[str, Path] = {}
    sdir = f"benchmarks/{name}"
    cases = manifest.get("cases")
    if not isinstance(cases, list) or not cases:
        raise m.fail("cases", "expected a non-empty list of cases")
    seen: set[str] = set()
    for i, raw in enumerate(cases):
        c = _M(file, raw, CASE_KEYS, f"cases[{i}].")
        cid = c.ident("id")
        if cid in seen:
            raise c.fail("id", f"duplicate case id '{cid}'")
        seen.add(cid)
        prompt = c.text("prompt", required=True)
        shared = [_rel_file(c, f"files[{j}]", r, base) for j, r in enumerate(c.str_list("files"))]
        criteria_text: list[str] = []
        checks: list[dict[str, Any]] = []
        raw_criteria = raw.get("criteria")
        if not isinstance(raw_criteria, list) or not raw_criteria:
            raise c.fail("criteria", "expected a non-empty list (text or {id, command, files})")
        for j, crit in enumerate(raw_criteria):
            if isinstance(crit, str):
                criteria_text.append(crit)
                continue
            k = _M(file, crit, CRITERION_KEYS, f"cases[{i}].criteria[{j}].")
            description = k.text("description") or ""
            if description:
                criteria_text.append(description)
            command = k.argv("command")
            if command is None:
                if not description:
                    raise k.fail("description", "a criterion without a command needs a description")
                continue
            own = [_rel_file(k, f"files[{n}]", r, base) for n, r in enumerate(k.str_list("files"))]
            listed = dict.fromkeys([r for r, _ in shared] + [r for r, _ in own])
            for rel, src in shared + own:
                copies[f"{sdir}/graders/{cid}/{rel}"] = src

            def rewrite(arg: str, listed=listed, cid=cid) -> str:
                if arg in listed:
                    return f"{{inputs}}/graders/{cid}/{arg}"
                return re.sub(
                    r"\{inputs\}/([^\s\"']+)",
                    lambda mm: (
                        f"{{inputs}}/graders/{cid}/{mm.group(1)}"
                        if mm.group(1) in listed
                        else mm.group(0)
                    ),
                    arg,
                )

            check: dict[str, Any] = {
                "id": k.ident("id", f"AC-{len(checks) + 1}"),
                "description": description or f"criterion {j + 1}",
                "command": [rewrite(a) for a in command],
                "files": [f"graders/{cid}/{r}" for r in listed],
            }
            if (t := k.number("timeout_seconds", 1, 600)) is not None:
                check["timeout_seconds"] = t
            checks.append(check)
        task: dict[str, Any] = {"id": cid, "title": c.text("title") or cid}
        task["base_ref"] = c.text("initial_commit") or initial
        task["prompt"] = prompt
        if tags := c.str_list("tags"):
            task["tags"] = tags
        if raw.get("holdout") is not None:
            if not isinstance(raw["holdout"], bool):
                raise c.fail("holdout", "expected true or false")
            task["holdout"] = raw["holdout"]
        task["criteria"] = criteria_text
        if checks:
            task["checks"] = checks
        if ref := c.text("reference_patch"):
            _, src = _rel_file(c, "reference_patch", ref, base)
            copies[f"{sdir}/references/{cid}.patch"] = src
        files[f"{sdir}/tasks/{cid}.yaml"] = _dump(task, f"Imported from {manifest_path.name}")

    variants = manifest.get("variants")
    if not isinstance(variants, list) or not variants:
        raise m.fail("variants", "expected a non-empty list of variants {id, agent|kind, ...}")
    if len(variants) > MAX_CONFIGS:
        raise m.fail("variants", f"{len(variants)} variants; a launch runs at most {MAX_CONFIGS}")
    configs, agents, vids = [], [], set()
    for i, raw in enumerate(variants):
        v = _M(file, raw, VARIANT_KEYS, f"variants[{i}].")
        vid = v.ident("id")
        if vid in vids:
            raise v.fail("id", f"duplicate variant id '{vid}'")
        vids.add(vid)
        config: dict[str, Any] = {"id": vid}
        kind = v.text("kind")
        agent = v.text("agent")
        if kind and agent:
            raise v.fail(
                "kind", "give either `agent` (an agent of the factory) or `kind`, not both"
            )
        if kind:
            if kind not in AGENT_KINDS:
                raise v.fail(
                    "kind", f"'{kind}' is not an agent kind; {closest(kind, AGENT_KINDS.names())}"
                )
            agent = f"{name}-{vid}"
            spec: dict[str, Any] = {"kind": kind}
            for key in sorted(VARIANT_AGENT_KEYS - {"kind"}):
                if raw.get(key) is not None:
                    spec[key] = raw[key]
            if "system_prompt" in spec:
                raise v.fail("system_prompt", "give the prompt in an agent of the factory instead")
            files[f"agents/{agent}.yaml"] = _dump(spec, f"Variant {vid} of {manifest_path.name}")
            agents.append(agent)
        elif not agent:
            raise v.fail("agent", "is required: an agent of the factory, or give `kind`")
        else:
            for key in VARIANT_AGENT_KEYS:
                if raw.get(key) is not None:
                    raise v.fail(
                        key, "only with `kind` (a generated agent); the agent file sets it"
                    )
        config["agent"] = agent
        if model := v.text("model"):
            config["model"] = model
        if effort := v.text("effort"):
            if effort not in EFFORTS:
                raise v.fail("effort", f"'{effort}' is not allowed; {closest(effort, EFFORTS)}")
            config["effort"] = effort
        budget = v.number("max_cost_usd", 0)
        budget = budget if budget is not None else v.number("budget_usd", 0)
        if budget is not None:
            config["budget_usd"] = budget
        if (a := v.number("max_attempts", 1, 10, whole=True)) is not None:
            config["max_iterations"] = a
        if (t := v.number("timeout_seconds", 1, 86400)) is not None:
            config["timeout_seconds"] = t
        configs.append(config)

    suite_doc: dict[str, Any] = {"title": m.text("title") or f"Imported from {manifest_path.name}"}
    suite_doc["agent"] = configs[0]["agent"]
    suite_doc["repo"] = repository if repo_abs is None else "@REPO@"
    if defaults:
        suite_doc["defaults"] = defaults
    suite_doc["prepare_commands"] = prepare
    files[f"{sdir}/suite.yaml"] = _dump(suite_doc, f"Imported from {manifest_path.name}")
    launch = {
        "kind": "BenchmarkLaunch",
        "suite": name,
        "configs": configs,
        "repetitions": repetitions,
        "scorers": ["checks"],
    }
    files[f"launches/{name}.yaml"] = _dump(launch, f"Imported from {manifest_path.name}")
    return {
        "suite": name,
        "files": files,
        "copies": copies,
        "agents": agents,
        "repo_abs": repo_abs,
    }


def _dump(data: dict[str, Any], comment: str) -> str:
    body = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=100)
    return f"# {comment}\n{body}"


def import_manifest(
    manifest_path: str | Path, factory: str | Path, suite: str | None = None
) -> dict[str, Any]:
    """Write the planned files into `factory` (created if missing) and validate the launch."""
    from bench_pipeline.formats.loader import load_launch

    manifest_path = Path(manifest_path).absolute()
    root = Path(factory).absolute()
    plan = plan_import(read_manifest(manifest_path), manifest_path, suite)
    name = plan["suite"]
    sdir = root / "benchmarks" / name
    if plan["repo_abs"] is not None:
        rel = os.path.relpath(plan["repo_abs"], sdir)
        key = f"benchmarks/{name}/suite.yaml"
        plan["files"][key] = plan["files"][key].replace("'@REPO@'", rel).replace("@REPO@", rel)
    targets = [root / p for p in plan["files"]] + [root / p for p in plan["copies"]]
    if sdir.exists():
        raise BenchInputError(str(sdir), None, "suite already exists; pick another with --suite")
    for t in targets:
        if t.exists():
            raise BenchInputError(str(t), None, "already exists; the import never overwrites")
    created_dirs = [
        d for d in (root, root / "agents", root / "benchmarks", root / "launches") if not d.exists()
    ]
    for d in created_dirs:
        d.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    try:
        for rel, text in plan["files"].items():
            t = root / rel
            t.parent.mkdir(parents=True, exist_ok=True)
            t.write_text(text, encoding="utf-8")
            written.append(t)
        for rel, src in plan["copies"].items():
            t = root / rel
            t.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, t)
            written.append(t)
        launch = load_launch(root / "launches" / f"{name}.yaml", root)
    except BaseException:
        for t in written:
            t.unlink(missing_ok=True)
        shutil.rmtree(sdir, ignore_errors=True)
        for d in reversed(created_dirs):
            shutil.rmtree(d, ignore_errors=True)
        raise
    return {**plan, "factory": str(root), "launch": launch, "written": [str(w) for w in written]}
