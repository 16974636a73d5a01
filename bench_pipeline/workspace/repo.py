"""Fresh per-trial git workspaces that share objects with the source repository.

A workspace is a new repository (`git init`) whose object store borrows the source's through
`objects/info/alternates`: nothing is copied, no remote is configured, and the only ref is a
`bench` branch at the pinned base commit. The source checkout and its uncommitted files are
never touched. (`git worktree` races on parallel add/remove; a shared clone would carry every
branch and a remote pointing back at the source.)
"""

from __future__ import annotations

import os
import queue
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

from bench_pipeline.formats.git import GitError, git_dir, local_repo, run_git

_objects_dirs: dict[str, Path] = {}
# What `git init` writes for a trial repository, per filesystem (st_dev): its folders and its
# files (relative path, bytes, mode), as git itself wrote them there once.
_skeletons: dict[int, tuple[list[str], list[tuple[str, bytes, int]]]] = {}
_skeleton_lock = threading.Lock()
INIT_ARGS = ("init", "--quiet", "--template=", "--initial-branch=bench")


class WorkspaceError(RuntimeError):
    """The workspace could not be made or read: infrastructure, not the agent's failure."""


def _git(args: list[str], cwd: Path, input_bytes: bytes | None = None) -> bytes:
    try:
        return run_git(args, cwd, input_bytes)
    except GitError as exc:
        raise WorkspaceError(str(exc)) from None


def objects_dir(repo: str) -> Path:
    if repo not in _objects_dirs:
        _objects_dirs[repo] = git_dir(local_repo(repo)) / "objects"
    return _objects_dirs[repo]


def create_workspace(repo: str, sha: str, dest: Path) -> Path:
    """Make `dest` a checkout of `sha` on branch `bench`, borrowing the source's objects."""
    if dest.exists():
        shutil.rmtree(dest)
    for _ in range(3):  # a finishing trial may prune the shared parents between the two mkdirs
        try:
            dest.mkdir(parents=True)
            break
        except FileNotFoundError:
            continue
    try:
        _init(dest)
        (dest / ".git" / "objects" / "info" / "alternates").write_text(f"{objects_dir(repo)}\n")
        _git(["reset", "--quiet", "--hard", sha], dest)
    except (WorkspaceError, OSError) as exc:
        raise WorkspaceError(f"cannot create workspace at {sha[:10]}: {exc}") from exc
    return dest


def _init(dest: Path) -> None:
    """`git init` of `dest` (an empty folder), without running git each time: the first trial
    on a filesystem runs it (in a scratch folder next to `dest`, so git probes the same
    filesystem), and every trial after writes the same folders and files (a process less per
    trial, ~3-5 ms of a cheap one)."""
    # No template: its sample hooks and info files are ~20 files to write and remove per trial,
    # and a user's init.templateDir hooks have no place in a trial's repository (an agent's
    # `git commit` would run them).
    device = os.stat(dest).st_dev
    with _skeleton_lock:
        if device not in _skeletons:
            scratch = Path(tempfile.mkdtemp(prefix=".git-init-", dir=dest.parent))
            try:
                _git([*INIT_ARGS, str(scratch)], scratch)
                _skeletons[device] = _read_tree(scratch / ".git")
            finally:
                shutil.rmtree(scratch, ignore_errors=True)
    folders, files = _skeletons[device]
    git = dest / ".git"
    git.mkdir()
    for folder in folders:
        (git / folder).mkdir()
    for rel, data, mode in files:
        fd = os.open(git / rel, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)


def _read_tree(root: Path) -> tuple[list[str], list[tuple[str, bytes, int]]]:
    """Every folder (parents first) and file (bytes, permission bits) under `root`."""
    folders: list[str] = []
    files: list[tuple[str, bytes, int]] = []
    for here, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(here, root)
        prefix = "" if rel == "." else f"{rel}/"
        dirnames.sort()
        folders += [prefix + d for d in dirnames]
        for name in sorted(filenames):
            path = Path(here) / name
            files.append((prefix + name, path.read_bytes(), path.stat().st_mode & 0o777))
    return folders, files


def apply_patch(workspace: Path, patch: str) -> None:
    """Apply a unified diff (from the workspace root); raises WorkspaceError if it does not apply."""
    if not patch.strip():
        return
    _git(["apply", "--whitespace=nowarn", "-"], workspace, patch.encode())


def diff_against(workspace: Path, sha: str) -> str:
    """Everything the agent changed since `sha`, new files included, as a binary-safe patch."""
    _git(["add", "--all", "--force", "."], workspace)
    out = _git(["diff", "--cached", "--binary", "--no-color", "--no-ext-diff", sha], workspace)
    return out.decode("utf-8", errors="replace")


def commit_all(workspace: Path, message: str) -> str:
    """Commit the workspace's state (for CI pushes); returns the new commit sha."""
    _git(["add", "--all", "--force", "."], workspace)
    _git(["commit", "--quiet", "--allow-empty", "--no-verify", "-m", message], workspace)
    return _git(["rev-parse", "HEAD"], workspace).decode().strip()


def remove_workspace(path: Path, up_to: Path | None = None) -> None:
    """Remove a trial's workspace folder, and its parents up to `up_to` that it left empty
    (work/<run>/<task>/<config>/ would otherwise stay behind after every run)."""
    shutil.rmtree(path, ignore_errors=True)
    if up_to is None:
        return
    up_to = up_to.absolute()
    parent = path.absolute().parent
    while parent != up_to and up_to in parent.parents:
        try:
            parent.rmdir()  # only when empty: another trial of the same run may still be there
        except OSError:
            return
        parent = parent.parent


class BackgroundRemoval:
    """Removes finished trials' folders in one background thread, so a trial's slot takes the
    next trial the moment its result is written; `close` returns once every folder handed over
    is gone.

    Removing a folder that a sandbox had mounted waits in the kernel until the sandbox's mount
    namespace is torn down: measured on the demo at 2 jobs, single `rmdir` calls of up to
    0.74 s (0.3 ms of it CPU), 1.6-2.5 s of the trials' time in a 9 s run. Waiting here instead
    costs no trial anything."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        # The worker and its own queue, made together: a folder handed over while `close` runs
        # goes to a new worker, never to one that already took its stop.
        self._worker: tuple[threading.Thread, queue.SimpleQueue[Any]] | None = None

    def remove(self, path: Path, up_to: Path | None = None) -> None:
        """`remove_workspace(path, up_to)`, soon, in the background."""
        with self._lock:
            if self._worker is None:
                work: queue.SimpleQueue[Any] = queue.SimpleQueue()
                thread = threading.Thread(
                    target=self._work, args=(work,), name="bench-removal", daemon=True
                )
                thread.start()
                self._worker = (thread, work)
            self._worker[1].put((path, up_to))

    @staticmethod
    def _work(work: queue.SimpleQueue[Any]) -> None:
        while (item := work.get()) is not None:
            remove_workspace(*item)

    def close(self) -> None:
        """Wait until every folder handed over so far is removed."""
        with self._lock:
            worker, self._worker = self._worker, None
        if worker is not None:
            worker[1].put(None)
            worker[0].join()

    def __enter__(self) -> BackgroundRemoval:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
