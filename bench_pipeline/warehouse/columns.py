"""Column-projected reads of one run's rows, straight from Parquet to compact frames.

`Warehouse.read` returns every column with a Python object per string cell; at a million trials
that is gigabytes. The derived tables need a handful of columns, so `read_columns` reads only
those, in the same row order as `Warehouse.read` (files sorted, rows in file order):
low-cardinality strings come back as pandas categoricals (Parquet dictionary pages read as
dictionaries, categories sorted as `astype("category")` sorts them), other strings as
Arrow-backed strings, lists as Arrow lists. No Python object per row.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from bench_pipeline.warehouse.store import (
    CorruptFileError,
    NotThisTableError,
    Warehouse,
    _readable,
    check_keys,
    key_columns,
    listing_again,
    raise_if_vanished,
    table_schema,
)


def release_memory() -> None:
    """Hand freed memory back to the OS: Arrow's pool keeps decode buffers, and glibc's heap
    keeps the freed pages of the many ~8 MiB arrays a million rows make (its mmap threshold
    grows to their size after the first ones are freed, so later ones come from the heap and
    stay there). Without it, each step's temporaries sit on top of the last step's garbage."""
    pa.default_memory_pool().release_unused()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    try:  # glibc only; elsewhere the allocator keeps what it keeps
        return ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None


@contextlib.contextmanager
def system_memory_pool() -> Iterator[None]:
    """Arrow allocations inside the block from the system allocator (every buffer remembers
    its pool, so switching back after is safe): mimalloc, Arrow's default, keeps the pages of
    freed buffers for reuse, and at a million rows those are hundreds of MiB of peak RSS."""
    before = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(before)


def _pandas_type(arrow_type: pa.DataType) -> object:
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return pd.ArrowDtype(arrow_type)
    return None


# Few big files (a compacted run): the scanner's default read-ahead (16 batches, 4 files) holds
# ~150 MiB of decoded batches of a 5M-row table at once and is slower on 2 cores, not faster:
# one batch (a row group) ahead. Many small files (a run as written, one per partition): the
# read-ahead is what overlaps opening one file with decoding the last, keep it.
FEW_FILES = 16
_LEAN = {"batch_size": 65536, "batch_readahead": 1, "fragment_readahead": 1}
# Past FEW_FILES, files of this size or more on average are still read batch by batch (a run of
# few partitions with many tasks: 25,000 tasks x 40 partitions are 80 score files of ~1 MiB,
# whose latest cells took 0.92-1.16 s read a group at a time, 0.63-0.67 s batch by batch).
BIG_FILE = 2**19


def batch_by_batch(files: Sequence[Path]) -> bool:
    """Whether `files` are few or big enough to be read batch by batch (`iter_batches`) rather
    than a group of small files at a time (`read_groups`). Only up to GROUP_FILES files are
    looked at: more than that are the many small files of a run as written."""
    if len(files) <= FEW_FILES:
        return True
    if len(files) > GROUP_FILES:
        return False
    try:
        size = sum(path.stat().st_size for path in files)
    except OSError:  # (gone since listed: the read says so, naming it)
        return False
    return size >= BIG_FILE * len(files)


def _format(dictionary: Sequence[str], few: bool) -> ds.ParquetFileFormat:
    # pre_buffer off for big files: on, the reader fetches every row group's column chunks of a
    # file up front and keeps them while it decodes (+100 MiB on a 5M-row file)
    return ds.ParquetFileFormat(
        read_options=ds.ParquetReadOptions(dictionary_columns=list(dictionary)),
        default_fragment_scan_options=ds.ParquetFragmentScanOptions(pre_buffer=not few),
    )


def _fields(
    table: str, columns: Sequence[str], dictionary: Sequence[str]
) -> tuple[list[str], list[str], list[pa.Field]]:
    """(the columns the table has, the dictionary ones among them, the fields to read)."""
    schema = table_schema(table)
    assert schema is not None, f"{table} has no fixed schema"
    columns = [c for c in columns if c in schema.names]
    cats = [c for c in dictionary if c in columns]
    fields = [
        pa.field(c, pa.dictionary(pa.int32(), schema.field(c).type))
        if c in cats
        else schema.field(c)
        for c in columns
    ]
    return columns, cats, fields


def read_arrow(
    warehouse: Warehouse,
    table: str,
    run_id: str,
    columns: Sequence[str],
    *,
    dictionary: Sequence[str] = (),
    where: ds.Expression | None = None,
    files: Sequence[Path] | None = None,
) -> pa.Table:
    """`columns` of a run's `table` (a table with a fixed schema) as an Arrow table, rows in
    `Warehouse.read` order; `dictionary` string columns come back dictionary-encoded (one
    dictionary per batch: Parquet's own dictionary pages when the writer kept them, so a
    column of repeated trial ids costs an int32 per row, not a string). Empty with those
    columns when nothing was written yet. `files`: the run's files as listed before."""
    columns, cats, fields = _fields(table, columns, dictionary)
    if files is not None:
        return _read_files(list(files), columns, cats, fields, where)
    # listed here: listed again when one was replaced before it was read
    return listing_again(
        lambda: _read_files(warehouse.files(table, run_id), columns, cats, fields, where)
    )


def _read_files(
    files: list[Path],
    columns: list[str],
    cats: list[str],
    fields: list[pa.Field],
    where: ds.Expression | None,
) -> pa.Table:
    if not files:
        return pa.schema(fields).empty_table()
    if len(files) > FEW_FILES:
        return pa.concat_tables(_groups(files, columns, cats, fields, where))
    try:
        data = ds.dataset(
            [str(f) for f in files], schema=pa.schema(fields), format=_format(cats, True)
        )
        out = data.to_table(columns=columns, filter=where, **_LEAN)
    except Exception as exc:
        _raise_corrupt(files, exc)
        raise
    check_keys(out, files)
    return out


def read_groups(
    table: str, files: Sequence[Path], columns: Sequence[str], dictionary: Sequence[str] = ()
) -> Iterator[pa.Table]:
    """`read_arrow`'s rows of `files` (a run's files of `table`, as listed before), in the same
    order and with the same fields, as a few tables of up to `GROUP_FILES` files each, so that
    a reader of many small files reduces them a group at a time instead of holding them all."""
    columns, cats, fields = _fields(table, columns, dictionary)
    yield from _groups(list(files), columns, cats, fields, None)


# Many small files (a run as written: one per partition and rescore, one per trial) are read
# GROUP_FILES at a time, each group's chunks joined before the next group is read. Read at once,
# the scanner keeps every file's chunk of a few hundred rows (a dozen small buffers, each with
# its allocation's overhead) and their page buffers: at the product's own layout of a million
# trials (60,000 files) that was 3.3 GiB of peak RSS; in groups of 1,024 files 522 MiB, of 256
# 475 MiB, in the same time (`perf/analysis.py --layout partition`: ~1.3 ms a file either way,
# the files' count is the cost). A group of hundreds still overlaps opening one file with
# decoding another. A group also ends at GROUP_BYTES on disk: a run of few partitions with many
# tasks has tens of big files (25,000 tasks x 40 partitions: 80 score files of 1 MiB, 5 million
# rows), and one group of all of them peaked at 1.1 GiB.
GROUP_FILES = 256
GROUP_BYTES = 4 * 2**20


def _file_groups(files: list[Path]) -> Iterator[list[Path]]:
    """`files` in order, in groups of at most GROUP_FILES files and (but for a bigger file
    alone) GROUP_BYTES on disk."""
    group: list[Path] = []
    size = 0
    for path in files:
        try:
            bytes_ = path.stat().st_size
        except OSError:  # (gone since listed: the read says so, naming it)
            bytes_ = 0
        if group and (len(group) == GROUP_FILES or size + bytes_ > GROUP_BYTES):
            yield group
            group, size = [], 0
        group.append(path)
        size += bytes_
    if group:
        yield group


def _groups(
    files: list[Path],
    columns: list[str],
    cats: list[str],
    fields: list[pa.Field],
    where: ds.Expression | None,
) -> Iterator[pa.Table]:
    schema = pa.schema(fields)
    if not files:
        yield schema.empty_table()
        return
    groups = list(_file_groups(files))
    for group in groups:
        try:
            data = ds.dataset([str(f) for f in group], schema=schema, format=_format(cats, False))
            part = data.to_table(columns=columns, filter=where)
        except Exception as exc:
            _raise_corrupt(group, exc)
            raise
        check_keys(part, group)
        # (one chunk per column: dictionaries unified, the files' small buffers freed)
        joined = part.combine_chunks()
        del part, data
        if len(groups) > 1:  # (more groups to come: their reads reuse these pages)
            release_memory()
        yield joined


def _raise_corrupt(files: Sequence[Path], exc: Exception) -> None:
    """Raise VanishedFileError for the first of `files` gone since they were listed, else
    CorruptFileError naming the first that is not readable Parquet, when one is the cause of
    `exc` (else return: the caller raises `exc`)."""
    raise_if_vanished(files, exc)
    bad = [f for f in files if not _readable(f)]
    if bad:
        raise CorruptFileError(bad[0], exc) from None


def key_rows(keys: pa.ChunkedArray, values: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """`values` (strings, e.g. the trials' ids) and the dictionaries of `keys` (a
    dictionary-encoded column, e.g. the score rows' trial ids) looked up among `values`: (for
    every value the position of the first value equal to it, so `values` are unique exactly
    when it is 0, 1, 2, ...; for every row of `keys` the position of the first equal value, -1
    when none or null), both int32. Only the chunks' dictionaries are looked up, each distinct key
    once per chunk, then their indices mapped: no string per key row is ever made."""
    out = np.full(len(keys), -1, dtype=np.int32)
    n = len(values)
    if n == 0:
        return np.zeros(0, dtype=np.int32), out
    chunks = [c for c in keys.chunks if len(c)]
    kind = values.type
    dicts = [c.dictionary for c in chunks]
    if any(d.type != kind for d in dicts):  # (string vs large_string: one type to compare)
        kind = pa.large_string()
        dicts = [d.cast(kind) for d in dicts]
        values = values.cast(kind)
    value_set = values.combine_chunks()
    # Unique values (the usual case) are their own first positions; only repeated ones (resumed
    # trials) are looked up among themselves. One hash table at a time: at a million ids each
    # is ~50 MiB, and the peak RSS of the route is made of such temporaries.
    if len(pc.unique(value_set)) == n:
        first = np.arange(n, dtype=np.int32)
    else:
        first = _positions(pc.index_in(value_set, value_set=value_set))
    if not dicts:
        return first, out
    found = _positions(pc.index_in(pa.concat_arrays(dicts), value_set=value_set))
    del dicts, value_set
    start, base = 0, 0
    for chunk in chunks:
        idx = _indices(chunk)  # nulls come back as 0 ...
        part = found[base + idx] if len(chunk.dictionary) else np.full(len(chunk), -1, np.int32)
        if chunk.null_count:  # ... so mask them
            part = np.where(chunk.is_valid().to_numpy(zero_copy_only=False), part, -1)
        out[start : start + len(chunk)] = part
        start += len(chunk)
        base += len(chunk.dictionary)
    return first, out


class TrialKeys:
    """The trials of one run looked up by (task_id, config_id, repetition), integers all the
    way, instead of by hashing their id strings (`key_rows`: ~1 s at a million trials here). A
    trial's id is `<task>/<config>/<rep>` (warehouse/schemas.py), and `of` checks that every
    trial's id is its triple written out, so the triple names the same row as the id (or,
    with `check_ids=False`, leaves that check to `id_check()`, for a thread of the caller's
    while the score rows are placed: at a million trials it is ~0.1 s of Arrow compute). A score
    row carries its trial's id and triple, both copied from the trial row when it was scored:
    it is placed by the triple, and its id is not read at all (decoding five million ids cost
    more than the lookup saved). Where a trial's id is not its triple, or a score row names
    no trial, `of` or `rows` gives None and the caller looks the ids up as strings.

    `first[i]`: the position of the first trial with trial i's id (as `key_rows` gives it)."""

    # The lookup table has a slot per (task, config, repetition) of the run's ranges: a run is
    # that grid, but a sparse one (a huge repetition number) is looked up by strings instead.
    MAX_SLOTS_PER_TRIAL = 8

    def __init__(
        self,
        tasks: pa.Array,
        configs: pa.Array,
        rep_min: int,
        rep_span: int,
        lookup: np.ndarray,
        first: np.ndarray,
        ids: pa.ChunkedArray,
        id_check: Callable[[], bool],
    ) -> None:
        self.tasks, self.configs = tasks, configs
        self.rep_min, self.rep_span = rep_min, rep_span
        self.lookup, self.first, self.ids = lookup, first, ids
        self._id_check = id_check
        # per key column, the last batch dictionary looked up and its positions
        self._maps: dict[str, tuple[pa.Array, np.ndarray]] = {}
        # per key column, each known value's position (made when a small dictionary is met)
        self._lookups: dict[str, dict[object, int]] = {}

    @classmethod
    def of(
        cls, trials: pd.DataFrame, ids: pa.ChunkedArray, *, check_ids: bool = True
    ) -> TrialKeys | None:
        """Keys of `trials` (a frame with categorical task_id and config_id and an integer
        repetition, as `to_frame` makes it) whose ids are `ids` (same rows); None when a
        triple is missing, an id is not its triple (unless `check_ids` is False: the caller
        runs `id_check()` before it trusts the keys), or the grid would be too sparse."""
        n = len(trials)
        if n == 0 or len(ids) != n or ids.null_count:
            return None
        task, config = trials["task_id"], trials["config_id"]
        if not isinstance(task.dtype, pd.CategoricalDtype) or not isinstance(
            config.dtype, pd.CategoricalDtype
        ):
            return None
        rep = trials["repetition"]
        if rep.isna().any():
            return None
        t_codes = task.cat.codes.to_numpy()
        c_codes = config.cat.codes.to_numpy()
        if (t_codes < 0).any() or (c_codes < 0).any():
            return None
        reps = rep.to_numpy(dtype=np.int64)
        rep_min = int(reps.min())
        rep_span = int(reps.max()) - rep_min + 1
        tasks = pa.array(task.cat.categories.astype(str), pa.string())
        configs = pa.array(config.cat.categories.astype(str), pa.string())
        slots = len(tasks) * len(configs) * rep_span
        if slots > cls.MAX_SLOTS_PER_TRIAL * n + 1024:
            return None
        # (the frame's own arrays, narrow codes and all: no copy held while a thread checks)
        rep_values = rep.to_numpy() if isinstance(rep.dtype, np.dtype) else reps
        check = functools.partial(
            ids_are_triples, ids, tasks, configs, t_codes, c_codes, rep_values
        )
        if check_ids:
            if not check():
                return None
            check = _CHECKED
        # (int32 keys while the grid fits: at a million trials each int64 array is 8 MiB more)
        width = np.int32 if slots < 2**31 else np.int64
        t_codes, c_codes = t_codes.astype(width), c_codes.astype(width)
        reps = reps.astype(width)
        key = (t_codes * len(configs) + c_codes) * rep_span + (reps - rep_min)
        lookup = np.full(slots, -1, dtype=np.int32)
        lookup[key] = np.arange(n, dtype=np.int32)
        first = lookup[key]
        if not np.array_equal(first, np.arange(n, dtype=np.int32)):
            # a repeated trial (resumed): its first row, as key_rows gives it
            _, at, inverse = np.unique(key, return_index=True, return_inverse=True)
            first = at[inverse].astype(np.int32)
            lookup[key] = first
        return cls(tasks, configs, rep_min, rep_span, lookup, first, ids, check)

    def id_check(self) -> Callable[[], bool]:
        """Whether every trial's id is its triple, as a call that holds its own arrays (safe
        on another thread while the keys are used); `of` made the check already (and this
        says so at once) unless `check_ids` was False."""
        return self._id_check

    def release(self) -> None:
        """Free the lookup and the ids once every score row is placed (a million trials:
        ~35 MiB and ~30 MiB)."""
        self.lookup = self.first = np.zeros(0, dtype=np.int32)
        self.ids = pa.chunked_array([], pa.string())
        self._id_check = _RELEASED
        self._maps.clear()
        self._lookups.clear()

    def rows(self, batch: pa.RecordBatch) -> np.ndarray | None:
        """The trial row (its id's first) of each of `batch`'s rows, from its task_id,
        config_id (dictionary-encoded) and repetition; None when a row names no trial."""
        n_b = batch.num_rows
        if n_b == 0:
            return np.zeros(0, dtype=np.int32)
        cols = [batch.column(c) for c in ("task_id", "config_id", "repetition")]
        if any(c.null_count for c in cols):
            return None
        task, config, rep = cols
        # the key's task and config parts are looked up per dictionary entry (a few), then
        # gathered per row: int32 while the grid fits, no per-row range check but the
        # repetition's (a dictionary entry naming no trial is checked row by row)
        configs, span = len(self.configs), self.rep_span
        width = np.int32 if len(self.lookup) < 2**31 else np.int64
        t_map = self._positions_in("task_id", task.dictionary, self.tasks).astype(width)
        c_map = self._positions_in("config_id", config.dictionary, self.configs).astype(width)
        t_idx = task.indices.to_numpy(zero_copy_only=False)
        c_idx = config.indices.to_numpy(zero_copy_only=False)
        if (t_map < 0).any() and (t_map[t_idx] < 0).any():
            return None
        if (c_map < 0).any() and (c_map[c_idx] < 0).any():
            return None
        r = rep.to_numpy(zero_copy_only=False)
        if len(r) and (int(r.min()) < self.rep_min or int(r.max()) >= self.rep_min + span):
            return None
        key = np.where(t_map >= 0, t_map * (configs * span), 0)[t_idx]
        key += np.where(c_map >= 0, c_map * span, 0)[c_idx]
        key += (r - self.rep_min).astype(width, copy=False)  # (in range: checked above)
        rows = self.lookup[key]
        return None if (rows < 0).any() else rows

    def _positions_in(self, column: str, dictionary: pa.Array, known: pa.Array) -> np.ndarray:
        """Where each of a batch's dictionary entries is in `known` (-1: not there). A batch
        often has the last one's dictionary (the configs nearly always): that is a byte
        compare. Otherwise a few entries, or entries against a few known values, are looked
        up in a dict of `known` made once; many of both by Arrow's index_in, which hashes
        all of `known` on each call (25,000 task names: ~1 ms)."""
        last = self._maps.get(column)
        if last is not None and last[0].equals(dictionary):
            return last[1]
        if len(dictionary) * _FEW_OF <= len(known) or len(known) <= _FEW_KNOWN:
            # (a batch's ~330 tasks of 25,000: ~0.03 ms, where index_in took ~1 ms a batch,
            # 80 ms an analysis, and ~0.25 ms however small both are, as for the configs)
            lookup = self._lookups.get(column)
            if lookup is None:
                values = known.to_pylist()
                # (the first position of a repeated value, as index_in gives it)
                lookup = dict(zip(values[::-1], range(len(values) - 1, -1, -1), strict=True))
                self._lookups[column] = lookup
            get = lookup.get
            found = np.fromiter(
                (get(v, -1) for v in dictionary.to_pylist()), dtype=np.int32, count=len(dictionary)
            )
        else:
            found = _positions(pc.index_in(dictionary, value_set=known))
        self._maps[column] = (dictionary, found)
        return found


def _CHECKED() -> bool:  # noqa: N802 (reads as the constant it stands for)
    return True


def _RELEASED() -> bool:  # noqa: N802
    raise RuntimeError("TrialKeys.id_check after release()")


def ids_are_triples(
    ids: pa.ChunkedArray,
    tasks: pa.Array,
    configs: pa.Array,
    t_codes: np.ndarray,
    c_codes: np.ndarray,
    reps: np.ndarray,
    slice_rows: int = 1 << 16,
) -> bool:
    """Whether `ids[i]` is `tasks[t_codes[i]]/configs[c_codes[i]]/reps[i]` for every i,
    written out a slice at a time (a million ids written at once would be ~30 MiB more)."""
    ids = ids.cast(pa.string())
    for start in range(0, len(t_codes), slice_rows):
        end = start + slice_rows
        written = pc.binary_join_element_wise(
            tasks.take(pa.array(t_codes[start:end])),
            configs.take(pa.array(c_codes[start:end])),
            pc.cast(pa.array(reps[start:end]), pa.string()),
            "/",
        )
        if not pc.all(pc.equal(written, ids.slice(start, end - start))).as_py():
            return False
    return True


# a batch dictionary of at most 1/_FEW_OF of the known values, or of at most _FEW_KNOWN known
# values, is looked up value by value
_FEW_OF = 16
_FEW_KNOWN = 1024


def _positions(found: pa.Array) -> np.ndarray:
    return pc.fill_null(found, -1).to_numpy(zero_copy_only=False).astype(np.int32, copy=False)


def _indices(array: pa.DictionaryArray) -> np.ndarray:
    """The dictionary indices as integers, 0 where null (numpy has no null integer: Arrow
    would make them floats)."""
    idx = array.indices
    return (pc.fill_null(idx, 0) if idx.null_count else idx).to_numpy(zero_copy_only=False)


def one_chunk(table: pa.Table, names: Sequence[str]) -> pa.Table:
    """`table` with each of its columns `names` joined into one chunk (a table read from many
    files or row groups has a chunk per group; the others are left as they are)."""
    for name in names:
        i = table.schema.get_field_index(name)
        if i >= 0 and table.column(i).num_chunks > 1:
            table = table.set_column(i, table.field(i), table.column(i).combine_chunks())
    return table


def to_frame(arrow: pa.Table, *, unsorted: Sequence[str] = ()) -> pd.DataFrame:
    """An Arrow table from `read_arrow` as a compact frame: dictionary columns as categoricals
    with sorted categories (as `astype("category")` sorts them; `unsorted` ones in the order
    met), lists as Arrow lists, other strings Arrow-backed. Frees the Arrow buffers."""
    cats = [f.name for f in arrow.schema if pa.types.is_dictionary(f.type)]
    big = arrow.nbytes > 2**26
    # split_blocks + self_destruct: each Arrow column is freed as soon as it is converted
    frame = arrow.to_pandas(types_mapper=_pandas_type, split_blocks=True, self_destruct=True)
    del arrow
    if big:  # hand the decode buffers back to the OS now: the allocator would keep them, and
        # at a million trials they are hundreds of MiB the tables computed next cannot reuse
        release_memory()
    for col in cats:
        s = frame[col]
        if not isinstance(s.dtype, pd.CategoricalDtype):
            s = s.astype("category")
        if col not in unsorted:
            ordered = s.cat.categories.sort_values()
            if not s.cat.categories.equals(ordered):
                s = s.cat.reorder_categories(ordered)
        frame[col] = s
    return frame


def read_columns(
    warehouse: Warehouse,
    table: str,
    run_id: str,
    columns: Sequence[str],
    *,
    categorical: Sequence[str] = (),
    unsorted: Sequence[str] = (),
    where: ds.Expression | None = None,
    files: Sequence[Path] | None = None,
) -> pd.DataFrame:
    """`columns` of a run's `table` (a table with a fixed schema); `categorical` columns (string
    ones) as categoricals with sorted categories, `unsorted` ones as categoricals in the order
    met (cheaper for many distinct values, e.g. trial ids used only as join keys). Empty with
    those columns when nothing was written yet. `files`: the run's files as listed before
    (`warehouse.files(table, run_id)`), so that two reads see the same files."""
    arrow = read_arrow(
        warehouse,
        table,
        run_id,
        columns,
        dictionary=[*categorical, *unsorted],
        where=where,
        files=files,
    )
    return to_frame(arrow, unsorted=unsorted)


def iter_batches(
    warehouse: Warehouse,
    table: str,
    run_id: str,
    columns: Sequence[str],
    *,
    dictionary: Sequence[str] = (),
    files: Sequence[Path] | None = None,
) -> Iterator[pa.RecordBatch]:
    """`read_arrow`'s rows as record batches, in the same order and with the same fields (a
    column a file lacks comes back null), so that a reader can reduce them one at a time
    instead of holding them all. Few or big files (`batch_by_batch`) are read file by file, a row group at a time,
    on demand: the dataset scanner decodes ahead in the background while a slow consumer works
    and so, at a million trials in one file, holds most of the table after all. Many small
    files go through the scanner, whose read-ahead is then a few small files."""

    columns, cats, fields = _fields(table, columns, dictionary)
    files = list(files) if files is not None else warehouse.files(table, run_id)
    if not batch_by_batch(files):
        try:
            data = ds.dataset(
                [str(f) for f in files], schema=pa.schema(fields), format=_format(cats, False)
            )
            for batch in data.to_batches(columns=columns):
                check_keys(batch, files)
                yield batch
        except Exception as exc:
            _raise_corrupt(files, exc)
            raise
        return
    yield from _ahead(_file_batches(files, columns, cats, fields))


def row_count(files: Sequence[Path]) -> int:
    """How many rows `files` hold, from their footers (nothing decoded)."""
    import pyarrow.parquet as pq

    total = 0
    for path in files:
        try:
            total += pq.read_metadata(path).num_rows
        except Exception as exc:
            _raise_corrupt([path], exc)
            raise
    return total


def _ahead(batches: Iterator[pa.RecordBatch], depth: int = 2) -> Iterator[pa.RecordBatch]:
    """`batches`, decoded by a thread up to `depth` batches ahead of the consumer: Arrow
    decodes without the GIL while the consumer's numpy runs, and the bound keeps memory at a
    few batches (an error in the thread is raised here, in order)."""
    import queue
    import threading

    box: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()
    done = object()

    def offer(item: object) -> bool:
        while not stop.is_set():
            try:
                box.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False  # the consumer has gone

    def produce() -> None:
        try:
            for batch in batches:
                if not offer(batch):
                    return
            offer(done)
        except BaseException as exc:  # handed to the consumer, raised there
            offer(exc)

    worker = threading.Thread(target=produce, name="parquet-read-ahead", daemon=True)
    worker.start()
    try:
        while True:
            item = box.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()  # the consumer stopped early (a fall back): let the thread end
        worker.join()


def _file_batches(
    files: list[Path], columns: list[str], cats: list[str], fields: list[pa.Field]
) -> Iterator[pa.RecordBatch]:
    """iter_batches' few-files reading: file by file, a row group at a time, on demand."""
    import pyarrow.parquet as pq

    for path in files:
        try:
            handle = pq.ParquetFile(path, read_dictionary=cats, pre_buffer=False)
            have = set(handle.schema_arrow.names)
            missing = [k for k in key_columns(columns) if k not in have]
            if missing:
                raise CorruptFileError(path, NotThisTableError(missing))
            for batch in handle.iter_batches(
                batch_size=_LEAN["batch_size"], columns=[c for c in columns if c in have]
            ):
                yield pa.RecordBatch.from_arrays(
                    [
                        (
                            batch.column(f.name)
                            if batch.schema.field(f.name).type == f.type
                            else batch.column(f.name).cast(f.type)
                        )
                        if f.name in have
                        else pa.nulls(batch.num_rows, f.type)
                        for f in fields
                    ],
                    schema=pa.schema(fields),
                )
        except Exception as exc:
            _raise_corrupt([path], exc)
            raise


def dictionary_values(column: pa.ChunkedArray) -> set[object]:
    """The distinct non-null values of a dictionary-encoded column (dictionaries may hold
    entries no row uses: only the used ones count)."""
    out: set[object] = set()
    for chunk in column.chunks:
        if len(chunk) == 0 or chunk.null_count == len(chunk):
            continue
        if len(chunk.dictionary) == 1:  # (a run's file: one run id, nothing to count)
            out.add(chunk.dictionary[0].as_py())
            continue
        valid = chunk.indices.drop_null().to_numpy(zero_copy_only=False)
        out.update(chunk.dictionary.take(pa.array(np.unique(valid))).to_pylist())
    return out
