"""Dagster metadata of bench tables: column schemas and inline tables the UI renders as such.

`table_schema(frame)` derives a `TableSchema` from a DataFrame's dtypes (descriptions from
`COLUMN_DOCS`); `table_value(frame, columns)` is a `MetadataValue.table` of the curated
columns (at most `MAX_ROWS` rows, the count says when cut); `rows_table(rows, columns)` the
same from row dicts with a fixed schema.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import dagster as dg

if TYPE_CHECKING:  # pandas is imported where a frame is described, not when definitions load
    import pandas as pd

MAX_ROWS = 200  # rows of an inline table; the full table is in the warehouse
OWNERS = ["team:bench"]
KINDS = {"python", "parquet", "duckdb"}
COLUMN_DOCS = {
    "run_id": "benchmark run",
    "config_id": "configuration",
    "task_id": "task",
    "overall": "mean per-trial overall score in [0, 1]",
    "overall_ci_low": "95% CI low (clustered by task)",
    "overall_ci_high": "95% CI high (clustered by task)",
    "pass_rate": "share of scored trials whose primary scorer passed",
    "pass_hat_k": "pass^k: share of tasks passed in every one of k repetitions",
    "avg_cost_usd": "mean agent cost per trial over trials with known cost",
    "cost_coverage": "share of trials whose cost is known",
    "avg_duration_seconds": "mean trial wall time",
    "trials": "trials",
    "trials_succeeded": "trials whose agent finished within its limits",
    "delta_overall": "overall minus the baseline run's",
    "delta_avg_cost_usd": "avg cost minus the baseline run's",
    "on_frontier": "no other plotted config is at least as good on both axes",
    "excluded_reason": "why the config is not plotted",
}


def _kind(dtype: Any) -> str:
    import pandas as pd

    if pd.api.types.is_bool_dtype(dtype):
        return "bool"
    if pd.api.types.is_integer_dtype(dtype):
        return "int"
    if pd.api.types.is_float_dtype(dtype):
        return "float"
    if pd.api.types.is_datetime64_any_dtype(dtype):
        return "timestamp"
    return "string"


def table_schema(frame: pd.DataFrame, columns: Iterable[str] | None = None) -> dg.TableSchema:
    cols = [c for c in (columns or frame.columns) if c in frame.columns]
    return dg.TableSchema(
        columns=[
            dg.TableColumn(str(c), _kind(frame[c].dtype), description=COLUMN_DOCS.get(str(c)))
            for c in cols
        ]
    )


def _cell(value: Any, kind: str) -> Any:
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value))[:300]
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if not isinstance(value, str | bool | int | float):
        import pandas as pd  # NaT, pd.NA, numpy scalars: only frames carry them

        if pd.isna(value):
            return None
    if kind == "bool":
        return bool(value)
    if kind == "int":
        return int(value)
    if kind == "float":
        return round(float(value), 6)
    return str(value)[:300]


def table_value(frame: pd.DataFrame, columns: Iterable[str] | None = None) -> dg.TableMetadataValue:
    schema = table_schema(frame, columns)
    kinds = {c.name: c.type for c in schema.columns}
    records = [
        dg.TableRecord({c: _cell(row[c], kinds[c]) for c in kinds})
        for _, row in frame.head(MAX_ROWS).iterrows()
    ]
    return dg.MetadataValue.table(records, schema=schema)


def rows_table(
    rows: list[Mapping[str, Any]], columns: Mapping[str, tuple[str, str]]
) -> dg.TableMetadataValue:
    """`columns`: name -> (type, description)."""
    schema = dg.TableSchema(
        columns=[dg.TableColumn(n, t, description=d) for n, (t, d) in columns.items()]
    )
    records = [
        dg.TableRecord({n: _cell(r.get(n), t) for n, (t, _) in columns.items()})
        for r in rows[:MAX_ROWS]
    ]
    return dg.MetadataValue.table(records, schema=schema)


def schema_metadata(schema: dg.TableSchema, rows: int) -> dict[str, Any]:
    """`dagster/column_schema` and `dagster/row_count`, as the UI's Columns view reads them."""
    return {"dagster/column_schema": schema, "dagster/row_count": rows}
