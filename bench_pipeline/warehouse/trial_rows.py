"""Each finished trial's rows into the warehouse: at once and alone, or held briefly and written
with the partition's other quick trials in one file.

A trial normally gets its own files (`layout.trial_part`), written the moment it ends, so a
crash loses nothing that finished. A trial that took well under a second (a text case, a
scripted agent on a small repository) is cheaper than its own files: one Parquet write costs
~2-3 ms, and every later step reads one file per trial (the partition's done trials, its rows
to score and to show), so on 200 text cases the files, not the cases, were most of the time,
and on the demo's repository trials (~0.1 s each) writing and reading them took ~0.5 s of a
6 s run. Such rows are held and written together
(`layout.trial_batch`) when the partition's last trial ends, when a trial of the partition is
written alone, when `HOLD_SECONDS` have passed since the oldest one ended (a timer), when
`MAX_HELD` are held, and when the pool stops — so a kill -9 loses at most the quick trials that
ended in the last `HOLD_SECONDS`, which `--resume` runs again: nothing is lost for good and
nothing is written twice (their rows were never written).

Within one write the test and check rows go first and the trial rows last, so a trial that
counts as done has its rows. A trial run again (resumed after a cancel or an infrastructure
failure) first loses its earlier rows (`forget_trials`): alone they would be replaced by name,
but a batch file is shared, and rows left there would count twice.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import Warehouse

if TYPE_CHECKING:
    from bench_pipeline.trials.runner import TrialSpec

log = logging.getLogger(__name__)

# A trial quicker than this is held for a batch; a slower one costs more than its files.
QUICK_SECONDS = 1.0
# At most this long between a held case's end and its rows on disk (what a kill -9 can lose).
HOLD_SECONDS = 0.5
MAX_HELD = 1000
# The tables of a trial's own rows, in write order: the trial row last.
TRIAL_TABLES = ("test_results", "check_results", "trials")

Partition = tuple[str, int]


class TrialRowWriter:
    """Writes finished trials' rows of one run; thread-safe (the trial pool's workers call
    `add`, a timer flushes held rows)."""

    def __init__(
        self,
        warehouse: Warehouse,
        run_id: str,
        *,
        hold_seconds: float = HOLD_SECONDS,
        max_held: int = MAX_HELD,
    ):
        self.warehouse, self.run_id = warehouse, run_id
        self.hold_seconds, self.max_held = hold_seconds, max_held
        # One lock for the buffers and the writes: a partition's flush returns only once every
        # held row of it is on disk, even those a timer flush is writing at that moment.
        self._lock = threading.RLock()
        self._held: dict[Partition, list[tuple[dict[str, Any], list, list]]] = {}
        # Each held batch's file name, fixed when its first row is held: a write retried after
        # a failure (a full disk) replaces its own partial files rather than adding copies.
        self._names: dict[Partition, str] = {}
        self._timer: threading.Timer | None = None

    def add(
        self,
        row: dict[str, Any],
        checks: list[dict[str, Any]],
        tests: list[dict[str, Any]],
        *,
        quick: bool,
    ) -> None:
        """One finished trial: held when `quick` (see `is_quick`), else written at once alone
        (after the partition's held rows)."""
        key = (row["config_id"], int(row["repetition"]))
        with self._lock:
            if not quick:
                self.flush(key)
                self._write_alone(row, checks, tests)
                return
            held = self._held.setdefault(key, [])
            if not held:
                self._names[key] = f"{row['task_id']}-{uuid.uuid4().hex[:8]}"
            held.append((row, checks, tests))
            if len(held) >= self.max_held:
                self.flush(key)
            elif self._timer is None:
                self._timer = threading.Timer(self.hold_seconds, self._on_timer)
                self._timer.daemon = True
                self._timer.start()

    def flush(self, partition: Partition | None = None) -> None:
        """Write the held rows of `partition` (of every partition when None). A failed write
        raises and keeps the rows held, so the next flush (at the latest the partition's end,
        in the trial pool, which then fails the run) tries them again."""
        with self._lock:
            keys = list(self._held) if partition is None else [partition]
            for key in keys:
                held = self._held.get(key)
                if held:
                    self._write_batch(key, held)
                self._held.pop(key, None)
                self._names.pop(key, None)
            if not self._held and self._timer is not None:
                self._timer.cancel()
                self._timer = None

    def close(self) -> None:
        """Write everything still held (the pool stopped, normally or not)."""
        self.flush()

    def _on_timer(self) -> None:
        with self._lock:
            self._timer = None
            try:
                self.flush()
            except Exception:  # kept held; raised again by the partition's own flush
                log.warning("could not write held trial rows yet", exc_info=True)

    def _write_alone(
        self, row: dict[str, Any], checks: list[dict[str, Any]], tests: list[dict[str, Any]]
    ) -> None:
        part = layout.trial_part(row["config_id"], row["repetition"], row["task_id"])
        if tests:
            self.warehouse.write("test_results", tests, self.run_id, part)
        if checks:  # a text case has none: no empty file per case
            self.warehouse.write("check_results", checks, self.run_id, part)
        self.warehouse.write("trials", [row], self.run_id, part)

    def _write_batch(self, key: Partition, held: list[tuple[dict[str, Any], list, list]]) -> None:
        if len(held) == 1:  # one row: the trial's own file, as if never held
            self._write_alone(*held[0])
            return
        part = layout.trial_batch(*key, self._names[key])
        tests = [t for _, _, ts in held for t in ts]
        checks = [c for _, cs, _ in held for c in cs]
        if tests:
            self.warehouse.write("test_results", tests, self.run_id, part)
        if checks:
            self.warehouse.write("check_results", checks, self.run_id, part)
        self.warehouse.write("trials", [r for r, _, _ in held], self.run_id, part)


def is_quick(duration_seconds: float | None) -> bool:
    """Whether a trial's rows may wait for a batch: it ended within `QUICK_SECONDS` (rerunning
    what a kill -9 lost costs less than a second per trial; a slower trial, or one of unknown
    length, is worth its own files at once)."""
    return duration_seconds is not None and duration_seconds < QUICK_SECONDS


def forget_trials(
    warehouse: Warehouse,
    run_id: str,
    partitions: Iterable[Partition],
    trials: Iterable[TrialSpec],
) -> int:
    """Remove every row (trial, check, test) of `trials` from the run's files in
    `partitions`, before those trials run again. Returns how many files changed. Cheap when
    there is nothing to remove: a run's first execution lists folders that do not exist yet."""
    by_partition: dict[Partition, dict[str, str]] = {}
    for spec in trials:
        key = (spec.config.id, int(spec.repetition))
        by_partition.setdefault(key, {})[spec.trial_id] = spec.task.id
    changed = 0
    for key in partitions:
        ids = by_partition.get(key)
        if not ids:
            continue
        under = layout.partition_dir(*key)
        for table in TRIAL_TABLES:
            folder = warehouse.folder(table, run_id, under)
            if not folder.is_dir():  # nothing written there yet (a run's first execution)
                continue
            batches = folder / layout.BATCHES
            own = {
                warehouse.part_path(table, run_id, layout.trial_part(*key, t)) for t in ids.values()
            }
            for path in warehouse.files(table, run_id, under):
                if path.parent == batches:
                    changed += warehouse.drop_rows(path, table, "trial_id", set(ids))
                elif path in own:
                    path.unlink(missing_ok=True)
                    changed += 1
    return changed
