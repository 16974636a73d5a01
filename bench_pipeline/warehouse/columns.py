"""Column-projected reads of one run's rows, straight from Parquet to compact frames.

`Warehouse.read` returns every column with a Python object per string cell; at a million trials
that is gigabytes. The derived tables need a handful of columns, so `read_columns` reads only
those, in the same row order as `Warehouse.read` (files sorted, rows in file order):
low-cardinality strings come back as pandas categoricals (Parquet dictionary pages read as
dictionaries, categories sorted as `astype("category")` sorts them), other strings as
Arrow-backed strings, lists as Arrow lists. No Python object per row.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from bench_pipeline.warehouse.store import CorruptFileError, Warehouse, _readable, table_schema


def _pandas_type(arrow_type: pa.DataType) -> object:
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return pd.ArrowDtype(arrow_type)
    return None


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
    files = list(files) if files is not None else warehouse.files(table, run_id)
    if not files:
        return pa.schema(fields).empty_table()
    fmt = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=cats))
    try:
        data = ds.dataset([str(f) for f in files], schema=pa.schema(fields), format=fmt)
        return data.to_table(columns=columns, filter=where)
    except Exception as exc:
        bad = [f for f in files if not _readable(f)]
        if bad:
            raise CorruptFileError(bad[0], exc) from None
        raise


def join_codes(values: pa.ChunkedArray, keys: pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """One hash pass over `values` (strings, e.g. the trial ids of the trials) and the
    dictionaries of `keys` (a dictionary-encoded column, e.g. the score rows' trial ids):
    (int32 code of every value, int32 code of every key row; -1 for null), equal codes for
    equal strings, and a value's code is the position of the first value equal to it (so
    `values` are unique exactly when their codes are 0, 1, 2, ...)."""
    chunks = [c for c in keys.chunks if len(c)]
    parts = [values.cast(pa.large_string()).combine_chunks()]
    parts += [c.dictionary.cast(pa.large_string()) for c in chunks]
    both = pa.concat_arrays(parts) if len(parts) > 1 else parts[0]
    encoded = pc.dictionary_encode(both)
    codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int32)
    if both.null_count:
        codes[~both.is_valid().to_numpy(zero_copy_only=False)] = -1
    n = len(values)
    key_codes = np.full(len(keys), -1, dtype=np.int32)
    start, base = 0, n
    for chunk in chunks:
        idx = chunk.indices.to_numpy(zero_copy_only=False)  # nulls come back as 0 ...
        part = codes[base + idx] if len(chunk.dictionary) else np.full(len(chunk), -1, np.int32)
        if chunk.null_count:  # ... so mask them
            part = np.where(chunk.is_valid().to_numpy(zero_copy_only=False), part, -1)
        key_codes[start : start + len(chunk)] = part
        start += len(chunk)
        base += len(chunk.dictionary)
    return codes[:n], key_codes


def to_frame(arrow: pa.Table, *, unsorted: Sequence[str] = ()) -> pd.DataFrame:
    """An Arrow table from `read_arrow` as a compact frame: dictionary columns as categoricals
    with sorted categories (as `astype("category")` sorts them; `unsorted` ones in the order
    met), lists as Arrow lists, other strings Arrow-backed. Frees the Arrow buffers."""
    cats = [f.name for f in arrow.schema if pa.types.is_dictionary(f.type)]
    # split_blocks + self_destruct: each Arrow column is freed as soon as it is converted
    frame = arrow.to_pandas(types_mapper=_pandas_type, split_blocks=True, self_destruct=True)
    del arrow
    # Hand the decode buffers back to the OS now: the allocator would keep them, and at a
    # million trials they are hundreds of MiB the tables computed next cannot reuse.
    pa.default_memory_pool().release_unused()
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
    """`read_arrow`'s rows as record batches, in the same order (the scanner yields them in
    file and row order), so a reader can reduce them one at a time instead of holding all."""
    columns, cats, fields = _fields(table, columns, dictionary)
    files = list(files) if files is not None else warehouse.files(table, run_id)
    if not files:
        return
    fmt = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=cats))
    try:
        data = ds.dataset([str(f) for f in files], schema=pa.schema(fields), format=fmt)
        yield from data.to_batches(columns=columns)
    except Exception as exc:
        bad = [f for f in files if not _readable(f)]
        if bad:
            raise CorruptFileError(bad[0], exc) from None
        raise


def dictionary_values(column: pa.ChunkedArray) -> set[object]:
    """The distinct non-null values of a dictionary-encoded column (dictionaries may hold
    entries no row uses: only the used ones count)."""
    out: set[object] = set()
    for chunk in column.chunks:
        valid = chunk.indices.drop_null().to_numpy(zero_copy_only=False)
        if len(valid):
            out.update(chunk.dictionary.take(pa.array(np.unique(valid))).to_pylist())
    return out
