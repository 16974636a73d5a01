"""Build every derived table of one benchmark run from the warehouse, and store it.

The pure table functions live in `bench_pipeline.results`; this module picks the run's rows
(the latest row per trial, the latest score per cell), chooses the baseline run, and writes
each table as `<table>/<run_id>/table.parquet`. Dagster's results assets, `bench results`
and `bench report` all go through `compute_derived`.
"""

from __future__ import annotations

import functools
import importlib
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from bench_pipeline import results as R
from bench_pipeline.formats.files import replacing
from bench_pipeline.formats.registry import AGENT_KINDS, uses_judge
from bench_pipeline.runs.benchmark_run import BenchmarkRun, agent_drift, load_run, run_exists
from bench_pipeline.runs.status import status_of
from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import Warehouse

if TYPE_CHECKING:
    import pandas as pd
    import pyarrow as pa

    from bench_pipeline.results import verdicts
    from bench_pipeline.results.config_table import ConfigCells
    from bench_pipeline.warehouse.columns import TrialKeys

T = TypeVar("T")
log = logging.getLogger(__name__)

DERIVED_TABLES = (
    "config_table",
    "task_grid",
    "recommendations",
    "pareto_frontier",
    "config_table_by_tag",
    "recommendations_by_tag",
    "paired_comparison",
    "regressions",
    "scenario_turns",
)


@dataclass
class Derived:
    run: BenchmarkRun
    tables: dict[str, pd.DataFrame]
    recommendations: dict[str, Any]
    baseline_run_id: str | None
    baseline_note: str | None
    chart_path: Path | None = None  # the full Pareto chart (SVG) in the warehouse's charts/
    notes: list[str] = field(default_factory=list)
    scorers: tuple[str, ...] = ()  # the launch's plus any a rescore added
    judge_status: str | None = None  # calibration of the judge, when a judge scorer is used
    timings: dict[str, float] = field(default_factory=dict)  # seconds per step (perf/analysis.py)

    @property
    def baseline_config(self) -> str | None:
        return next((c.id for c in self.run.launch.configs if c.agent.kind == "replay"), None)

    def meta(self) -> dict[str, Any]:
        run = self.run
        return {
            "run_id": run.run_id,
            "suite": run.suite,
            "launch": run.launch.name,
            "task_set_revision": run.taskset.revision,
            "created_at": run.created_at,
            "tasks": len(run.taskset.tasks),
            "configs": ", ".join(c.id for c in run.launch.configs),
            "repetitions": run.repetitions,
            "scorers": ", ".join(self.scorers or run.launch.scorers),
            **({"judge": self.judge_status} if self.judge_status else {}),
            "baseline_run": self.baseline_run_id or "none",
            **({"notes": " | ".join(self.notes)} if self.notes else {}),
        }


# --------------------------------------------------------------------------- baselines


def pinned_baseline(warehouse: Warehouse, suite: str) -> str | None:
    rel = layout.baseline(suite)
    return warehouse.read_json(rel)["run_id"] if warehouse.exists(rel) else None


def pin_baseline(warehouse: Warehouse, suite: str, run_id: str) -> None:
    from datetime import UTC, datetime

    warehouse.write_json(
        layout.baseline(suite),
        {"suite": suite, "run_id": run_id, "set_at": datetime.now(UTC).isoformat()},
    )


# --------------------------------------------------------------------------- rows of one run


def run_rows(warehouse: Warehouse, run_id: str) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every column of the run's trials (latest row per trial) and scores (latest row per
    trial x scorer)."""
    trials = warehouse.read("trials", run_id)
    scores = warehouse.read("scores", run_id)
    if not trials.empty:
        trials = R.latest_trials(trials)
    if not scores.empty:
        scores = R.latest_scores(scores)
    return trials, scores


# The columns the derived tables read (the trials': results.scores.TRIAL_COLUMNS + attempt_no,
# looked up when reading, so importing this module imports no pandas): everything else (error
# texts, evidence paths, reasons, details of non-assert scores) stays on disk. Low-cardinality
# strings come back categorical.
TRIAL_CATEGORICAL = (
    "run_id",
    "suite",
    "task_set_revision",
    "task_id",
    "config_id",
    "difficulty",
    "agent",
    "agent_kind",
    "model",
    "effort",
    "config_hash",
    "factory_ref",
    "outcome",
    "cost_unknown_reason",
)
SCORE_READ = (
    "run_id",
    "trial_id",
    "scorer",
    "scorer_group",
    "weight",
    "status",
    "value",
    "cost_usd",
    "scored_at",
)
SCORE_CATEGORICAL = ("run_id", "scorer", "scorer_group", "status")
ASSERT_READ = (*SCORE_READ, "task_id", "config_id", "repetition", "details_json")


def derived_per_trial(
    warehouse: Warehouse,
    run_id: str,
    timings: dict[str, float] | None = None,
    *,
    trial_files: list[Path] | None = None,
    score_files: list[Path] | None = None,
) -> pd.DataFrame | None:
    """The run's per-trial results (`latest_trial_overall` of the latest row per trial and its
    latest scores; None when the run has no trials), reading only the columns the derived
    tables use.

    The usual route keys the trials by (task, config, repetition) (`TrialKeys`: integers, the
    id strings never hashed) and reads the score rows once, batch by batch,
    keeping the latest row per (trial, scorer) as they come (`R.LatestCells`): from a few big
    files the run's score rows are never all in memory (many small files are read once, as
    one table, and reduced in slices). Where an id is not its triple, the score rows' trial
    ids are read first, dictionary-encoded, and only the dictionaries are looked up among the
    trials' ids (`key_rows`), then the rest as before. A score row that names no trial of the
    run, or no scorer, or another run, takes the general route: every needed column read at
    once, then `R.latest_trial_overall`."""
    import numpy as np

    from bench_pipeline.results.scores import LatestCells
    from bench_pipeline.warehouse.columns import (
        TrialKeys,
        batch_by_batch,
        dictionary_values,
        iter_batches,
        key_rows,
        one_chunk,
        read_arrow,
        read_columns,
        release_memory,
        to_frame,
    )

    timings = {} if timings is None else timings
    start = time.perf_counter()
    # (not the columns no derived table reads: the trials' error texts can be most of them)
    trial_read = [c for c in (*R.TRIAL_COLUMNS, "attempt_no") if c not in PER_TRIAL_UNUSED]
    t_arrow = read_arrow(
        warehouse, "trials", run_id, trial_read, dictionary=TRIAL_CATEGORICAL, files=trial_files
    )
    runs = sorted(dictionary_values(t_arrow.column("run_id")))
    one_run = len(t_arrow) > 0 and t_arrow.column("run_id").null_count == 0 and len(runs) == 1
    # both reads of the scores see the same files
    files = score_files if score_files is not None else warehouse.files("scores", run_id)
    if not one_run:  # no trials, or several runs in one run's folder: the general route
        trials = to_frame(t_arrow)
        del t_arrow
        timings["read trials"] = time.perf_counter() - start
        return _general_per_trial(warehouse, run_id, trials, files, timings)
    # The trials as a frame first (their ids stay in Arrow): the score ids are read and looked
    # up next, and the Arrow table would double the trials' memory meanwhile. Their ids and
    # tags each as one array: the per-trial cache stores one array per column and the grid
    # cuts its lists from one array of ids, so joined later they would be copied on top of
    # the tables' peak (~20 MiB at 25,000 tasks x 8 configs x 5); here the analysis holds
    # little else.
    t_arrow = one_chunk(t_arrow, ONE_CHUNK)
    t_ids = t_arrow.column("trial_id")
    trials = to_frame(t_arrow)
    del t_arrow
    keys = TrialKeys.of(trials, t_ids, check_ids=False)
    if keys is not None:
        del t_ids  # (the keys hold the ids, and free them once the score rows are placed)
        release_memory()  # the keys' temporaries, before the scores
        timings[KEYED] = time.perf_counter() - start
        # Whether every id is its triple is checked on a thread of its own while the score
        # rows are placed by their triples (Arrow compute, no GIL held: the second core);
        # the pass waits for it before it makes anything of the rows it kept.
        with ThreadPoolExecutor(1, thread_name_prefix="trial-ids") as pool:
            checked = pool.submit(keys.id_check())
            per_trial = _per_trial_by_keys(
                warehouse, run_id, runs[0], trials, keys, files, timings, checked.result
            )
        if per_trial is not None:
            return per_trial
        if checked.result():  # a score row naming no trial: the ids as strings from here
            start = time.perf_counter()
        else:  # an id that is not its triple: not keyed after all (the pass's time counts)
            for label in KEYED_STEPS:
                timings.pop(label, None)
        t_ids = keys.ids  # (not released: the pass gave up)
    del keys
    columns = [c for c in SCORE_READ if c != "trial_id"]
    if not batch_by_batch(files):
        # Many small files (a run as written: one per partition and rescore): opening each
        # costs more than holding the rows, so read them once and reduce the table in slices.
        s_table = read_arrow(
            warehouse,
            "scores",
            run_id,
            SCORE_READ,
            dictionary=(*SCORE_CATEGORICAL, "trial_id"),
            files=files,
        )
        s_ids = s_table.column("trial_id")
        s_table = s_table.select(columns)
        batches: Iterator[pa.RecordBatch] = _slices(s_table)
    else:  # a few big files: the ids first, then the rest batch by batch
        s_ids = read_arrow(
            warehouse, "scores", run_id, ["trial_id"], dictionary=["trial_id"], files=files
        ).column(0)
        batches = iter_batches(
            warehouse, "scores", run_id, columns, dictionary=SCORE_CATEGORICAL, files=files
        )
    s_table = None
    # every trial id's first trial row, and every score row's (one hash table of the trial ids)
    first, rows = key_rows(s_ids, t_ids)
    del s_ids, t_ids
    if not np.array_equal(first, np.arange(len(first), dtype=np.int32)):
        # resumed trials (several attempts of one): the latest attempt of each, keyed by the
        # first row of its id; a score row follows its id's first row to the latest one
        keep = R.latest_trial_positions(trials, first)
        if keep is not None:
            trials = trials.iloc[keep]
            latest = np.full(len(first) + 1, -1, dtype=np.int32)
            latest[first[keep]] = np.arange(len(keep), dtype=np.int32)
            rows = latest[rows]  # -1 (no trial) takes the trailing -1
    del first
    release_memory()
    timings["read trials + the scores' trial ids"] = time.perf_counter() - start
    start = time.perf_counter()
    cells = LatestCells(len(trials), runs[0], len(rows))
    done = 0
    ok = not (rows < 0).any()
    for batch in batches if ok else ():
        ok = cells.add(batch, rows[done : done + batch.num_rows])
        done += batch.num_rows
        if not ok:
            break
    n_rows = len(rows)
    del batches, rows, s_table
    release_memory()
    # (a file rewritten between the two reads gives another count: the general route)
    if ok and done == n_rows:
        timings["read scores, latest per (trial, scorer)"] = time.perf_counter() - start
        start = time.perf_counter()
        empty = read_columns(warehouse, "scores", run_id, SCORE_READ, files=[])
        per_trial = R.trial_overall(trials, empty, _latest=True, _cells=cells)
        del cells
        release_memory()  # the pass's temporaries, before the tables make their own
        timings["per-trial results"] = time.perf_counter() - start
        return per_trial
    del cells
    return _general_per_trial(warehouse, run_id, trials, files, timings)


# The trial columns read as one array each: those the per-trial cache and the grid would
# otherwise join into a copy (the numeric ones are copied into numpy arrays anyway).
ONE_CHUNK = ("trial_id", "tags")
# What a score row's trial is looked up by (TrialKeys), besides its trial_id.
TRIAL_KEY = ("task_id", "config_id", "repetition")
# derived_per_trial's timings of the keyed route, up to the per-trial results
KEYED = "read trials, key them by task, config and repetition"
KEYED_STEPS = (KEYED, "read scores, latest per (trial, scorer)", "per-trial results")


def _per_trial_by_keys(
    warehouse: Warehouse,
    run_id: str,
    run: str,
    trials: pd.DataFrame,
    keys: TrialKeys,
    files: list[Path],
    timings: dict[str, float],
    ids_are_triples: Callable[[], bool],
) -> pd.DataFrame | None:
    """derived_per_trial's route when the trials are keyed by their triples: the score rows
    are read once, batch by batch, each batch's trial rows found by integers and its latest
    cells kept at once (no pass over the score rows' ids first, no string hashed). None when
    a row names no trial of the run, or takes the general route."""
    import numpy as np

    from bench_pipeline.results.scores import LatestCells
    from bench_pipeline.warehouse.columns import (
        batch_by_batch,
        iter_batches,
        read_columns,
        read_groups,
        release_memory,
        row_count,
    )

    start = time.perf_counter()
    remap = None
    keep = R.latest_trial_positions(trials, keys.first)
    if keep is not None:  # resumed trials: a score row goes to its id's latest attempt
        trials = trials.iloc[keep]
        remap = np.full(len(keys.first), -1, dtype=np.int32)
        remap[keys.first[keep]] = np.arange(len(keep), dtype=np.int32)
    release_memory()  # (the attempts' sort: its temporaries before the score rows come)
    columns = [c for c in SCORE_READ if c != "trial_id"]
    read = [*columns, *TRIAL_KEY]
    dictionary = (*SCORE_CATEGORICAL, "task_id", "config_id")
    batches: Iterator[pa.RecordBatch]
    if not batch_by_batch(files):  # many small files: read a group at a time, in slices
        # (their count unknown until read: reading the footers of tens of thousands of files
        # first would cost seconds; the cells' positions need only a bound)
        total = LatestCells.MAX_ROWS
        groups = read_groups("scores", files, read, dictionary)
        batches = (batch for table in groups for batch in _slices(table))
    else:
        total = row_count(files)
        batches = iter_batches(
            warehouse, "scores", run_id, read, dictionary=dictionary, files=files
        )
    cells = LatestCells(len(trials), run, total)
    for batch in batches:
        rows = keys.rows(batch)
        if rows is None:
            return None
        if remap is not None:
            rows = remap[rows]
        if not cells.add(batch.select(columns), rows):
            return None
    del batches, remap
    if not ids_are_triples():  # (the keys kept whole: the caller looks the ids up instead)
        return None
    keys.release()
    release_memory()
    timings["read scores, latest per (trial, scorer)"] = time.perf_counter() - start
    start = time.perf_counter()
    empty = read_columns(warehouse, "scores", run_id, SCORE_READ, files=[])
    per_trial = R.trial_overall(trials, empty, _latest=True, _cells=cells)
    del cells
    release_memory()
    timings["per-trial results"] = time.perf_counter() - start
    return per_trial


def _slices(table: pa.Table, size: int = 65536) -> Iterator[pa.RecordBatch]:
    """`table` in record batches of `size` rows (small chunks, e.g. one per file, joined: the
    reducer's cost is per batch), dictionaries unified within each."""
    for start in range(0, len(table), size):
        yield from table.slice(start, size).combine_chunks().to_batches()


def _general_per_trial(
    warehouse: Warehouse,
    run_id: str,
    trials: pd.DataFrame,
    files: list[Path],
    timings: dict[str, float],
) -> pd.DataFrame | None:
    """derived_per_trial's general route: every needed column of the scores read at once."""
    from bench_pipeline.warehouse.columns import read_columns

    start = time.perf_counter()
    if len(trials) == 0:
        return None
    trials = R.latest_trials(trials)
    scores = read_columns(
        warehouse, "scores", run_id, SCORE_READ, categorical=SCORE_CATEGORICAL, files=files
    )
    timings["read scores, latest per (trial, scorer)"] = time.perf_counter() - start
    start = time.perf_counter()
    per_trial = R.latest_trial_overall(trials, scores, trials_are_latest=True)
    timings["per-trial results"] = time.perf_counter() - start
    return per_trial


# --------------------------------------------------------------------------- per-trial cache

# Per-trial columns no derived table reads: left out of the per-trial results (fresh or cached)
# so the cache file and the frame stay small (trials' error texts are the big one).
PER_TRIAL_UNUSED = ("task_set_revision", "difficulty", "config_hash", "error", "groups_scored")
# Bumped whenever what `derived_per_trial` computes changes: an older cache is then rebuilt.
# 2: the config x task sums stored as their arrays' bytes, not JSON; 3: each array aligned;
# 4: the sums in a file of their own (`layout.per_trial_cells`), not in the schema's metadata
PER_TRIAL_FORMAT = "4"
_KEY_FIELD = b"bench_pipeline.inputs"
_CATALOG_FIELD = b"bench_pipeline.scorer_catalog"


def _key_line(key: str) -> bytes:
    """The first line of the sums' file: the cache key, padded so that the sums after it
    start on a multiple of 8 bytes (their arrays' views are then aligned)."""
    line = key.encode()
    return line + b" " * (-(len(line) + 1) % 8) + b"\n"


@functools.cache
def _code_version() -> str:
    """The code that computes the per-trial rows and sums, by content: a cache written by other
    code (an upgrade, an edited checkout) is rebuilt even when PER_TRIAL_FORMAT was not bumped."""
    import hashlib

    import bench_pipeline

    digest = hashlib.sha256(bench_pipeline.__version__.encode())
    for name in CACHE_CODE:
        module = importlib.import_module(name)
        # a package stands for every module in it: what the rows are computed with
        files = (
            sorted(Path(module.__file__ or "").parent.glob("*.py"))
            if hasattr(module, "__path__")
            else [Path(module.__file__ or "")]
        )
        for path in files:
            digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


# The code the per-trial rows and sums come from: the results package (scores, the config
# table's sums, their shared codes), the warehouse's column readers, the vocabulary of
# outcomes and statuses, and this module.
CACHE_CODE = (
    "bench_pipeline.results",
    "bench_pipeline.warehouse.columns",
    "bench_pipeline.formats.vocabulary",
    __name__,
)


def input_key(
    warehouse: Warehouse,
    trial_files: list[tuple[str, os.stat_result]],
    score_files: list[tuple[str, os.stat_result]],
) -> str:
    """What a run's per-trial results are a function of: the format of the computation and
    every trial and score file (`Warehouse.listed`: path and stat) by name, size, modification
    time, inode and change time (a warehouse file is never rewritten in place: a write is a
    new file renamed into place, so a new inode and times; a rescore adds files). Taken from
    a listing made BEFORE the files are read: a file replaced meanwhile makes the key older
    than the rows, and the next analysis rebuilds."""
    import hashlib

    digest = hashlib.sha256(f"{PER_TRIAL_FORMAT}:{_code_version()}".encode())
    root = len(str(warehouse.root)) + 1
    # (one text for every file, hashed once: at tens of thousands of files a json.dumps and
    # a digest update per file cost more than listing them)
    lines = [
        f"{table}\t{path[root:]}\t{st.st_size}\t{st.st_mtime_ns}\t{st.st_ino}\t{st.st_ctime_ns}\n"
        for table, files in (("trials", trial_files), ("scores", score_files))
        for path, st in files
    ]
    digest.update("".join(lines).encode("utf-8", "surrogateescape"))
    return f"{PER_TRIAL_FORMAT}:{len(trial_files)}:{len(score_files)}:{digest.hexdigest()}"


def read_per_trial_cache(
    warehouse: Warehouse, run_id: str, key: str
) -> tuple[pd.DataFrame, ConfigCells | None] | None:
    """The run's stored per-trial results (and config x task sums, when stored) when they were
    built from exactly the files `key` names (`input_key`), else None (no cache, another key,
    an unreadable file: rebuilt)."""
    import pyarrow as pa
    import pyarrow.ipc as ipc

    from bench_pipeline.warehouse.columns import _pandas_type

    path = warehouse.root / layout.per_trial_cache(run_id)
    try:
        with pa.memory_map(str(path)) as source:
            reader = ipc.open_file(source)
            meta = reader.schema.metadata or {}
            if meta.get(_KEY_FIELD) != key.encode():
                return None
            table = reader.read_all()
        catalog = json.loads(meta[_CATALOG_FIELD])
        frame = table.to_pandas(types_mapper=_pandas_type, split_blocks=True, self_destruct=True)
        del table
        frame.attrs["scorer_catalog"] = catalog
    except (OSError, pa.ArrowException, KeyError, TypeError, ValueError):  # (JSON errors too)
        return None
    return frame, _read_cells(warehouse.root / layout.per_trial_cells(run_id), frame, key)


def _read_cells(path: Path, per_trial: pd.DataFrame, key: str) -> ConfigCells | None:
    """The config x task sums stored beside the per-trial cache, as read-only views of the
    file's mapped pages; None when there are none for `key` or they cannot be read."""
    import mmap

    try:
        with open(path, "rb") as file:
            data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
        line = data.find(b"\n")
        if line < 0 or data[:line].rstrip() != key.encode():
            return None
        # (the views keep the mapping open; it closes when the last one goes)
        return R.ConfigCells.from_bytes(per_trial, data, start=line + 1)
    except (OSError, KeyError, TypeError, ValueError):  # (an empty file, JSON errors too)
        return None


def write_per_trial_cache(
    warehouse: Warehouse,
    run_id: str,
    key: str,
    per_trial: pd.DataFrame,
    cells: ConfigCells | None = None,
    *,
    writer: Executor | None = None,
    timings: dict[str, float] | None = None,
) -> None:
    """Store `per_trial` (with its scorer catalog, and its config x task sums `cells` when
    given) under `key`, atomically (temp file, then rename). One record batch whose numeric
    columns are the frame's own buffers (no copy while writing) and whose floats keep NaN as
    NaN (no validity bitmap): reading it back maps the file's pages into the frame (zero-copy),
    so a column no table touches costs no memory.

    The batch is built here; the file is written here, or on `writer`'s thread when given
    (writing ~140 MB at a million trials is the kernel copying pages, ~0.25 s, while Arrow
    holds no GIL: the derived tables go on meanwhile; the caller waits for `writer`). A cache
    that cannot be built or written is logged and left out: the next analysis reads the files
    again. `timings` gets how long building the batch took (STORE_BATCH) and, once the file
    is written, how long that took (STORE_FILE, or STORE_BESIDE on `writer`)."""
    import pyarrow as pa

    timings = {} if timings is None else timings
    start = time.perf_counter()
    target = warehouse.root / layout.per_trial_cache(run_id)
    try:
        target.parent.mkdir(
            parents=True, exist_ok=True
        )  # first: a read-only warehouse costs nothing
        catalog = json.dumps(per_trial.attrs.get("scorer_catalog") or [], default=_plain)
        schema = pa.Schema.from_pandas(per_trial.iloc[:0], preserve_index=False)
        extra = {_KEY_FIELD: key.encode(), _CATALOG_FIELD: catalog.encode()}
        schema = schema.with_metadata({**(schema.metadata or {}), **extra})
        # (the sums in a file of their own, not in the schema's metadata: at 25,000 tasks x 8
        # configs they are ~65 MiB, which the metadata copied three times over)
        sums = [_key_line(key), *cells.to_parts()] if cells is not None else None
        # (built before the tables run: its numeric columns are the frame's buffers, which
        # no table writes to, and the rest are copies)
        batch = pa.RecordBatch.from_arrays(
            [_arrow_column(per_trial[f.name], f.type) for f in schema], schema=schema
        )
    except (OSError, pa.ArrowException, TypeError, ValueError) as exc:
        _not_cached(run_id, exc)
        return
    timings[STORE_BATCH] = time.perf_counter() - start
    label = STORE_FILE if writer is None else STORE_BESIDE

    def write() -> None:
        import pyarrow.ipc as ipc

        start = time.perf_counter()
        try:
            # the sums first: a cache whose key is current always has its sums' file beside
            # it, unless that could not be written (then the next analysis computes them)
            sums_at = warehouse.root / layout.per_trial_cells(run_id)
            if sums is not None:
                with replacing(sums_at) as tmp, open(tmp, "wb") as file:
                    file.writelines(sums)
            else:
                sums_at.unlink(missing_ok=True)
            with replacing(target) as tmp, ipc.new_file(str(tmp), schema) as file:
                file.write_batch(batch)
        except (OSError, pa.ArrowException) as exc:
            _not_cached(run_id, exc)
            return
        timings[label] = time.perf_counter() - start  # (one key: safe from another thread)

    if writer is None:
        write()
    else:
        writer.submit(write)


# The timings of the per-trial cache's store: building its record batch, then writing the file
# in line, or on the analysis's writer thread while the tables are computed (not on the way).
STORE_BATCH = "per-trial cache: its record batch"
STORE_FILE = "store the per-trial cache"
STORE_BESIDE = "store the per-trial cache (beside the tables, not in the total)"


def _not_cached(run_id: str, exc: Exception) -> None:
    # (a cache is an optimisation: a column Arrow cannot hold, a read-only or full disk,
    # leave the analysis as it was and the next one reads the files again)
    log.warning("per-trial cache of %s not written (%s): rebuilt next time", run_id, exc)


def _arrow_column(values: pd.Series, kind: pa.DataType) -> pa.Array:
    """One column of the per-trial cache as a single Arrow array: numpy numbers as they are
    (zero-copy, NaN kept), the rest converted (categoricals: their codes; Arrow-backed
    strings and lists: their own chunks, joined)."""
    import numpy as np
    import pandas as pd
    import pyarrow as pa

    if isinstance(values.dtype, np.dtype) and values.dtype.kind in "fiu":
        return pa.array(values.to_numpy(), type=kind)
    if isinstance(values.dtype, pd.CategoricalDtype) and pa.types.is_dictionary(kind):
        # (the codes as they are, -1 as null: 44 -> 18 ms for 18 columns at a million trials,
        # against the conversion through a one-column table below)
        codes = values.array.codes  # (the Categorical's own array: no Series made around it)
        # (a mask only where a code is -1; the codes are in range, pandas made them: unchecked)
        missing = codes < 0 if len(codes) and codes.min() < 0 else None
        indices = pa.array(codes, type=kind.index_type, mask=missing)
        categories = np.asarray(values.cat.categories, dtype=object)
        return pa.DictionaryArray.from_arrays(
            indices, pa.array(categories, type=kind.value_type), ordered=kind.ordered, safe=False
        )
    array = pa.Table.from_pandas(values.to_frame(), preserve_index=False).column(0)
    if array.type != kind:
        array = array.cast(kind)
    return array.combine_chunks() if array.num_chunks != 1 else array.chunk(0)


def _plain(value: object) -> object:
    """JSON for the numpy scalars of a scorer catalog."""
    import numpy as np

    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON: {value!r}")


def per_trial_results(
    warehouse: Warehouse,
    run_id: str,
    timings: dict[str, float] | None = None,
    *,
    writer: Executor | None = None,
    on_per_trial: Callable[[pd.DataFrame], None] | None = None,
) -> tuple[pd.DataFrame, ConfigCells] | None:
    """The run's per-trial results (`derived_per_trial`'s, without PER_TRIAL_UNUSED) and their
    config x task sums (`results.config_cells`): read from the per-trial cache when it was
    built from the run's current trial and score files, else computed from them and stored
    for the next analysis (on `writer`'s thread when given: the caller waits for it, e.g. by
    shutting `writer` down). None when the run has no trials.

    `on_per_trial` is called with the per-trial results as soon as they exist, before their
    sums are made (so a caller can start work that needs only them); when the files changed
    meanwhile and were read again, it is called again, with the frame that is returned."""
    from bench_pipeline.warehouse.store import listing_again

    timings = {} if timings is None else timings
    # (a partition's files joined meanwhile: listed again)
    return listing_again(
        lambda: _per_trial_results(warehouse, run_id, timings, writer, on_per_trial)
    )


def _per_trial_results(
    warehouse: Warehouse,
    run_id: str,
    timings: dict[str, float],
    writer: Executor | None,
    on_per_trial: Callable[[pd.DataFrame], None] | None,
) -> tuple[pd.DataFrame, ConfigCells] | None:
    start = time.perf_counter()
    trial_listed = warehouse.listed("trials", run_id)
    score_listed = warehouse.listed("scores", run_id)
    key = input_key(warehouse, trial_listed, score_listed)
    cached = read_per_trial_cache(warehouse, run_id, key)
    if cached is not None and cached[1] is not None:
        timings["per-trial results + config x task sums (cached)"] = time.perf_counter() - start
        if on_per_trial is not None:
            on_per_trial(cached[0])
        return cached[0], cached[1]
    del cached
    trial_files = [Path(path) for path, _ in trial_listed]
    score_files = [Path(path) for path, _ in score_listed]
    del trial_listed, score_listed
    per_trial = derived_per_trial(
        warehouse, run_id, timings, trial_files=trial_files, score_files=score_files
    )
    if per_trial is None:
        return None
    per_trial = per_trial.drop(columns=[c for c in PER_TRIAL_UNUSED if c in per_trial])
    if on_per_trial is not None:
        on_per_trial(per_trial)
    cells = _timed(timings, "config x task sums", lambda: R.config_cells(per_trial))
    write_per_trial_cache(warehouse, run_id, key, per_trial, cells, writer=writer, timings=timings)
    return per_trial, cells


def assert_rows(warehouse: Warehouse, run_id: str, per_trial: pd.DataFrame) -> pd.DataFrame:
    """The latest `assert` score rows with their details (what scenario_turns reads); the
    scorer catalog of `per_trial` tells whether there are any (no second scan if not)."""
    import pandas as pd
    import pyarrow.dataset as ds

    catalog = per_trial.attrs.get("scorer_catalog") or []
    if not any(item["scorer"] == "assert" for item in catalog):
        return pd.DataFrame(columns=["scorer"])  # no turns: scenario_turns gives its empty table

    from bench_pipeline.warehouse.columns import read_columns

    rows = read_columns(
        warehouse, "scores", run_id, ASSERT_READ, where=ds.field("scorer") == "assert"
    )
    return R.latest_scores(rows) if len(rows) else rows


# The steps over a million rows: their temporaries go back to the OS before the next step makes
# its own (a trim walks the heap: ~3 ms after a compacted run, ~0.1 s after thousands of small
# files, so only where it pays).
_TRIM_AFTER = {"baseline run", "config x task sums", "task grid"}


def _NO_ROWS() -> pd.DataFrame:  # noqa: N802 (reads as the constant it stands for)
    import pandas as pd

    return pd.DataFrame()


def _timed(timings: dict[str, float], label: str, fn: Callable[[], T]) -> T:
    from bench_pipeline.warehouse.columns import release_memory

    start = time.perf_counter()
    out = fn()
    if label in _TRIM_AFTER:
        release_memory()
    timings[label] = timings.get(label, 0.0) + time.perf_counter() - start
    return out


def compute_derived(
    warehouse: Warehouse,
    run_id: str,
    *,
    baseline_run_id: str | None = None,
    use_pinned_baseline: bool = True,
    chart_dir: Path | None = None,
) -> Derived:
    from bench_pipeline.warehouse.columns import system_memory_pool

    # the per-trial caches are written while the tables are computed; the analysis returns
    # once they are on disk (or logged as not written), as if they were written in line
    writer = _CacheWrites()
    with system_memory_pool(), _PairedComparison() as comparison:
        try:
            derived = _compute_derived(
                warehouse,
                run_id,
                baseline_run_id=baseline_run_id,
                use_pinned_baseline=use_pinned_baseline,
                chart_dir=chart_dir,
                writer=writer,
                comparison=comparison,
            )
        finally:
            start = time.perf_counter()
            writer.wait()
        if writer.futures:
            derived.timings["wait for the per-trial cache"] = time.perf_counter() - start
        return derived


class _CacheWrites(ThreadPoolExecutor):
    """One thread for the per-trial cache writes of an analysis; `wait` raises what a write
    raised (not a failure the write logs and tolerates, which it does not raise)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="per-trial-cache")
        self.futures: list[Future[Any]] = []

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        future = super().submit(fn, *args, **kwargs)
        self.futures.append(future)
        return future

    def wait(self) -> None:
        self.shutdown(wait=True)
        for future in self.futures:
            future.result()


class _PairedComparison(ThreadPoolExecutor):
    """The paired comparison of an analysis, on a thread of its own from the moment the run's
    per-trial results exist (`start`, given to `per_trial_results` as its `on_per_trial`): it
    reads nothing else, and meanwhile the config x task sums and the tables made from them
    keep the main thread busy (a million trials: ~0.1 s of the analysis on a second core)."""

    def __init__(self) -> None:
        super().__init__(max_workers=1, thread_name_prefix="paired-comparison")
        self._of: tuple[pd.DataFrame, Future[tuple[pd.DataFrame, float]]] | None = None

    def start(self, per_trial: pd.DataFrame) -> None:
        # (a second call: the files were read again; the frame of the first is dropped)
        self._of = (per_trial, self.submit(self._compare, per_trial))

    @staticmethod
    def _compare(per_trial: pd.DataFrame) -> tuple[pd.DataFrame, float]:
        start = time.perf_counter()
        table = R.compare_all(_NO_ROWS(), _NO_ROWS(), per_trial=per_trial)
        return table, time.perf_counter() - start

    def result(self, per_trial: pd.DataFrame, timings: dict[str, float]) -> pd.DataFrame:
        """The comparison of `per_trial` (started now if it was not), its time in `timings`."""
        from bench_pipeline.warehouse.columns import release_memory

        if self._of is None or self._of[0] is not per_trial:
            self.start(per_trial)
        assert self._of is not None
        start = time.perf_counter()
        table, took = self._of[1].result()
        waited = time.perf_counter() - start
        self._of = None
        release_memory()  # (its temporaries, as after each million-row step)
        timings["paired comparison"] = took
        timings["wait for the paired comparison"] = waited
        return table

    def __exit__(self, *exc: object) -> None:
        # (an analysis that failed before the comparison started cancels it; one already
        # under way is waited for, as a thread cannot be stopped)
        self.shutdown(wait=True, cancel_futures=True)


def _compute_derived(
    warehouse: Warehouse,
    run_id: str,
    *,
    baseline_run_id: str | None,
    use_pinned_baseline: bool,
    chart_dir: Path | None,
    writer: Executor,
    comparison: _PairedComparison,
) -> Derived:
    import pandas as pd

    from bench_pipeline.results.regressions import COLUMNS as REGRESSION_COLUMNS

    timings: dict[str, float] = {}
    run = _timed(timings, "the run's manifest", lambda: load_run(run_id, warehouse))
    results = per_trial_results(
        warehouse, run_id, timings, writer=writer, on_per_trial=comparison.start
    )
    if results is None:
        raise LookupError(f"run {run_id} has no trials yet")
    # per-(config, task) sums: the config table, the table by tag and the grid start from them
    per_trial, cells = results
    del results
    # (the table functions read `per_trial` only: the rows it came from are not needed)
    trials = scores = _NO_ROWS()
    notes: list[str] = []
    status = status_of(warehouse, run_id) or {}
    drift = status.get("agent_drift") if "agent_drift" in status else agent_drift(run)
    if drift:
        notes.append(f"agent drift: {', '.join(drift)} changed while the run was in progress")

    adaptive = adaptive_note(warehouse, run)
    if adaptive:
        notes.append(adaptive)

    base_id = baseline_run_id or (
        pinned_baseline(warehouse, run.suite) if use_pinned_baseline else None
    )
    base_note = None
    baseline_table = None
    baseline_per_trial = None
    if base_id == run_id:
        base_id = None
    if base_id and not run_exists(warehouse, base_id):
        # (its manifest moved aside as unreadable, or the warehouse copied without it)
        notes.append(f"baseline {base_id} has no manifest in the warehouse: not compared")
        base_id = None
    if base_id:
        base_run = load_run(base_id, warehouse)
        if base_run.taskset.revision != run.taskset.revision:
            base_note = (
                f"baseline {base_id} ran task-set revision {base_run.taskset.revision}, this run "
                f"{run.taskset.revision}: not compared (stale results are never mixed)"
            )
            notes.append(base_note)
            base_id = None
        else:

            def baseline_side() -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
                base = per_trial_results(warehouse, base_id, writer=writer)
                if base is None:
                    return None, None
                bpt, b_cells = base
                return R.config_table(trials, scores, per_trial=bpt, cells=b_cells), bpt

            baseline_table, baseline_per_trial = _timed(timings, "baseline run", baseline_side)
            if baseline_table is None:  # (a gate must not pass by comparing with nothing)
                base_note = f"baseline {base_id} has no trials: not compared"
                notes.append(base_note)
                base_id = None

    scorers, judge = run_scorers(warehouse, run)
    judge_status = judge_calibration_note(warehouse, judge) if uses_judge(scorers) else None
    table = _timed(
        timings,
        "config table",
        lambda: R.config_table(trials, scores, baseline_table, per_trial=per_trial, cells=cells),
    )
    table = _annotate_controls(_annotate_judge(table, run, scorers, judge), run)
    recs = _timed(timings, "recommendations", lambda: R.recommend(table))
    frontier = _timed(timings, "pareto frontier", lambda: R.pareto_frontier(table))
    by_tag = _timed(
        timings,
        "config table by tag",
        lambda: _annotate_controls(
            R.config_table_by_tag(trials, scores, per_trial=per_trial, cells=cells), run
        ),
    )
    paired = comparison.result(per_trial, timings)
    # the grid last of the million-row steps: its lists of trial ids are a copy of every id
    # (Arrow strings, no Python object each), and the other steps' temporaries sit on less
    grid = _timed(
        timings,
        "task grid",
        lambda: R.task_config_grid(trials, scores, per_trial=per_trial, cells=cells),
    )
    if baseline_table is not None and base_id:
        regressions = _timed(
            timings,
            "regressions",
            lambda: R.detect_regressions(
                table,
                baseline_table,
                {
                    "overall": run.launch.suite.tolerance.overall,
                    "cost": run.launch.suite.tolerance.cost,
                },
                suite=run.suite,
                run_id=run_id,
                baseline_run_id=base_id,
                current_trials=per_trial,
                baseline_trials=baseline_per_trial,
            ),
        )
    else:
        regressions = pd.DataFrame(columns=REGRESSION_COLUMNS)
    tables = {
        "config_table": table,
        "task_grid": grid,
        "recommendations": _timed(
            timings, "recommendations", lambda: R.recommendations_frame(table, recommended=recs)
        ),
        "pareto_frontier": frontier,
        "config_table_by_tag": by_tag,
        "recommendations_by_tag": _timed(
            timings, "recommendations by tag", lambda: R.recommendations_by_tag(by_tag)
        ),
        "paired_comparison": paired,
        "regressions": regressions,
        "scenario_turns": _timed(
            timings,
            "scenario turns",
            lambda: scenario_turns(assert_rows(warehouse, run_id, per_trial)),
        ),
    }
    for frame in tables.values():
        if "run_id" not in frame.columns:
            frame.insert(0, "run_id", run_id)
    derived = Derived(
        run,
        tables,
        recs,
        base_id,
        base_note,
        notes=notes,
        scorers=scorers,
        judge_status=judge_status,
        timings=timings,
    )
    if chart_dir is not None:
        derived.chart_path = _timed(
            timings,
            "pareto chart",
            lambda: R.pareto_chart(
                frontier,
                chart_dir / f"{run_id}-pareto.svg",
                baseline_config=derived.baseline_config,
            ),
        )
    return derived


def adaptive_note(warehouse: Warehouse, run: BenchmarkRun) -> str | None:
    """Why an adaptive run stopped and after how many rounds (None for a fixed count)."""
    plan = run.launch.adaptive
    if plan is None:
        return None
    rule = f"stop: {plan.stop}" + (f" {plan.ci_width:g}" if plan.ci_width else "")
    head = f"adaptive repetitions ({plan.min}-{plan.max}, {rule})"
    rel = layout.adaptive_rounds(run.run_id)
    rec = warehouse.read_json(rel) if warehouse.exists(rel) else {}
    last = rec.get("final") or (rec.get("decisions") or [None])[-1]
    return f"{head}: {last['summary'] if last else 'no round decided yet'}"


def run_scorers(warehouse: Warehouse, run: BenchmarkRun) -> tuple[tuple[str, ...], Any]:
    """The scorers a run's scores come from (launch + rescores) and its effective judge."""
    from bench_pipeline.runs.rescore import effective_judge, rescore_history

    scorers = list(run.launch.scorers)
    for item in rescore_history(warehouse, run.run_id):
        scorers += [s for s in item.get("scorers") or [] if s not in scorers]
    return tuple(scorers), effective_judge(warehouse, run)


def judge_calibration_note(warehouse: Warehouse, judge: Any) -> str:
    from bench_pipeline.runs.calibration import judge_calibration

    if judge is None:
        return "no judge configured"
    cal = judge_calibration(warehouse, judge)
    if cal is None:
        return f"{judge.model}: NOT calibrated (run `bench calibrate-judge`)"
    kappa = cal.get("kappa")
    acc = cal.get("accuracy")
    shown = ", ".join(
        part
        for part in (
            f"accuracy {acc:.2f}" if isinstance(acc, int | float) else "",
            f"kappa {kappa:.2f}" if isinstance(kappa, int | float) else "",
        )
        if part
    )
    return f"{judge.model}: calibrated ({shown}) at {cal.get('calibrated_at', cal.get('created_at', '?'))}"


def _annotate_judge(
    table: pd.DataFrame, run: BenchmarkRun, scorers: tuple[str, ...], judge: Any
) -> pd.DataFrame:
    """Say when the judge model is also a configuration: it grades its own answers."""
    models = {c.id: c.agent.model for c in run.launch.configs}
    table = table.copy()
    table["judge_grades_itself"] = [
        bool(uses_judge(scorers) and judge is not None and models.get(cid) == judge.model)
        for cid in table["config_id"]
    ]
    return table


def _annotate_controls(table: pd.DataFrame, run: BenchmarkRun) -> pd.DataFrame:
    """`is_control`: configs whose agent kind is a control (the oracle, the do-nothing agent)."""
    kinds = {c.id: c.agent.kind for c in run.launch.configs}
    table = table.copy()
    table["is_control"] = [
        bool(AGENT_KINDS.trait(kinds.get(str(cid), ""), "control")) for cid in table["config_id"]
    ]
    return table


def store_derived(warehouse: Warehouse, derived: Derived) -> None:
    run_id = derived.run.run_id
    for name, frame in derived.tables.items():
        warehouse.write(name, _storable(frame), run_id, "table")
    warehouse.write_json(
        layout.derived_meta(run_id),
        {
            "recommendations": derived.recommendations,
            "baseline_run_id": derived.baseline_run_id,
            "baseline_note": derived.baseline_note,
            "notes": derived.notes,
            # (what the suite's pin was: a later `bench baseline set` makes these tables stale)
            "pinned_baseline": pinned_baseline(warehouse, derived.run.suite),
        },
    )


def load_derived(warehouse: Warehouse, run_id: str) -> Derived | None:
    """The stored derived tables of a run (as the results asset last wrote them), or None.
    Newer trials or scores than the stored tables (a rescore in progress), or a baseline
    pinned since they were computed, also give None."""
    rel = layout.derived_meta(run_id)
    if not warehouse.exists(rel):
        return None
    stamp = (warehouse.root / rel).stat().st_mtime
    newest = max(
        (st.st_mtime for t in ("trials", "scores") for _, st in warehouse.listed(t, run_id)),
        default=0.0,
    )
    if newest > stamp:
        return None
    meta = warehouse.read_json(rel)
    run = load_run(run_id, warehouse)
    # (tables stored before the pin was recorded: the baseline they compared with stands in)
    if meta.get("pinned_baseline", meta["baseline_run_id"]) != pinned_baseline(
        warehouse, run.suite
    ):
        return None
    tables = {name: warehouse.read(name, run_id) for name in DERIVED_TABLES}
    return Derived(
        run,
        tables,
        meta["recommendations"],
        meta["baseline_run_id"],
        meta["baseline_note"],
        notes=meta["notes"],
    )


def _storable(frame: pd.DataFrame) -> pd.DataFrame:
    """Parquet needs one type per column: nested values (dicts, mixed lists) become JSON."""
    out = frame.copy()
    for col in out.columns:
        if out[col].dtype == object and out[col].map(lambda v: isinstance(v, dict)).any():
            out[col] = out[col].map(lambda v: json.dumps(v, default=str) if v is not None else None)
    return out


def scenario_turns(scores: pd.DataFrame) -> pd.DataFrame:
    """Per (task, config, turn) of text and scenario tasks: passed only when the turn passed in
    every repetition (pass^N), with latency, tokens and cost averaged over the repetitions."""
    import pandas as pd

    from bench_pipeline.scorers.asserts import turn_pass_hat_n

    columns = ["task_id", "config_id", "turn", "repetitions", "passes", "passed", "pass_rate"]
    rows = []
    asserts = scores[scores["scorer"] == "assert"] if not scores.empty else scores
    for r in asserts.itertuples():
        details = json.loads(r.details_json) if isinstance(r.details_json, str) else {}
        for t in details.get("turns", []):
            rows.append(
                {
                    "task_id": r.task_id,
                    "config_id": r.config_id,
                    "repetition": int(r.repetition),
                    "turn": t.get("turn"),
                    "passed": t.get("passed"),
                    "latency_ms": t.get("latency_ms"),
                    "completion_tokens": t.get("completion_tokens"),
                    "cost_usd": t.get("cost_usd"),
                    "judge_score": None,
                }
            )
    out = pd.DataFrame(turn_pass_hat_n(rows))
    return out if not out.empty else pd.DataFrame(columns=columns)


def result_verdicts(
    warehouse: Warehouse, derived: Derived, per_trial: pd.DataFrame | None = None
) -> list[verdicts.Verdict]:
    """The asset checks of a run's results (grader integrity, cost coverage, regressions).
    `per_trial`: the run's per-trial results when the caller has them (else the cached ones,
    `per_trial_results`): the latest row of each trial, which is what grader integrity reads."""
    from bench_pipeline.results import verdicts

    if per_trial is None:
        found = per_trial_results(warehouse, derived.run.run_id)
        per_trial = found[0] if found is not None else _NO_ROWS()
    tables = derived.tables
    return [
        verdicts.grader_integrity(per_trial),
        verdicts.cost_coverage(tables["config_table"]),
        verdicts.regression_tolerance(tables["regressions"], derived.baseline_run_id),
    ]
