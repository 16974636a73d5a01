"""Where a task's code repository lives locally, and commit resolution.

A `repo` may be a local path or a URL; URLs are mirrored once into a cache so that every
trial workspace can share its objects.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import threading
from pathlib import Path

_mirror_lock = threading.Lock()


def cache_root() -> Path:
    return Path(os.environ.get("BENCH_HOME", Path.cwd() / ".bench")).absolute() / "repos"


def is_url(repo: str) -> bool:
    return "://" in repo or repo.startswith("git@")


# Never prompt, parse messages in one language, and commit as `bench` when a commit is made.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench",
    "GIT_AUTHOR_EMAIL": "bench@localhost",
    "GIT_COMMITTER_NAME": "bench",
    "GIT_COMMITTER_EMAIL": "bench@localhost",
    "GIT_TERMINAL_PROMPT": "0",
    "LC_ALL": "C",
}


def run_git(
    args: list[str],
    cwd: Path | str | None = None,
    input_bytes: bytes | None = None,
    env: dict[str, str] | None = None,
) -> bytes:
    """`git args...` in `cwd`; its stdout as bytes, or GitError with git's own message."""
    proc = subprocess.run(
        ["git", *args],
        cwd=str(cwd) if cwd else None,
        input=input_bytes,
        capture_output=True,
        env={**os.environ, **GIT_ENV, **(env or {})},
    )
    if proc.returncode != 0:
        message = (proc.stderr or proc.stdout).decode(errors="replace").strip()
        out = proc.stdout.decode(errors="replace").strip()
        raise GitError(f"git {' '.join(args)}: {message}", proc.returncode, out)
    return proc.stdout


def git(*args: str, cwd: Path | str | None = None, check: bool = True) -> str:
    """`git args...` as stripped text; with `check=False` a failure gives its output."""
    try:
        return run_git(list(args), cwd).decode(errors="replace").strip()
    except GitError as exc:
        if check:
            raise
        return exc.stdout


class GitError(RuntimeError):
    def __init__(self, message: str, returncode: int = 1, stdout: str = ""):
        super().__init__(message)
        self.returncode = returncode
        self.stdout = stdout


def local_repo(repo: str) -> Path:
    """A local git directory for `repo`: the path itself, or a bare mirror of the URL."""
    if not is_url(repo):
        return Path(repo)
    mirror = cache_root() / hashlib.sha256(repo.encode()).hexdigest()[:16]
    with _mirror_lock:
        if not mirror.exists():
            mirror.parent.mkdir(parents=True, exist_ok=True)
            tmp = mirror.with_suffix(".tmp")
            git("clone", "--mirror", "--quiet", repo, str(tmp))
            tmp.rename(mirror)
    return mirror


def git_dir(repo_path: Path) -> Path:
    """The object-holding git directory of a work tree or bare repository."""
    return Path(git("rev-parse", "--absolute-git-dir", cwd=repo_path))


def rev_parse(repo_path: str, ref: str) -> str | None:
    out = subprocess.run(
        ["git", "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"],
        cwd=repo_path,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip() if out.returncode == 0 else None


def is_git_repo(path: Path) -> bool:
    if not path.is_dir():
        return False
    out = subprocess.run(
        ["git", "rev-parse", "--git-dir"], cwd=path, capture_output=True, text=True
    )
    return out.returncode == 0
