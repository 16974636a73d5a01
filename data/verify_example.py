#!/usr/bin/env python3
"""Verify the example data built by seed.py (standard library only).

    python data/verify_example.py [--example DIR] [--skip-determinism]

1. Seeds twice into temporary directories and checks that the commit shas and all
   files (outside .git) are identical (skip with --skip-determinism).
2. For every coding task of the `invoices` suite, in a fresh checkout of base_ref:
   - every check exits 0 or 1 and at least one exits 1 (the task is not already solved);
   - after `git apply` of the reference patch every check exits 0;
   - a recorded original marked right passes every check, one marked wrong fails one.
3. Lints the factory: task keys, ids, tags, difficulties, holdouts, files named by checks,
   originals' cost against prices.yaml, text tasks' assert types.
Prints a table and the time per grader; exits 1 on any problem.
"""

from __future__ import annotations

import argparse
import filecmp
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
SEED = HERE / "seed.py"

# What each recorded original is supposed to be (the task format has no field for it).
EXPECTED_ORIGINALS = {
    "amount-precision": "right",
    "pagination": "right",
    "tenant-isolation": "right",
    "atomic-save": "wrong",
    "rate-limiter-threads": "wrong",
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
    "original",
    "assert",
    "turns",
}
CHECK_KEYS = {"id", "description", "command", "files", "timeout_seconds"}
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
ASSERT_TYPES = {
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
}

# ---------------------------------------------------------------- a small YAML subset parser
# Enough for the example factory: block mappings and lists, literal block scalars (|),
# flow lists/mappings, quoted and plain scalars, full-line comments.

_KEY = re.compile(r"^([A-Za-z_][\w.-]*):(?:\s+(.*))?$")


class YamlError(ValueError):
    pass


def parse_yaml(text: str):
    lines = []
    for raw in text.splitlines():
        body = raw.lstrip(" ")
        lines.append([len(raw) - len(body), body.rstrip(), raw])
    value, i = _block(lines, _skip(lines, 0), None)
    if _skip(lines, i) < len(lines):
        raise YamlError(f"unexpected content at line {_skip(lines, i) + 1}")
    return value


def _skip(lines, i):
    while i < len(lines) and (not lines[i][1] or lines[i][1].startswith("#")):
        i += 1
    return i


def _block(lines, i, indent):
    if i >= len(lines):
        return None, i
    ind = lines[i][0] if indent is None else indent
    if lines[i][1] == "-" or lines[i][1].startswith("- "):
        return _list(lines, i, ind)
    return _mapping(lines, i, ind)


def _list(lines, i, ind):
    out = []
    while True:
        i = _skip(lines, i)
        if (
            i >= len(lines)
            or lines[i][0] != ind
            or not (lines[i][1] == "-" or lines[i][1].startswith("- "))
        ):
            return out, i
        rest = lines[i][1][1:].lstrip(" ")
        if not rest:
            j = _skip(lines, i + 1)
            value, i = (
                _block(lines, j, lines[j][0])
                if j < len(lines) and lines[j][0] > ind
                else (None, i + 1)
            )
        elif _KEY.match(rest) and rest[0] not in "\"'[{":
            lines[i] = [ind + 2 + (len(lines[i][1][1:]) - len(rest) - 1), rest, lines[i][2]]
            value, i = _mapping(lines, i, lines[i][0])
        else:
            value, i = _scalar(rest), i + 1
        out.append(value)


def _mapping(lines, i, ind):
    out = {}
    while True:
        i = _skip(lines, i)
        if i >= len(lines) or lines[i][0] != ind or lines[i][1].startswith("- "):
            return out, i
        if lines[i][0] < ind:
            return out, i
        m = _KEY.match(lines[i][1])
        if not m:
            raise YamlError(f"line {i + 1}: expected 'key: value', got {lines[i][1]!r}")
        key, rest = m.group(1), (m.group(2) or "").strip()
        if key in out:
            raise YamlError(f"line {i + 1}: duplicate key {key!r}")
        if rest in ("|", "|-"):
            j, block = i + 1, []
            while j < len(lines) and (not lines[j][1] or lines[j][0] > ind):
                block.append(lines[j][2])
                j += 1
            while block and not block[-1].strip():
                block.pop()
            cut = min((len(b) - len(b.lstrip(" ")) for b in block if b.strip()), default=0)
            value = "\n".join(b[cut:] for b in block) + ("\n" if rest == "|" and block else "")
            out[key], i = value, j
        elif rest:
            out[key], i = _scalar(rest), i + 1
        else:
            j = _skip(lines, i + 1)
            if j < len(lines) and (
                lines[j][0] > ind or (lines[j][0] == ind and lines[j][1].startswith("- "))
            ):
                out[key], i = _block(lines, j, lines[j][0])
            else:
                out[key], i = None, i + 1


def _scalar(text: str):
    value, pos = _flow(text, 0)
    if text[pos:].strip() and not text[pos:].strip().startswith("#"):
        raise YamlError(f"trailing text in {text!r}")
    return value


def _flow(s, pos, in_flow=False):
    while pos < len(s) and s[pos] == " ":
        pos += 1
    if pos >= len(s):
        return None, pos
    c = s[pos]
    if c == "[":
        items, pos = [], pos + 1
        while True:
            while s[pos] == " ":
                pos += 1
            if s[pos] == "]":
                return items, pos + 1
            item, pos = _flow(s, pos, True)
            items.append(item)
            while s[pos] == " ":
                pos += 1
            if s[pos] == ",":
                pos += 1
    if c == "{":
        obj, pos = {}, pos + 1
        while True:
            while s[pos] == " ":
                pos += 1
            if s[pos] == "}":
                return obj, pos + 1
            m = re.compile(r"([A-Za-z_][\w.-]*):\s").match(s, pos)
            if not m:
                raise YamlError(f"bad flow mapping in {s!r}")
            value, pos = _flow(s, m.end(), True)
            obj[m.group(1)] = value
            while s[pos] == " ":
                pos += 1
            if s[pos] == ",":
                pos += 1
    if c == '"':
        m = re.compile(r'"((?:[^"\\]|\\.)*)"').match(s, pos)
        return json.loads(m.group(0)), m.end()
    if c == "'":
        m = re.compile(r"'((?:[^']|'')*)'").match(s, pos)
        return m.group(1).replace("''", "'"), m.end()
    end = pos
    stop = ",]}" if in_flow else ""
    while end < len(s) and s[end] not in stop and not s.startswith(" #", end):
        end += 1
    return _plain(s[pos:end].strip()), end


def _plain(text: str):
    if text in ("", "~", "null"):
        return None
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    if re.fullmatch(r"[-+]?(\d+\.\d*|\.\d+)([eE][-+]?\d+)?", text):
        return float(text)
    return text


def load(path: Path):
    try:
        return parse_yaml(path.read_text(encoding="utf-8"))
    except (YamlError, IndexError, AttributeError, ValueError) as exc:
        raise SystemExit(f"verify: cannot parse {path}: {exc}") from None


# ---------------------------------------------------------------- helpers


def git(cwd, *args, check=True):
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def seed(out: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-B", str(SEED), "--out", str(out)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise SystemExit(f"verify: seed.py failed:\n{proc.stdout}{proc.stderr}")


def tree_files(root: Path) -> list[str]:
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and ".git" not in p.relative_to(root).parts
    )


def determinism(problems: list[str]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        a, b = Path(tmp) / "a", Path(tmp) / "b"
        seed(a)
        seed(b)
        for repo in ("service-repo", "factory"):
            shas = []
            for root in (a, b):
                refs = git(
                    root / repo, "for-each-ref", "--format=%(refname) %(objectname)"
                ).stdout.splitlines()
                head = git(root / repo, "rev-parse", "HEAD").stdout.strip()
                shas.append((head, refs))
            same = shas[0] == shas[1]
            print(
                f"determinism  {repo:<13} HEAD {shas[0][0]}  {'identical' if same else 'DIFFERENT: ' + shas[1][0]}"
            )
            for ref in shas[0][1]:
                print(f"             {ref}")
            if not same:
                problems.append(f"{repo}: commit shas differ between two seed runs")
            files = tree_files(a / repo)
            if files != tree_files(b / repo):
                problems.append(f"{repo}: file lists differ between two seed runs")
                continue
            _, mismatch, errors = filecmp.cmpfiles(a / repo, b / repo, files, shallow=False)
            if mismatch or errors:
                problems.append(f"{repo}: files differ between two seed runs: {mismatch + errors}")
            else:
                print(f"             {len(files)} files (outside .git) byte-identical")


def run_checks(task, suite_dir: Path, workspace: Path, timings: dict) -> list[tuple[str, int, str]]:
    results = []
    for check in task["checks"]:
        cmd = [
            sys.executable
            if part == "python"
            else part.replace("{inputs}", str(suite_dir)).replace("{workspace}", str(workspace))
            for part in check["command"]
        ]
        started = time.perf_counter()
        try:
            proc = subprocess.run(
                cmd,
                cwd=workspace,
                capture_output=True,
                text=True,
                timeout=check.get("timeout_seconds", 60),
                env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
            )
            code, out = proc.returncode, (proc.stdout.strip() or proc.stderr.strip()).splitlines()
            message = out[-1] if out else ""
        except subprocess.TimeoutExpired:
            code, message = -1, "timeout"
        grader = Path(check["files"][0]).name if check.get("files") else check["id"]
        timings.setdefault(grader, []).append(time.perf_counter() - started)
        results.append((check["id"], code, message))
    return results


def reset(workspace: Path, ref: str) -> None:
    git(workspace, "checkout", "-q", "-f", "--detach", ref)
    git(workspace, "clean", "-qfdx")


def apply(workspace: Path, patch: Path) -> str | None:
    proc = git(workspace, "apply", "--check", str(patch), check=False)
    if proc.returncode != 0:
        return proc.stderr.strip()
    git(workspace, "apply", str(patch))
    return None


def fmt(results) -> str:
    return " ".join(f"{cid}={code}" for cid, code, _ in results)


# ---------------------------------------------------------------- lint


def lint(factory: Path, problems: list[str]) -> None:
    prices = load(factory / "prices.yaml")
    suite_dir = factory / "benchmarks" / "invoices"
    tasks = sorted((suite_dir / "tasks").glob("*.yaml"))
    tags, holdouts, difficulties, empty_tags, originals = set(), 0, set(), 0, 0
    for path in tasks:
        task = load(path)
        where = f"invoices/{path.name}"
        for key in set(task) - TASK_KEYS:
            problems.append(f"{where}: unknown key {key!r}")
        if task.get("id", path.stem) != path.stem:
            problems.append(f"{where}: id {task.get('id')!r} differs from the file name")
        if task.get("base_ref") not in ("v1.0", "v1.1"):
            problems.append(f"{where}: base_ref {task.get('base_ref')!r}")
        if "-" in task.get("tags", []):
            problems.append(f"{where}: reserved tag '-'")
        tags.update(task.get("tags", []))
        empty_tags += task.get("tags") == []
        holdouts += task.get("holdout") is True
        difficulties.add(task.get("difficulty"))
        if not task.get("criteria"):
            problems.append(f"{where}: no criteria")
        for check in task.get("checks", []):
            for key in set(check) - CHECK_KEYS:
                problems.append(f"{where}: check {check.get('id')}: unknown key {key!r}")
            for f in check.get("files", []):
                if not (suite_dir / f).is_file():
                    problems.append(f"{where}: check file {f} missing")
                if f"{{inputs}}/{f}" not in check["command"]:
                    problems.append(f"{where}: {f} listed but not used by the command")
            if not 1 <= check.get("timeout_seconds", 60) <= 600:
                problems.append(f"{where}: timeout out of range")
        ref = suite_dir / task.get("reference_patch", f"references/{path.stem}.patch")
        if not ref.is_file():
            problems.append(f"{where}: reference patch {ref.name} missing")
        original = task.get("original")
        if original:
            originals += 1
            problems.extend(_lint_original(where, original, prices, suite_dir))
    print(
        f"lint         invoices: {len(tasks)} tasks, tags {sorted(tags)}, {empty_tags} with tags: [], "
        f"difficulties {sorted(difficulties)}, {holdouts} holdout, {originals} originals"
    )
    if len(tasks) < 12:
        problems.append("fewer than 12 coding tasks")
    if len(tags) < 4 or not empty_tags:
        problems.append("need >= 4 tags and one task with tags: []")
    if holdouts < 3 or difficulties != {"easy", "medium", "hard"}:
        problems.append("need >= 3 holdouts and easy/medium/hard tasks")
    if originals != len(EXPECTED_ORIGINALS):
        problems.append(f"{originals} originals, expected {len(EXPECTED_ORIGINALS)}")

    support = factory / "benchmarks" / "support"
    n_assert = n_turns = 0
    for path in sorted((support / "tasks").glob("*.yaml")):
        task = load(path)
        where = f"support/{path.name}"
        for key in set(task) - TASK_KEYS:
            problems.append(f"{where}: unknown key {key!r}")
        if "repo" in task or "base_ref" in task:
            problems.append(f"{where}: a text task has repo/base_ref")
        asserts = list(task.get("assert", []))
        for turn in task.get("turns", []):
            if set(turn) - {"user", "assert"} or not turn.get("user"):
                problems.append(f"{where}: bad turn {turn}")
            asserts += turn.get("assert", [])
        for a in asserts:
            if set(a) != {"type", "value"} or a["type"] not in ASSERT_TYPES:
                problems.append(f"{where}: bad assert {a}")
            elif a["type"] == "regex":
                re.compile(a["value"])
        n_assert += "assert" in task
        n_turns += "turns" in task
        if not task.get("prompt") and "turns" not in task:
            problems.append(f"{where}: no prompt")
        if task.get("original"):
            problems.extend(_lint_original(where, task["original"], prices, support))
    print(f"lint         support: {n_assert} tasks with assert, {n_turns} multi-turn scenarios")
    if n_assert < 4 or n_turns < 2:
        problems.append("support suite needs >= 4 assert tasks and >= 2 scenarios")
    for name in ("coder", "reference", "replay", "noop", "support-bot"):
        agent = load(factory / "agents" / f"{name}.yaml")
        for key in ("system_prompt",):
            if key in agent and not (factory / "agents" / agent[key]).resolve().is_file():
                problems.append(f"agents/{name}.yaml: {agent[key]} missing")
        for skill in agent.get("skills", []):
            if not (factory / "agents" / skill).resolve().is_file():
                problems.append(f"agents/{name}.yaml: {skill} missing")
    for name in ("demo", "support", "models"):
        launch = load(factory / "launches" / f"{name}.yaml")
        for config in launch["configs"]:
            if not (factory / "agents" / f"{config['agent']}.yaml").is_file():
                problems.append(f"launches/{name}.yaml: unknown agent {config['agent']}")
        if not (factory / "benchmarks" / launch["suite"] / "suite.yaml").is_file():
            problems.append(f"launches/{name}.yaml: unknown suite")
    repo = load(suite_dir / "suite.yaml")["repo"]
    if not (suite_dir / repo / ".git").exists():
        problems.append(f"invoices/suite.yaml: repo {repo} does not resolve to a git repository")


def _lint_original(where, original, prices, suite_dir) -> list[str]:
    out = [f"{where}: original: unknown key {k!r}" for k in set(original) - ORIGINAL_KEYS]
    price = prices.get(original.get("model"))
    if price is None:
        return out + [f"{where}: original model {original.get('model')!r} not in prices.yaml"]
    cost = (
        sum(
            original.get(f"{kind}_tokens", 0) * price[kind]
            for kind in ("input", "output", "cache_read", "cache_write")
        )
        / 1e6
    )
    if abs(cost - original["cost_usd"]) > 1e-6:
        out.append(
            f"{where}: original cost_usd {original['cost_usd']} != {cost:.6f} from prices.yaml"
        )
    if "patch" in original and not (suite_dir / original["patch"]).is_file():
        out.append(f"{where}: original patch missing")
    return out


# ---------------------------------------------------------------- main


def verify_tasks(example: Path, problems: list[str]) -> dict:
    factory = example / "factory"
    suite_dir = factory / "benchmarks" / "invoices"
    timings: dict[str, list[float]] = {}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        git(tmp, "clone", "-q", str(example / "service-repo"), str(workspace))
        for path in sorted((suite_dir / "tasks").glob("*.yaml")):
            task = load(path)
            tid, ref = path.stem, task["base_ref"]
            reset(workspace, ref)
            base = run_checks(task, suite_dir, workspace, timings)
            codes = [code for _, code, _ in base]
            if any(code not in (0, 1) for code in codes):
                problems.append(
                    f"{tid}: base checks {fmt(base)} ({[m for _, c, m in base if c not in (0, 1)]})"
                )
            elif 1 not in codes:
                problems.append(f"{tid}: no check fails on {ref}: {fmt(base)}")
            reset(workspace, ref)
            patch = suite_dir / task.get("reference_patch", f"references/{tid}.patch")
            error = apply(workspace, patch)
            solved = [] if error else run_checks(task, suite_dir, workspace, timings)
            if error:
                problems.append(f"{tid}: reference patch does not apply: {error}")
            elif any(code != 0 for _, code, _ in solved):
                problems.append(
                    f"{tid}: reference fails {fmt(solved)} ({[m for _, c, m in solved if c]})"
                )
            orig_col = "-"
            if task.get("original"):
                expect = EXPECTED_ORIGINALS.get(tid)
                reset(workspace, ref)
                error = apply(workspace, suite_dir / task["original"]["patch"])
                res = [] if error else run_checks(task, suite_dir, workspace, timings)
                codes = [code for _, code, _ in res]
                if error:
                    problems.append(f"{tid}: original patch does not apply: {error}")
                elif any(c not in (0, 1) for c in codes):
                    problems.append(f"{tid}: original gives grader faults {fmt(res)}")
                elif expect == "right" and any(codes):
                    problems.append(f"{tid}: 'right' original fails {fmt(res)}")
                elif expect == "wrong" and 1 not in codes:
                    problems.append(f"{tid}: 'wrong' original passes every check")
                elif expect is None:
                    problems.append(f"{tid}: original not listed in EXPECTED_ORIGINALS")
                orig_col = f"{expect}: {fmt(res)}"
            rows.append(
                (
                    tid,
                    ref,
                    ",".join(task.get("tags") or []) or "(none)",
                    task["difficulty"],
                    "yes" if task.get("holdout") else "",
                    fmt(base),
                    fmt(solved),
                    orig_col,
                )
            )
    headers = (
        "task",
        "base",
        "tags",
        "difficulty",
        "holdout",
        "base checks",
        "reference",
        "original",
    )
    widths = [max(len(str(r[i])) for r in rows + [headers]) for i in range(len(headers))]
    print()
    for row in [headers, tuple("-" * w for w in widths)] + rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    return timings


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Verify the bench_pipeline example data.")
    parser.add_argument(
        "--example", type=Path, help="an already seeded directory (default: seed a temporary one)"
    )
    parser.add_argument("--skip-determinism", action="store_true")
    args = parser.parse_args(argv)
    problems: list[str] = []
    started = time.perf_counter()
    if not args.skip_determinism:
        determinism(problems)
    with tempfile.TemporaryDirectory() as tmp:
        example = args.example.resolve() if args.example else Path(tmp) / "example"
        if not args.example:
            seed(example)
        lint(example / "factory", problems)
        timings = verify_tasks(example, problems)
    print("\ngrader timings (wall clock per run, including interpreter start-up)")
    for grader, values in sorted(timings.items()):
        print(
            f"  {grader:<24} runs={len(values):<3} mean={statistics.mean(values) * 1000:6.1f} ms"
            f"  max={max(values) * 1000:6.1f} ms"
        )
    total = sum(sum(v) for v in timings.values())
    print(
        f"  {'all checks':<24} runs={sum(len(v) for v in timings.values()):<3} total={total:.2f} s;"
        f" whole verification {time.perf_counter() - started:.2f} s"
    )
    if problems:
        print(f"\n{len(problems)} PROBLEM(S):")
        for p in problems:
            print(f"  - {p}")
        return 1
    print(
        "\nOK: every task fails on its base, passes with its reference; originals behave as recorded"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
