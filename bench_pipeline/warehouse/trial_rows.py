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

When a partition's last trial ends, its files of each table are joined into one batch file
(`join_partition`): a file per trial is what a crash must not lose while the trials run, but
once they have all ended every later read pays for each file (~1.6 ms: a first analysis of a
2,400-trial run written a file per trial took 4.4 s, of one written a file per partition
0.5 s). The joined file replaces the partition's folder in one step, so a reader sees every
row exactly once, before and after, and a kill -9 at any point loses and duplicates nothing.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench_pipeline.formats.files import exchange
from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import Warehouse, table_schema

if TYPE_CHECKING:
    import pyarrow as pa

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


def join_partition(warehouse: Warehouse, run_id: str, partition: Partition) -> int:
    """Join each trial table's files of one partition whose trials have all ended into one
    batch file (`layout.trial_batch`, as quick trials' are: `forget_trials` drops a trial's
    rows from it when the trial runs again). Returns how many tables were joined.

    The joined file is written into a new folder under `layout.JOINING`, which then takes the
    partition folder's place in one `exchange` (the old folder goes where the new one was, and
    is removed): a reader lists either the old files or the new one, and one that listed the
    old files just before reads them again (`store.VanishedFileError`). A kill -9 leaves the
    partition folder whole, old or new, and a folder under `layout.JOINING` that nothing reads
    (removed by a later join). Joining is an optimisation: where it cannot be done (a system
    without the exchange, an unreadable file, a full disk) the files stay as they are."""
    under = layout.partition_dir(*partition)
    try:
        _remove_stale_joins(warehouse)
    except OSError as exc:  # (another user's folder, an I/O error: the join goes on regardless)
        log.warning("stale joins under %s left in place (%s)", layout.JOINING, exc)
    joined = 0
    for table in TRIAL_TABLES:
        try:
            joined += _join(warehouse, run_id, table, under)
        except Exception as exc:  # (an optimisation: whatever stops it leaves the files be)
            log.warning("%s files of %s/%s left unjoined (%s)", table, run_id, under, exc)
    return joined


# A folder under layout.JOINING older than this is a killed join's: removed by the next join.
STALE_JOIN_SECONDS = 3600.0


def _join(warehouse: Warehouse, run_id: str, table: str, under: str) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = warehouse.folder(table, run_id, under)
    files = warehouse.files(table, run_id, under)
    if len(files) < 2 or not _only_rows(folder):
        return 0
    schema = table_schema(table)
    rows = pa.concat_tables([_read_as(f, schema) for f in files])
    staging = warehouse.root / layout.JOINING / uuid.uuid4().hex
    fresh = staging / "partition"
    name = f"joined-{uuid.uuid4().hex[:8]}.parquet"
    try:
        (fresh / layout.BATCHES).mkdir(parents=True)
        with open(fresh / layout.BATCHES / name, "wb") as sink:
            pq.write_table(rows, sink)
            sink.flush()
            os.fsync(sink.fileno())  # (on disk before the old files go)
        if warehouse.files(table, run_id, under) != files or not exchange(fresh, folder):
            return 0  # (written to meanwhile, or no exchange here: left as it was)
        # A file that reached the old folder after it was listed goes back beside the joined
        # one (nothing writes a finished partition: this is a guard, not a path).
        listed = set(files)
        for path in _parquet_under(fresh):  # (`fresh` holds the old folder now)
            home = folder / path.relative_to(fresh)
            if home not in listed:
                home.parent.mkdir(parents=True, exist_ok=True)
                os.replace(path, home)
        return 1
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _read_as(path: Path, schema: pa.Schema) -> pa.Table:
    """One file's rows as Warehouse.read takes them (against the table's schema). A file
    written with that schema, as every file of this version is, is read as it is: ~1 ms, where
    a read against a schema (the dataset reader, which also fills a column an older file
    lacks) costs ~3 ms, and a partition of slow trials has a file per trial and table."""
    import pyarrow.parquet as pq

    rows = pq.ParquetFile(path, pre_buffer=False).read(use_threads=False)
    if rows.schema.equals(schema, check_metadata=False):
        return rows.replace_schema_metadata(schema.metadata)
    return pq.read_table(path, schema=schema)


def _only_rows(folder: Path) -> bool:
    """Whether `folder` holds nothing but Parquet files and a batches folder of them: nothing
    the join would drop but the temp file of a write a kill -9 cut short (`replacing`'s
    `.<name>.<uuid>.tmp`: the partition's trials have all ended and their rows are flushed, so
    no write of it is in progress)."""
    for entry in os.scandir(folder):
        if entry.is_dir(follow_symlinks=False):
            if entry.name != layout.BATCHES or not _only_rows(Path(entry.path)):
                return False
        elif entry.name.startswith(".") and entry.name.endswith(".tmp"):
            continue
        elif not entry.name.endswith(".parquet") or not entry.is_file(follow_symlinks=False):
            return False
    return True


def _parquet_under(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.parquet") if p.is_file())


def _remove_stale_joins(warehouse: Warehouse) -> None:
    root = warehouse.root / layout.JOINING
    if not root.is_dir():
        return
    now = time.time()
    for entry in os.scandir(root):
        try:
            if now - entry.stat(follow_symlinks=False).st_mtime > STALE_JOIN_SECONDS:
                shutil.rmtree(entry.path, ignore_errors=True)
        except FileNotFoundError:  # (another join removed it)
            continue
