"""Grader files and reference patches, snapshotted outside every workspace and hashed.

The trial runner copies a task's inputs into the trial folder before the agent starts and
re-checks the hashes after each agent invocation and around grading: a grader an agent
changed invalidates the trial instead of being trusted.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from bench_pipeline.formats.taskset import file_sha256


def snapshot_inputs(suite_dir: Path, files: dict[str, str], dest: Path) -> None:
    """Copy the suite-relative `files` into `dest` (same layout) and verify their hashes."""
    for rel in files:
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(suite_dir / rel, target)
        _make_readonly(target)
    changed = changed_inputs(dest, files)
    if changed:
        raise RuntimeError(
            f"factory files changed since the task set was frozen: {', '.join(changed)}"
        )


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
