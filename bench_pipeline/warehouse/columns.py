"""Column-projected reads of one run's rows, straight from Parquet to compact frames.

`Warehouse.read` returns every column with a Python object per string cell; at a million trials
that is gigabytes. The derived tables need a handful of columns, so `read_columns` reads only
those, in the same row order as `Warehouse.read` (files sorted, rows in file order):
low-cardinality strings come back as pandas categoricals (Parquet dictionary pages read as
dictionaries, categories sorted as `astype("category")` sorts them), other strings as
Arrow-backed strings, lists as Arrow lists. No Python object per row.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds

from bench_pipeline.warehouse.store import CorruptFileError, Warehouse, _readable, table_schema


def _pandas_type(arrow_type: pa.DataType) -> object:
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return pd.ArrowDtype(arrow_type)
    return None


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
    schema = table_schema(table)
    assert schema is not None, f"{table} has no fixed schema"
    columns = [c for c in columns if c in schema.names]
    cats = [c for c in (*categorical, *unsorted) if c in columns]
    fields = [
        pa.field(c, pa.dictionary(pa.int32(), schema.field(c).type))
        if c in cats
        else schema.field(c)
        for c in columns
    ]
    files = list(files) if files is not None else warehouse.files(table, run_id)
    if not files:
        arrow = pa.schema(fields).empty_table()
    else:
        fmt = ds.ParquetFileFormat(read_options=ds.ParquetReadOptions(dictionary_columns=cats))
        try:
            arrow = ds.dataset([str(f) for f in files], schema=pa.schema(fields), format=fmt)
            arrow = arrow.to_table(columns=columns, filter=where)
        except Exception as exc:
            bad = [f for f in files if not _readable(f)]
            if bad:
                raise CorruptFileError(bad[0], exc) from None
            raise
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
