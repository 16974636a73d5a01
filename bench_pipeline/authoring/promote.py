"""`bench promote RUN CONFIG [--tag TAG]`: make a benchmarked configuration the agent's default.

Writes the configuration's resolved `model`, `effort` and `skills` into
`agents/<agent>.yaml` of the factory on a NEW branch `bench/promote/<config>-<run>` with the
results in the commit message, and opens a pull request when the factory has a GitHub remote
and `GITHUB_TOKEN` is set (API base `GITHUB_API_URL`, default https://api.github.com).

Decisions:
- The commit is built with git plumbing on a temporary index (read-tree, hash-object,
  update-index, write-tree, commit-tree, update-ref): the current branch, the index and the
  working tree are never touched, so uncommitted work in the factory is safe. The branch starts
  from the current HEAD, and the agent file is edited as it is committed there.
- The agent file is edited line by line (only the top-level `model:`, `effort:` and `skills:`
  entries are replaced or appended), so comments and the order of other keys survive.
- Skill paths are written relative to the agent file, like every factory path.
- A `factory_ref` configuration is refused: its agent lives at another ref of the factory and
  "promoting" it means merging that ref, not editing the live file. The synthesized replay
  baseline has no agent file and is refused too.
- For the pull request the branch is pushed to the GitHub remote with the user's own git
  credentials (the token is only sent to the API, never put into a URL).
"""

from __future__ import annotations

import hashlib
import os
import re
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bench_pipeline.formats import display
from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.model import Config
from bench_pipeline.runs.benchmark_run import BenchmarkRun

GITHUB_URL = re.compile(
    r"^(?:https?://(?:[^@/]+@)?github\.com/|git@github\.com:|ssh://git@github\.com/)"
    r"(?P<owner>[\w.-]+)/(?P<repo>[\w.-]+?)(?:\.git)?/?$"
)


@dataclass
class Promotion:
    branch: str
    commit: str
    agent_file: str  # repository-relative path
    changes: dict[str, Any]
    message: str
    pull_request: str | None = None  # html URL
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- pure helpers


def branch_name(config_id: str, run_id: str) -> str:
    return f"bench/promote/{config_id}-{run_id}"


def promotion_fields(config: Config, factory_root: Path) -> dict[str, Any]:
    """model, effort and skills of the configuration, as they go into the agent file."""
    agent = config.agent
    out: dict[str, Any] = {}
    if agent.model:
        out["model"] = agent.model
    if agent.effort:
        out["effort"] = agent.effort
    agents_dir = factory_root / "agents"
    out["skills"] = [
        Path(os.path.relpath(factory_root / s.path, agents_dir)).as_posix() for s in agent.skills
    ]
    return out


def _block_end(lines: list[str], start: int) -> int:
    """Index after the value block of the top-level key on line `start`."""
    j = start + 1
    while j < len(lines):
        line = lines[j]
        if line.startswith((" ", "\t", "- ")) or line.rstrip("\r\n") == "-":
            j += 1
            continue
        if not line.strip():
            k = j
            while k < len(lines) and not lines[k].strip():
                k += 1
            if k < len(lines) and lines[k].startswith((" ", "\t", "- ")):
                j = k
                continue
        break
    return j


def set_top_level(text: str, key: str, value: Any) -> str:
    """Replace (or append) one top-level key of a YAML mapping, keeping every other line."""
    rendered = yaml.safe_dump({key: value}, default_flow_style=False, sort_keys=False)
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if re.match(rf"^{re.escape(key)}\s*:", line):
            return "".join(lines[:i]) + rendered + "".join(lines[_block_end(lines, i) :])
    if text and not text.endswith("\n"):
        text += "\n"
    return text + rendered


def update_agent_yaml(text: str, fields: dict[str, Any]) -> str:
    out = text
    for key, value in fields.items():
        out = set_top_level(out, key, value)
    data = yaml.safe_load(out) or {}
    for key, value in fields.items():  # the edit must read back as intended
        if data.get(key) != value:
            raise ValueError(f"editing {key} in the agent file did not round-trip")
    return out


def _fmt(value: Any, kind: str) -> str:
    if display.is_missing(value):
        return "n/a"
    if kind == "pct":
        return display.percent(value)
    if kind == "usd":
        return display.usd(value)
    if kind == "num":
        return display.number(value)
    return str(value)


def results_line(scope: str, row: dict[str, Any]) -> str:
    cost = _fmt(row.get("avg_cost_usd"), "usd")
    coverage = _fmt(row.get("cost_coverage"), "pct")
    return (
        f"{scope:<20} overall {_fmt(row.get('overall'), 'num'):>6}  "
        f"pass rate {_fmt(row.get('pass_rate'), 'pct'):>6}  "
        f"avg cost {cost} (coverage {coverage})  "
        f"trials {int(row.get('trials') or 0)} ({int(row.get('trials_succeeded') or 0)} succeeded)"
    )


def commit_message(
    run: BenchmarkRun,
    config: Config,
    agent_file: str,
    changes: dict[str, Any],
    old: dict[str, Any],
    row: dict[str, Any],
    tag: str | None = None,
    tag_row: dict[str, Any] | None = None,
    notes: list[str] | None = None,
) -> str:
    lines = [
        f"bench: promote {config.id} of {run.run_id} to {agent_file}",
        "",
        f"Configuration '{config.id}' of benchmark run {run.run_id}",
        f"(suite {run.suite}, launch {run.launch.name}, task set {run.taskset.revision},",
        f"config hash {config.hash}).",
        "",
    ]
    for key, value in changes.items():
        lines.append(f"{key}: {old.get(key)!r} -> {value!r}")
    lines += ["", "Results (config table):", results_line("all tasks", row)]
    if tag is not None and tag_row is not None:
        lines.append(results_line(f"tag {tag}", tag_row))
    for note in notes or []:
        lines += ["", f"note: {note}"]
    lines += ["", f"Promoted with `bench promote {run.run_id} {config.id}`."]
    return "\n".join(lines) + "\n"


def github_repo(url: str) -> tuple[str, str] | None:
    m = GITHUB_URL.match(url.strip())
    return (m.group("owner"), m.group("repo")) if m else None


# --------------------------------------------------------------------------- git


def _repo(factory_root: Path):
    import git

    try:
        return git.Repo(factory_root, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise BenchInputError(
            str(factory_root), None, "the factory is not a git repository; promote needs git"
        ) from None


def _identity_env(repo: Any) -> dict[str, str]:
    reader = repo.config_reader()
    env = {}
    if not reader.has_option("user", "name") and "GIT_AUTHOR_NAME" not in os.environ:
        env["GIT_AUTHOR_NAME"] = env["GIT_COMMITTER_NAME"] = "bench"
    if not reader.has_option("user", "email") and "GIT_AUTHOR_EMAIL" not in os.environ:
        env["GIT_AUTHOR_EMAIL"] = env["GIT_COMMITTER_EMAIL"] = "bench@localhost"
    return env


def commit_file_on_new_branch(
    repo: Any, branch: str, rel: str, content: str, mode: int, message: str
) -> str:
    """Commit `content` at `rel` on top of HEAD as a new branch, through a temporary index."""
    head = repo.head.commit.hexsha
    with tempfile.TemporaryDirectory(prefix="bench-promote-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        blob_file = Path(tmp) / "blob"
        blob_file.write_text(content, encoding="utf-8")
        repo.git.read_tree(head, env=env)
        blob = repo.git.hash_object("-w", "--no-filters", str(blob_file))
        repo.git.update_index("--add", "--cacheinfo", f"{mode:o},{blob},{rel}", env=env)
        tree = repo.git.write_tree(env=env)
        msg_file = Path(tmp) / "message"
        msg_file.write_text(message, encoding="utf-8")
        commit = repo.git.commit_tree(
            tree, "-p", head, "-F", str(msg_file), env=_identity_env(repo)
        )
    repo.git.update_ref(f"refs/heads/{branch}", commit, "0" * 40)
    return commit


def github_remote(repo: Any) -> tuple[str, str, str] | None:
    """(remote name, owner, repo) of the first remote whose configured URL is on GitHub."""
    reader = repo.config_reader()
    for remote in repo.remotes:
        section = f'remote "{remote.name}"'
        if not reader.has_option(section, "url"):
            continue
        found = github_repo(str(reader.get_value(section, "url")))
        if found:
            return remote.name, *found
    return None


def open_pull_request(
    api: str, owner: str, name: str, token: str, head: str, base: str, title: str, body: str
) -> str:
    import httpx

    resp = httpx.post(
        f"{api.rstrip('/')}/repos/{owner}/{name}/pulls",
        json={"title": title, "head": head, "base": base, "body": body},
        headers={
            "Authorization": f"Bearer {token}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        },
        timeout=30,
    )
    if resp.status_code >= 300:
        try:
            detail = resp.json().get("message", resp.text)
        except ValueError:
            detail = resp.text
        raise RuntimeError(f"GitHub refused the pull request ({resp.status_code}): {detail}")
    return str(resp.json().get("html_url") or resp.json().get("url") or "")


# --------------------------------------------------------------------------- promote


def check_promotable(run: BenchmarkRun, config_id: str) -> Config:
    ids = [c.id for c in run.launch.configs]
    if config_id not in ids:
        raise BenchInputError(
            None,
            "CONFIG",
            f"run {run.run_id} has no configuration '{config_id}' (has: {', '.join(ids)})",
        )
    config = run.config(config_id)
    if config.factory_ref:
        raise BenchInputError(
            None,
            "CONFIG",
            f"'{config_id}' runs the agent at factory_ref '{config.factory_ref}'; a factory_ref "
            "config cannot be promoted (merge that ref instead)",
        )
    return config


def promote(
    run: BenchmarkRun,
    config_id: str,
    row: dict[str, Any],
    *,
    tag: str | None = None,
    tag_row: dict[str, Any] | None = None,
    environ: dict[str, str] | None = None,
) -> Promotion:
    environ = dict(os.environ if environ is None else environ)
    config = check_promotable(run, config_id)
    factory_root = run.launch.factory_root
    repo = _repo(factory_root)
    if not repo.head.is_valid():
        raise BenchInputError(str(factory_root), None, "the factory repository has no commit yet")
    top = Path(repo.working_tree_dir).resolve()
    agent_path = (factory_root / "agents" / f"{config.agent.name}.yaml").resolve()
    rel = agent_path.relative_to(top).as_posix()
    try:
        blob = repo.head.commit.tree / rel
    except KeyError:
        raise BenchInputError(
            rel,
            None,
            f"configuration '{config_id}' uses agent '{config.agent.name}', which has no "
            "committed agent file to promote into",
        ) from None
    old_text = blob.data_stream.read().decode("utf-8")
    old = yaml.safe_load(old_text) or {}
    fields = promotion_fields(config, factory_root)
    changes = {k: v for k, v in fields.items() if old.get(k, [] if k == "skills" else None) != v}
    if not changes:
        raise BenchInputError(
            rel,
            None,
            f"already has the model, effort and skills of '{config_id}'; nothing to promote",
        )
    notes = []
    for skill in config.agent.skills:
        try:
            current = (
                repo.head.commit.tree
                / (factory_root / skill.path).resolve().relative_to(top).as_posix()
            ).data_stream.read()
        except (KeyError, ValueError):
            notes.append(f"{skill.path} is not committed in the factory; commit it with the branch")
            continue
        if hashlib.sha256(current.decode("utf-8", "replace").encode()).hexdigest() != skill.sha256:
            notes.append(
                f"{skill.path} changed since the run; the run used sha256 {skill.sha256[:12]}"
            )
    other = [k for k, _ in config.overrides if k not in ("agent", "model", "effort", "skills")]
    if other:
        notes.append(f"not promoted (set them by hand if wanted): {', '.join(other)}")
    new_text = update_agent_yaml(old_text, changes)
    message = commit_message(
        run, config, rel, changes, old, row, tag=tag, tag_row=tag_row, notes=notes
    )
    branch = branch_name(config_id, run.run_id)
    if repo.git.check_ref_format("--branch", branch, with_exceptions=False) == "":
        raise BenchInputError(None, "CONFIG", f"'{branch}' is not a valid branch name")
    if f"refs/heads/{branch}" in {h.path for h in repo.heads}:
        raise BenchInputError(
            None, "branch", f"'{branch}' already exists; delete it (git branch -D) to promote again"
        )
    commit = commit_file_on_new_branch(repo, branch, rel, new_text, blob.mode, message)
    result = Promotion(branch, commit, rel, changes, message, notes=notes)

    remote = github_remote(repo)
    token = environ.get("GITHUB_TOKEN")
    if remote is None:
        result.notes.append("no GitHub remote: no pull request opened")
        return result
    if not token:
        result.notes.append("GITHUB_TOKEN is not set: no pull request opened")
        return result
    remote_name, owner, name = remote
    repo.git.push(remote_name, f"refs/heads/{branch}:refs/heads/{branch}")
    base = "main" if repo.head.is_detached else repo.active_branch.name
    title, _, body = message.partition("\n")
    result.pull_request = open_pull_request(
        environ.get("GITHUB_API_URL") or "https://api.github.com",
        owner,
        name,
        token,
        branch,
        base,
        title,
        body.strip(),
    )
    return result
