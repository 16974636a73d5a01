"""Fresh per-trial git workspaces that share objects with the source repository.

A workspace is a new repository (`git init`) whose object store borrows the source's through
`objects/info/alternates`: nothing is copied, no remote is configured, and the only ref is a
`bench` branch at the pinned base commit. The source checkout and its uncommitted files are
never touched. (`git worktree` races on parallel add/remove; a shared clone would carry every
branch and a remote pointing back at the source.)

The workspace's own `.git` is the agent's to use and to change: its config can name commands
(a filter driver, `core.fsmonitor`, a credential helper), and a `.git` file can point at
another repository. So the harness never runs git through it once the agent has had the
workspace: it keeps a copy of the fresh `.git` beside the workspace (`harness_git_dir`, out of
the agent's sandbox) and reads the workspace through that, with no config but its own
(`workspace_git`).
"""

from __future__ import annotations

import hashlib
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


def _git(
    args: list[str],
    cwd: Path,
    input_bytes: bytes | None = None,
    env: dict[str, str] | None = None,
) -> bytes:
    try:
        return run_git(args, cwd, input_bytes, env)
    except GitError as exc:
        raise WorkspaceError(str(exc)) from None


def objects_dir(repo: str) -> Path:
    if repo not in _objects_dirs:
        _objects_dirs[repo] = git_dir(local_repo(repo)) / "objects"
    return _objects_dirs[repo]


# What marks a finished object store of `base_objects` (written last, before the rename).
_COMPLETE = "complete"


def base_objects(repo: str, sha: str, cache: Path) -> Path:
    """An object store of what `sha` reaches in `repo` only (the history up to the base),
    built once per repository and commit under `cache` and shared by every trial of them.

    A workspace that borrows the whole source repository's objects lets its agent read every
    commit after the base: `git cat-file --batch-all-objects` finds the upstream fix and the
    hidden tests' blobs of a task drafted from that fix (`tasks from-commit`). One pack of the
    base's history (`git pack-objects --revs`), built in a folder beside and renamed into
    place, so that two trials building it at once both end with one whole store."""
    source = git_dir(local_repo(repo))
    key = hashlib.sha256(f"{source.resolve()}\0{sha}".encode()).hexdigest()[:24]
    store = cache / key
    if (store / _COMPLETE).is_file():
        return store / "objects"
    cache.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=cache))
    try:
        (scratch / "objects" / "pack").mkdir(parents=True)
        base = scratch / "objects" / "pack" / "pack"
        _git(["pack-objects", "--quiet", "--revs", str(base)], source, f"{sha}\n".encode())
        (scratch / _COMPLETE).write_text(f"{source}\n{sha}\n")
        try:
            os.rename(scratch, store)
        except OSError:  # (another trial's store got there first, or an unfinished one is in
            # the way: a complete one is used as it is, an unfinished one replaced)
            if not (store / _COMPLETE).is_file():
                shutil.rmtree(store, ignore_errors=True)
                os.rename(scratch, store)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return store / "objects"


def create_workspace(repo: str, sha: str, dest: Path, objects_cache: Path | None = None) -> Path:
    """Make `dest` a checkout of `sha` on branch `bench`, borrowing the source's objects: with
    `objects_cache`, only those of the base's history (`base_objects`; a trial's workspace),
    else all of them (the harness's own checkouts, which no agent gets)."""
    if dest.exists():
        shutil.rmtree(dest)
    for _ in range(3):  # a finishing trial may prune the shared parents between the two mkdirs
        try:
            dest.mkdir(parents=True)
            break
        except FileNotFoundError:
            continue
    harness = harness_git_dir(dest)
    try:
        if harness.exists():
            shutil.rmtree(harness)
        _init(dest)
        objects = (
            base_objects(repo, sha, objects_cache)
            if objects_cache is not None
            else objects_dir(repo)
        )
        (dest / ".git" / "objects" / "info" / "alternates").write_text(f"{objects}\n")
        _git(["reset", "--quiet", "--hard", sha], dest)
        # (its index too: the files' stat data, so that reading the workspace later hashes
        # only what changed)
        shutil.copytree(dest / ".git", harness, symlinks=True)
        (harness / "info").mkdir(exist_ok=True)
        (harness / "info" / "attributes").write_text(HARNESS_ATTRIBUTES)
    except (WorkspaceError, OSError) as exc:
        raise WorkspaceError(f"cannot create workspace at {sha[:10]}: {exc}") from exc
    return dest


def harness_git_dir(workspace: Path) -> Path:
    """The harness's own git folder for `workspace`: a copy of its `.git` as created, beside
    it (the agent's sandbox mounts the workspace, not its parent)."""
    return workspace.parent / f".{workspace.name}.harness-git"


# Over every .gitattributes of the workspace (the agent's): files are read as their bytes. A
# `working-tree-encoding=UTF-16` there made `git add` fail, which read as the harness's fault
# (an unscored workspace error); a filter or ident would change what is recorded.
HARNESS_ATTRIBUTES = "* -text -filter -ident -working-tree-encoding\n"

# No config but the harness's own: neither the system's nor the user's (a filter or diff
# driver defined there would run on the agent's files), nothing that runs a command.
ISOLATED_GIT_ENV = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull}
ISOLATED_GIT_ARGS = ("-c", "core.fsmonitor=false", "-c", "core.hooksPath=/dev/null")


def workspace_git_argv(workspace: Path, args: list[str]) -> list[str]:
    """`git` argv that reads `workspace` through the harness's own git folder."""
    return [
        "git",
        *ISOLATED_GIT_ARGS,
        f"--git-dir={harness_git_dir(workspace)}",
        f"--work-tree={workspace}",
        *args,
    ]


def workspace_git(workspace: Path, args: list[str], input_bytes: bytes | None = None) -> bytes:
    """`git args` on `workspace` as the agent left it, never through its own `.git`."""
    argv = workspace_git_argv(workspace, args)
    return _git(argv[1:], workspace, input_bytes, env=ISOLATED_GIT_ENV)


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


def add_all(workspace: Path) -> None:
    """Index every file of `workspace` in the harness's git folder, but what lies in a git
    repository of its own inside it (`nested_repositories`): git records one as a link to its
    commit, and indexing it again runs `git status` in it, with that repository's config, which
    the agent wrote (a filter driver there ran on the host); one without a commit fails the add."""
    excluded = [f":(top,exclude,literal){rel}" for rel in nested_repositories(workspace)]
    workspace_git(workspace, ["add", "--all", "--force", "--", ".", *excluded])


def nested_repositories(workspace: Path) -> list[str]:
    """The folders below `workspace` (relative, not itself) that hold a `.git` entry, not
    looked into further; symlinks are not followed."""
    found: list[str] = []
    pending = [(str(workspace), "")]
    while pending:
        path, prefix = pending.pop()
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue
        if prefix and any(e.name == ".git" for e in entries):
            found.append(prefix.rstrip("/"))
            continue
        for entry in entries:
            if entry.name != ".git" and entry.is_dir(follow_symlinks=False):
                pending.append((entry.path, f"{prefix}{entry.name}/"))
    return sorted(found)


def stage_workspace(workspace: Path) -> None:
    """Index `workspace` as it is now in the harness's git folder: the state its graders see,
    which `put_back_staged` restores and `evidence.write_patch(staged=True)` shows."""
    add_all(workspace)


def put_back_staged(workspace: Path) -> list[str]:
    """Make `workspace` again what `stage_workspace` indexed (whatever ran since changed:
    files, symlinks, the executable bit; untracked and ignored files alike); returns the paths
    that differed (empty: nothing to do)."""
    staged = workspace_git(workspace, ["write-tree"]).decode().strip()
    add_all(workspace)
    names = workspace_git(
        workspace, ["diff", "--cached", "--name-only", "--no-renames", "-z", staged]
    )
    changed = [n.decode(errors="replace") for n in names.split(b"\0") if n]
    if changed:
        # (git writes no file through a symlink on the way: a folder the code under test made
        # a link out of the workspace is a link again, then a folder, nothing outside touched)
        workspace_git(workspace, ["read-tree", "-u", "--reset", staged])
    return changed


def commit_all(workspace: Path, message: str) -> str:
    """Commit the workspace's state (for CI pushes) in the harness's git folder; returns the
    new commit sha."""
    add_all(workspace)
    workspace_git(workspace, ["commit", "--quiet", "--allow-empty", "--no-verify", "-m", message])
    return workspace_git(workspace, ["rev-parse", "HEAD"]).decode().strip()


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
