"""Grader files and reference patches, snapshotted outside every workspace and hashed.

The trial runner copies a task's inputs into the trial folder before the agent starts and
re-checks the hashes after each agent invocation and around grading: a grader an agent
changed invalidates the trial instead of being trusted.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from bench_pipeline.formats.files import replacing
from bench_pipeline.formats.taskset import file_sha256


class InputsChangedError(RuntimeError):
    """A grader file or reference no longer matches the frozen task set: the trial cannot be
    graded as frozen (an infrastructure fault, never the agent's)."""


def snapshot_inputs(suite_dir: Path, files: dict[str, str], dest: Path) -> None:
    """Copy the suite-relative `files` into `dest` (same layout) and verify their hashes."""
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.exists():
            target.chmod(0o644)
        try:
            shutil.copyfile(suite_dir / rel, target)
        except FileNotFoundError:
            continue  # reported below as changed
        _make_readonly(target)
    changed = changed_inputs(dest, files)
    if changed:
        raise InputsChangedError(
            f"factory files changed since the task set was frozen: {', '.join(changed)}"
        )


# Run-store files this process verified: path -> (stat identity, sha256). The store is written
# only by freeze_inputs (temp file + rename, so a rewrite changes the inode), and every trial
# re-hashes its own copy around grading, so skipping a re-hash of an unchanged store file in
# the next partition trades nothing for one full read per input per partition.
_VERIFIED: dict[Path, tuple[tuple[int, int, int, int], str]] = {}
_VERIFIED_LOCK = threading.Lock()


def _stat_id(path: Path) -> tuple[int, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _store_matches(target: Path, expected: str) -> bool:
    ident = _stat_id(target)
    if ident is None:
        return False
    with _VERIFIED_LOCK:
        known = _VERIFIED.get(target)
    if known == (ident, expected):
        return True
    if not target.is_file() or file_sha256(target) != expected:
        return False
    with _VERIFIED_LOCK:
        _VERIFIED[target] = (ident, expected)
    return True


def freeze_inputs(suite_dir: Path, hashes: dict[str, dict[str, str]], store: Path) -> list[str]:
    """Copy every task's input files into `store` once, keeping only copies that match the
    frozen hashes, so trials grade with the files as frozen even if the factory is edited
    during the run. Returns the files that no longer match (left out of the store)."""
    wanted: dict[str, str] = {}
    for files in hashes.values():
        wanted.update(files)
    stale = []
    for rel, expected in wanted.items():
        target = store / rel
        if _store_matches(target, expected):
            continue
        source = suite_dir / rel
        if not source.is_file() or file_sha256(source) != expected:
            stale.append(rel)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with replacing(target) as tmp:
            shutil.copyfile(source, tmp)
        _store_matches(target, expected)
    return stale


def _make_readonly(path: Path) -> None:
    # Read-only is a speed bump for careless agents, not security: the hash check decides.
    path.chmod(0o444)


def changed_inputs(dest: Path, files: dict[str, str]) -> list[str]:
    """Suite-relative files whose snapshot is missing or no longer matches its hash."""
    changed = []
    for rel, expected in files.items():
        path = dest / rel
        if not path.is_file() or file_sha256(path) != expected:
            changed.append(rel)
    return changed
