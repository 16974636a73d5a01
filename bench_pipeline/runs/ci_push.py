"""Commit a trial's final workspace and push it to `bench/<run>/<trial>` of the CI remote.

Workspaces have no remote (`workspace.repo`), so the push names the remote by URL or path:
``git push <remote> +HEAD:refs/heads/bench/<run>/<task>/<config>/<rep>``. Only branches under
``bench/`` are ever pushed; the remote's default branch (and anything else) is refused before
git runs. The push is forced because the branch belongs to this one trial: a retried trial
replaces its earlier push.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from bench_pipeline.formats.model import CISettings
from bench_pipeline.workspace.repo import commit_all, workspace_git_argv

if TYPE_CHECKING:
    from bench_pipeline.runs.benchmark_run import BenchmarkRun
    from bench_pipeline.trials.runner import TrialSpec

BRANCH_PREFIX = "bench/"
PUSH_TIMEOUT_SECONDS = 300
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


class CIPushError(RuntimeError):
    """The trial's commit could not be pushed (or the branch was refused)."""


def _component(part: str) -> str:
    """One safe ref component: no spaces/specials, no leading dot, no `.lock` suffix."""
    clean = _UNSAFE.sub("-", part).strip("-.") or "x"
    return clean[:-5] + "-lock" if clean.endswith(".lock") else clean


def trial_branch(run_id: str, trial_id: str) -> str:
    """`bench/<run_id>/<task>/<config>/<rep>` (the trial id is `<task>/<config>/<rep>`)."""
    return BRANCH_PREFIX + "/".join(_component(p) for p in [run_id, *trial_id.split("/")])


def check_branch(branch: str, default_branch: str = "main") -> str:
    """Refuse any branch that is not under `bench/`, or that is the remote's default branch."""
    name = branch.removeprefix("refs/heads/")
    if not name.startswith(BRANCH_PREFIX) or name == BRANCH_PREFIX:
        raise CIPushError(f"refusing to push '{name}': trial commits go only to bench/** branches")
    if name in (default_branch, default_branch.removeprefix("refs/heads/")):
        raise CIPushError(f"refusing to push to the default branch '{name}'")
    if ".." in name or "//" in name or name.endswith("/") or name.endswith(".lock"):
        raise CIPushError(f"refusing to push '{name}': not a valid branch name")
    return name


def resolve_remote(remote: str, base: Path) -> str:
    """A URL or scp-style remote as is; a local path relative to `base` made absolute."""
    if "://" in remote or re.match(r"^[\w.-]+@[\w.-]+:", remote):
        return remote
    path = Path(remote).expanduser()
    return str(path if path.is_absolute() else (base / path).absolute())


def display_remote(remote: str) -> str:
    """The remote without any credentials in its URL (what evidence may keep)."""
    if "://" not in remote:
        return remote
    parts = urlsplit(remote)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def push_commit(workspace: Path, remote: str, branch: str, default_branch: str = "main") -> None:
    """Push the workspace's HEAD to `refs/heads/<branch>` of `remote` (never a default branch)."""
    name = check_branch(branch, default_branch)
    # (the user's own config stays: it holds the credentials of the remote)
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C", "GIT_CONFIG_NOSYSTEM": "1"}
    push = ["push", "--quiet", "--no-verify", remote, f"+HEAD:refs/heads/{name}"]
    try:
        proc = subprocess.run(
            # (the harness's git folder: the workspace's own config is the agent's, and a
            # credential helper or an `insteadOf` there would run or redirect the push)
            workspace_git_argv(workspace, push),
            cwd=str(workspace),
            capture_output=True,
            text=True,
            env=env,
            timeout=PUSH_TIMEOUT_SECONDS,
        )
    except subprocess.TimeoutExpired as exc:
        raise CIPushError(f"git push to {display_remote(remote)} timed out") from exc
    if proc.returncode != 0:
        err = (proc.stderr or proc.stdout).strip().replace(remote, display_remote(remote))
        raise CIPushError(f"git push to {display_remote(remote)} failed: {err}")


def push_trial(
    workspace: Path, ci: CISettings, remote: str, run_id: str, trial_id: str
) -> dict[str, Any]:
    """Commit the trial's final state and push it; returns what the trial's evidence keeps."""
    branch = check_branch(trial_branch(run_id, trial_id), ci.default_branch)
    sha = commit_all(workspace, f"bench {run_id}: trial {trial_id}\n\nFinal state of the trial.")
    push_commit(workspace, remote, branch, ci.default_branch)
    return {
        "pushed": True,
        "sha": sha,
        "branch": branch,
        "remote": display_remote(remote),
        "repo": ci.repo,
        "pushed_at": datetime.now(UTC).isoformat(),
        "timeout_seconds": ci.timeout_seconds,
    }


def ci_finalizer(run: BenchmarkRun) -> Callable[[Path, TrialSpec], dict[str, Any]] | None:
    """The `TrialContext.finalize_workspace` hook of a run whose launch has a `ci:` block.

    A relative local `ci.remote` is resolved against the launch file's folder. A push failure
    raises: the runner records it under `finalize.error` and the `ci` scorer reports the trial
    as not scored with that reason.
    """
    ci = run.launch.ci
    if ci is None:
        return None
    remote = resolve_remote(ci.remote, Path(run.launch_path).parent)
    run_id = run.run_id

    def finalize(workspace: Path, spec: TrialSpec) -> dict[str, Any]:
        if spec.task.is_text:
            return {}
        return {"ci": push_trial(workspace, ci, remote, run_id, spec.trial_id)}

    return finalize
