"""Reading factory files safely: confined to the factory, from the work tree or a git ref.

`FactoryView` is the only way the loader touches factory files, so the path rules (no `..`
escape, no absolute paths, no symlink out of the factory) hold everywhere, and a
`factory_ref` configuration can read its agent and skills as they were at a commit.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from bench_pipeline.formats.errors import BenchInputError
from bench_pipeline.formats.git import GitError, git, is_git_repo, is_url, local_repo, rev_parse
from bench_pipeline.formats.model import FrozenText

if TYPE_CHECKING:
    pass


class FactoryView:
    """The factory's working tree."""

    def __init__(self, root: Path):
        self.root = normalized(root)
        self._real_root = self.root.resolve()

    def display(self, path: Path) -> str:
        try:
            return str(path.absolute().relative_to(self.root))
        except ValueError:
            return str(path)

    def exists(self, path: Path) -> bool:
        try:
            return stat.S_ISREG(os.stat(path).st_mode)
        except (OSError, ValueError):  # (a name too long, a loop: `not_a_file` says which)
            return False

    def not_a_file(self, path: Path) -> str | None:
        """What is at `path` instead of a regular file, as the rest of a message ('is a
        folder, not a file'), or None when nothing is there (or a regular file is)."""
        try:
            mode = os.stat(path).st_mode
        except FileNotFoundError:
            return "is a symlink to a missing file" if os.path.islink(path) else None
        except NotADirectoryError:
            return None
        except ValueError:  # (a NUL in the name)
            return "is not a valid file name"
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return "is a symlink loop"
            return f"cannot be read: {exc.strerror}"
        return _not_regular(mode)

    def read_bytes(self, path: Path) -> bytes:
        # Opened without blocking and checked before reading: a FIFO would hang `validate`
        # forever, a device (a symlink to /dev/zero) never end.
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError:
            problem = self.not_a_file(path)
            if problem is None:
                raise
            raise BenchInputError(self.display(path), None, f"{problem}; {_REPLACE}") from None
        with open(fd, "rb") as handle:
            problem = _not_regular(os.fstat(fd).st_mode)
            if problem is not None:
                raise BenchInputError(self.display(path), None, f"{problem}; {_REPLACE}")
            return handle.read()

    def read_text(self, path: Path, file: str, key: str) -> str:
        try:
            return self.read_bytes(path).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BenchInputError(
                file,
                key,
                f"{self.display(path)} is not UTF-8 (offset {exc.start}); save it as UTF-8",
            ) from None

    def list_yaml(self, directory: Path) -> list[Path]:
        return sorted(directory.glob("*.yaml")) if directory.is_dir() else []

    def agent_names(self) -> list[str]:
        return [p.stem for p in self.list_yaml(self.root / "agents")]

    def suite_names(self) -> list[str]:
        bench = self.root / "benchmarks"
        return sorted(p.parent.name for p in bench.glob("*/suite.yaml")) if bench.is_dir() else []

    def inside(self, base: Path, rel: str, file: str, key: str, must_exist: bool = True) -> Path:
        """Resolve `rel` against `base`; refuse anything that lands outside the factory."""
        if PurePosixPath(rel).is_absolute() or Path(rel).is_absolute():
            raise BenchInputError(
                file,
                key,
                f"'{rel}' is an absolute path; give a path relative to {self.display(base)}",
            )
        candidate = base / rel
        lexical = Path(*_normalize(candidate.absolute().parts))
        if not _within(lexical, self.root):
            raise BenchInputError(
                file, key, f"'{rel}' escapes the factory; keep files inside {self.root.name}/"
            )
        if self._is_symlink_out(candidate):
            raise BenchInputError(
                file, key, f"'{rel}' is a symlink pointing outside the factory; copy the file in"
            )
        if must_exist and not self.exists(lexical):
            problem = self.not_a_file(lexical)
            if problem is not None:
                raise BenchInputError(file, key, f"'{rel}' {problem}; name a regular file")
            raise BenchInputError(
                file, key, f"'{rel}' does not exist (looked in {self.display(base)})"
            )
        return lexical

    def _is_symlink_out(self, candidate: Path) -> bool:
        return candidate.exists() and not _within(candidate.resolve(), self._real_root)

    def frozen_text(self, owner: Path, rel: str, file: str, key: str) -> FrozenText:
        path = self.inside(owner.parent, rel, file, key)
        text = self.read_text(path, file, key)
        return FrozenText(self.display(path), text, hashlib.sha256(text.encode()).hexdigest())


class GitFactoryView(FactoryView):
    """The factory as it was at one commit; files missing there may fall back to the live tree
    where the caller allows it (skills named at the ref but only present live)."""

    def __init__(self, root: Path, sha: str, live: FactoryView):
        super().__init__(root)
        self.sha = sha
        self.live = live

    def _rel(self, path: Path) -> str:
        return path.absolute().relative_to(self.root).as_posix()

    def not_a_file(self, path: Path) -> str | None:
        return None  # (a blob at the ref or nothing: never a folder, FIFO or symlink loop)

    def exists(self, path: Path) -> bool:
        try:
            return git("cat-file", "-t", f"{self.sha}:{self._rel(path)}", cwd=self.root) == "blob"
        except (GitError, ValueError):
            return False

    def read_bytes(self, path: Path) -> bytes:
        import subprocess

        out = subprocess.run(
            ["git", "cat-file", "blob", f"{self.sha}:{self._rel(path)}"],
            cwd=self.root,
            capture_output=True,
        )
        if out.returncode != 0:
            raise FileNotFoundError(str(path))
        return out.stdout

    def list_yaml(self, directory: Path) -> list[Path]:
        listing = git(
            "ls-tree",
            "--name-only",
            f"{self.sha}:{self._rel(directory)}",
            cwd=self.root,
            check=False,
        )
        return sorted(directory / n for n in listing.splitlines() if n.endswith(".yaml"))

    def _is_symlink_out(self, candidate: Path) -> bool:
        return False  # blobs at a ref are read through git, never through the file system

    def frozen_text(self, owner: Path, rel: str, file: str, key: str) -> FrozenText:
        path = self.inside(owner.parent, rel, file, key, must_exist=False)
        if self.exists(path):
            text = self.read_text(path, file, key)
        elif self.live.exists(path):
            text = self.live.read_text(path, file, key)
        else:
            raise BenchInputError(
                file,
                key,
                f"'{rel}' is found neither at ref {self.sha[:10]} nor in the live factory",
            )
        return FrozenText(self.display(path), text, hashlib.sha256(text.encode()).hexdigest())


_REPLACE = "replace it with a regular file"


def normalized(path: Path) -> Path:
    """`path` absolute, its `.` and `..` taken out the way `inside` takes them out of the paths
    it checks: a factory named as `launches/..` or `../factory` must hold the files below it."""
    return Path(*_normalize(path.absolute().parts))


def _not_regular(mode: int) -> str | None:
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    kind = "a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    return f"is {kind}, not a regular file"


def _normalize(parts: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for part in parts:
        if part == "..":
            if len(out) > 1:
                out.pop()
        elif part != ".":
            out.append(part)
    return out


def _within(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def resolve_commit(repo: str, ref: str, file: str) -> str:
    """The commit sha `ref` names in `repo`, or a clear error naming the task file."""
    try:
        path = local_repo(repo)
    except GitError as exc:
        raise BenchInputError(file, "repo", f"cannot fetch {repo}: {exc}") from None
    # One git call per task in the common case: a ref that resolves proves the repository.
    sha = rev_parse(str(path), ref) if path.is_dir() else None
    if sha is None and not is_git_repo(path):
        raise BenchInputError(
            file, "repo", f"{repo} is not a git repository; point repo at a git checkout or URL"
        )
    if sha is None:
        hint = "" if is_url(repo) else f" (see `git -C {path} log --oneline`)"
        raise BenchInputError(
            file, "base_ref", f"'{ref}' does not exist in {repo}; use a branch, tag or commit{hint}"
        )
    return sha
