"""A partition's files are joined into one per table once its trials have all ended
(warehouse/trial_rows.py `join_partition`): the same rows in the same order, read by every
reader as before; a reader that listed the files just before reads them again; a trial run
again loses its rows from the joined file; and a kill -9 anywhere in a join loses and
duplicates nothing."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import VanishedFileError, Warehouse
from bench_pipeline.warehouse.trial_rows import (
    STALE_JOIN_SECONDS,
    TrialRowWriter,
    forget_trials,
    join_partition,
)

RUN = "r1"
TABLES = ("trials", "check_results", "test_results")


def _row(task: str, rep: int = 1) -> dict:
    return {
        "run_id": RUN,
        "trial_id": f"{task}/bot/{rep}",
        "task_id": task,
        "config_id": "bot",
        "repetition": rep,
        "attempt_no": 1,
        "outcome": "succeeded",
        "duration_seconds": 5.0,
    }


def _check(task: str, rep: int = 1) -> dict:
    return {"run_id": RUN, "trial_id": f"{task}/bot/{rep}", "check_id": "c", "attempt": 1}


def _test(task: str, rep: int = 1) -> dict:
    return {"run_id": RUN, "trial_id": f"{task}/bot/{rep}", "test_id": f"t::{task}"}


def _partition(wh: Warehouse, rep: int = 1, tasks: int = 5) -> None:
    """A partition written as a run writes slow trials (a file each) and quick ones (held,
    then written together): several files per table."""
    writer = TrialRowWriter(wh, RUN, hold_seconds=3600)
    for i in range(tasks):
        task = f"task-{i}"
        writer.add(_row(task, rep), [_check(task, rep)], [_test(task, rep)], quick=i % 2 == 1)
    writer.close()


def _files(wh: Warehouse, table: str, rep: int = 1) -> list[Path]:
    return wh.files(table, RUN, layout.partition_dir("bot", rep))


def _rows(wh: Warehouse) -> dict[str, pd.DataFrame]:
    return {table: wh.read(table, RUN) for table in TABLES}


def test_a_partitions_files_become_one_file_per_table_with_the_same_rows(
    tmp_path: Path,
) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    wh = Warehouse(tmp_path / "wh")
    _partition(wh)
    _partition(wh, rep=2, tasks=1)  # one file a table: nothing to join
    # a file an older version wrote, without a column of today's schema (read as null)
    legacy = pa.Table.from_pylist([{k: v for k, v in _row("old").items() if k != "attempt_no"}])
    pq.write_table(legacy, wh.part_path("trials", RUN, layout.trial_part("bot", 1, "old")))
    assert all(len(_files(wh, t)) >= 3 for t in TABLES)
    before = _rows(wh)
    assert before["trials"]["attempt_no"].isna().sum() == 1
    views = wh.refresh_views()

    assert join_partition(wh, RUN, ("bot", 1)) == 3
    assert join_partition(wh, RUN, ("bot", 2)) == 0
    for table in TABLES:
        (only,) = _files(wh, table)
        assert only.parent.name == layout.BATCHES and only.name.startswith("joined-")
        # the same rows in the same order, through the reader every step uses
        pd.testing.assert_frame_equal(wh.read(table, RUN), before[table])
        assert len(_files(wh, table, rep=2)) == 1
    # the DuckDB views see each row once, and the staging folder is no table
    counts = wh.query("SELECT count(*) AS n FROM trials WHERE run_id = 'r1'")
    assert int(counts["n"].iloc[0]) == 7
    assert wh.refresh_views() == views and layout.JOINING not in views
    assert not any((wh.root / layout.JOINING).iterdir())
    assert join_partition(wh, RUN, ("bot", 1)) == 0  # joined already


def test_only_the_partitions_rows_are_joined_and_nothing_else_dropped(tmp_path: Path) -> None:
    """A write a kill -9 cut short leaves its temp file: dropped with the old files. Anything
    else in the folder (not the harness's) keeps the partition as it is."""
    wh = Warehouse(tmp_path / "wh")
    _partition(wh)
    _partition(wh, rep=2)
    killed = wh.folder("trials", RUN, layout.partition_dir("bot", 1)) / ".task-0.parquet.ab12.tmp"
    killed.write_bytes(b"PAR1 half a file")
    foreign = wh.folder("trials", RUN, layout.partition_dir("bot", 2)) / "notes.txt"
    foreign.write_text("mine")
    before, kept = _rows(wh), _files(wh, "trials", 2)
    assert join_partition(wh, RUN, ("bot", 1)) == 3
    assert join_partition(wh, RUN, ("bot", 2)) == 2  # (its check and test files: no note)
    assert not killed.exists() and foreign.read_text() == "mine"
    assert len(_files(wh, "trials", 1)) == 1 and _files(wh, "trials", 2) == kept
    for table, frame in _rows(wh).items():
        pd.testing.assert_frame_equal(frame, before[table])


def test_a_trial_run_again_loses_its_rows_from_the_joined_file(tmp_path: Path) -> None:
    from bench_pipeline.formats.model import Config
    from bench_pipeline.trials.runner import TrialSpec
    from bench_pipeline_tests.test_agent_support import make_spec, make_task

    wh = Warehouse(tmp_path / "wh")
    _partition(wh)
    join_partition(wh, RUN, ("bot", 1))
    config = Config(id="bot", agent=make_spec("http-chat", url="http://127.0.0.1:9/v1"))
    again = [TrialSpec(replace(make_task(text=True), id="task-2"), config, 1)]
    assert forget_trials(wh, RUN, [("bot", 1)], again) == 3  # one joined file per table
    for table in TABLES:
        assert sorted(wh.read(table, RUN)["trial_id"]) == [f"task-{i}/bot/1" for i in (0, 1, 3, 4)]


class _JoinsAfterListing(Warehouse):
    """A warehouse whose first listing of a partition is followed at once by that
    partition's join: a reader then holds a list of files that are gone (the join landing
    between a listing and its read, made certain instead of waited for)."""

    joined = False

    def __init__(self, root: Path, rep: int = 1):
        super().__init__(root)
        self.rep = rep

    def files(self, table: str, run_id: str | None = None, under: str | None = None):
        listed = super().files(table, run_id, under)
        if not self.joined and listed:
            self.joined = True  # (the join itself lists through a plain Warehouse)
            join_partition(Warehouse(self.root), RUN, ("bot", self.rep))
        return listed


def test_a_reader_that_listed_the_files_before_the_join_reads_them_again(
    tmp_path: Path,
) -> None:
    from bench_pipeline.warehouse.columns import read_arrow

    wh = Warehouse(tmp_path / "wh")
    _partition(wh)
    before = wh.read("trials", RUN)
    stale = wh.files("trials", RUN)
    racing = _JoinsAfterListing(tmp_path / "wh")
    pd.testing.assert_frame_equal(racing.read("trials", RUN), before)
    assert racing.joined and len(wh.files("trials", RUN)) == 1
    # a caller that passes the files it listed is told they changed (not that one is damaged)
    with pytest.raises(VanishedFileError, match="listed, then replaced before it was read"):
        read_arrow(wh, "trials", RUN, ["trial_id"], files=stale)
    assert read_arrow(wh, "trials", RUN, ["trial_id"]).num_rows == 5
    # the column reader that lists for itself lists again too
    _partition(wh, rep=2)
    expected = sorted(wh.read("trials", RUN)["trial_id"])
    racing = _JoinsAfterListing(tmp_path / "wh", rep=2)
    ids = read_arrow(racing, "trials", RUN, ["trial_id"]).column("trial_id").to_pylist()
    assert racing.joined and sorted(ids) == expected and len(ids) == 10


def test_a_killed_joins_folder_is_read_by_nobody_and_removed_later(tmp_path: Path) -> None:
    """What a kill -9 leaves, whenever it lands: the partition folder whole (old or joined)
    and a staging folder holding a copy of its rows (the joined file before the exchange,
    the old files after it). No reader counts those rows, and a later join removes the
    folder once it is older than any join in progress could be."""
    import shutil

    wh = Warehouse(tmp_path / "wh")
    _partition(wh)
    _partition(wh, rep=2)
    before = _rows(wh)
    staging = wh.root / layout.JOINING / "killed" / "partition"
    shutil.copytree(wh.folder("trials", RUN, layout.partition_dir("bot", 1)), staging)
    assert len(list(staging.rglob("*.parquet"))) >= 3
    for table, frame in _rows(wh).items():
        pd.testing.assert_frame_equal(frame, before[table])
    assert layout.JOINING not in wh.refresh_views()
    assert int(wh.query("SELECT count(*) AS n FROM trials")["n"].iloc[0]) == 10
    join_partition(wh, RUN, ("bot", 1))
    assert staging.exists()  # (it could be a join running in another process)
    old = time.time() - STALE_JOIN_SECONDS - 60
    os.utime(staging.parent, (old, old))
    join_partition(wh, RUN, ("bot", 2))
    assert not staging.parent.exists()
    for table, frame in _rows(wh).items():
        assert sorted(frame["trial_id"]) == sorted(before[table]["trial_id"])


JOINER = """
import sys
from pathlib import Path
from bench_pipeline.warehouse.store import Warehouse
from bench_pipeline.warehouse.trial_rows import join_partition
wh = Warehouse(sys.argv[1])
print("joining", flush=True)
for rep in range(1, int(sys.argv[2]) + 1):
    join_partition(wh, "r1", ("bot", rep))
print("done", flush=True)
"""


def test_sigkill_during_joins_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    """A process joining partition after partition is killed while it joins; wherever the
    kill lands (reading, writing the joined file, the exchange, removing the old folder),
    every trial's rows are read exactly once, and the next joins finish the work."""
    wh = Warehouse(tmp_path / "wh")
    reps = 40
    for rep in range(1, reps + 1):
        _partition(wh, rep=rep, tasks=6)
    before = {t: sorted(f) for t, f in ((t, wh.read(t, RUN)["trial_id"]) for t in TABLES)}
    script = tmp_path / "joiner.py"
    script.write_text(textwrap.dedent(JOINER))
    proc = subprocess.Popen(
        [sys.executable, str(script), str(wh.root), str(reps)],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])},
    )
    assert proc.stdout.readline().strip() == "joining"
    # kill once the joins have begun (a partition's folder has been swapped in)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(
        f.name.startswith("joined-") for f in wh.root.glob("trials/r1/bot/*/_batches/*.parquet")
    ):
        time.sleep(0.005)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    joined = [rep for rep in range(1, reps + 1) if len(_files(wh, "trials", rep)) == 1]
    assert joined, "no partition was joined before the kill"
    for table in TABLES:
        assert sorted(wh.read(table, RUN)["trial_id"]) == before[table]
    for rep in range(1, reps + 1):
        join_partition(wh, RUN, ("bot", rep))
    for table in TABLES:
        assert sorted(wh.read(table, RUN)["trial_id"]) == before[table]
        assert all(len(_files(wh, table, rep)) == 1 for rep in range(1, reps + 1))
