"""The task set frozen at launch: the exact tasks, their inputs' hashes and one revision hash.

A benchmark run is tied to the revision it ran; when anything in a task changes (prompt,
checks, base commit, a grader file, a reference patch) the revision changes, and results of
the older revision are marked stale instead of being mixed with current ones.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, overload

from bench_pipeline.formats.model import Task, content_hash
from bench_pipeline.formats.serialize import collector_paused, from_jsonable


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


class StoredTasks(Sequence[Task]):
    """A frozen run's tasks, kept in a file of their own and read when first used: what only
    counts them (an analysis, `bench results`, a launch's trial count) reads none (a manifest
    of 25,000 tasks parsed and rebuilt was 0.14 s and ~40 MiB of an analysis's peak). Equal
    to the tuple of the same tasks; pickled as that tuple."""

    def __init__(self, count: int, read: Callable[[], Any], where: str) -> None:
        self._count = count
        self._read = read  # the tasks as `to_jsonable` left them
        self._where = where  # the file, for the error when it does not hold them
        self._tasks: tuple[Task, ...] | None = None
        self._lock = threading.Lock()

    @property
    def loaded(self) -> bool:
        return self._tasks is not None

    def _all(self) -> tuple[Task, ...]:
        if self._tasks is None:
            with self._lock:
                if self._tasks is None:
                    self._tasks = self._load()
        return self._tasks

    def _load(self) -> tuple[Task, ...]:
        try:
            data = self._read()
        except (OSError, ValueError) as exc:
            raise LookupError(
                f"{self._where}: the run's frozen tasks cannot be read ({exc})"
            ) from exc
        if not isinstance(data, list) or len(data) != self._count:
            held = len(data) if isinstance(data, list) else type(data).__name__
            raise LookupError(
                f"{self._where}: holds {held} tasks, the run's manifest {self._count}"
            )
        with collector_paused():
            return from_jsonable(tuple[Task, ...], data)

    def __len__(self) -> int:
        return self._count

    @overload
    def __getitem__(self, index: int) -> Task: ...
    @overload
    def __getitem__(self, index: slice) -> tuple[Task, ...]: ...
    def __getitem__(self, index: int | slice) -> Task | tuple[Task, ...]:
        return self._all()[index]

    def __iter__(self) -> Iterator[Task]:
        return iter(self._all())

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(other) == self._count and tuple(other) == self._all()

    def __hash__(self) -> int:
        return hash(self._all())

    def __reduce__(self) -> tuple[Any, ...]:
        return (tuple, (self._all(),))

    def __repr__(self) -> str:
        state = "read" if self.loaded else "not read yet"
        return f"StoredTasks({self._count} tasks in {self._where}, {state})"


def _task_dict(task: Task) -> dict[str, Any]:
    d = asdict(task)
    d.pop("source_file", None)
    return d


def freeze(suite: str, suite_dir: Path, tasks: tuple[Task, ...]) -> FrozenTaskSet:
    hashes = {t.id: {rel: file_sha256(suite_dir / rel) for rel in t.input_files} for t in tasks}
    revision = content_hash({"tasks": [_task_dict(t) for t in tasks], "inputs": hashes}, 12)
    return FrozenTaskSet(suite, revision, tuple(tasks), hashes)
