"""The task set frozen at launch: the exact tasks, their inputs' hashes and one revision hash.

A benchmark run is tied to the revision it ran; when anything in a task changes (prompt,
checks, base commit, a grader file, a reference patch) the revision changes, and results of
the older revision are marked stale instead of being mixed with current ones.
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench_pipeline.formats.model import Task, content_hash


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 16), b""):
            h.update(block)
    return h.hexdigest()


@dataclass(frozen=True)
class FrozenTaskSet:
    suite: str
    revision: str
    tasks: tuple[Task, ...]
    input_hashes: dict[str, dict[str, str]]  # task id -> suite-relative file -> sha256

    def task(self, task_id: str) -> Task:
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise KeyError(task_id)

    def manifest(self) -> dict[str, Any]:
        return {
            "suite": self.suite,
            "revision": self.revision,
            "tasks": [_task_dict(t) for t in self.tasks],
            "input_hashes": self.input_hashes,
        }


def _task_dict(task: Task) -> dict[str, Any]:
    d = asdict(task)
    d.pop("source_file", None)
    return d


def freeze(suite: str, suite_dir: Path, tasks: tuple[Task, ...]) -> FrozenTaskSet:
    hashes = {t.id: {rel: file_sha256(suite_dir / rel) for rel in t.input_files} for t in tasks}
    revision = content_hash({"tasks": [_task_dict(t) for t in tasks], "inputs": hashes}, 12)
    return FrozenTaskSet(suite, revision, tuple(tasks), hashes)
