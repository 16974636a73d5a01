"""The column readers of the derived route (bench_pipeline/warehouse/columns.py) on real Parquet
files in a real warehouse: the batch reader gives read_arrow's rows in the same order, fills a
column an older file lacks with nulls, stops cleanly when its consumer stops, names a truncated
file; key_rows maps dictionary-encoded ids to rows (the first of a repeated id), and null and
unknown ids to -1."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from bench_pipeline.warehouse.columns import FEW_FILES, iter_batches, key_rows, read_arrow
from bench_pipeline.warehouse.store import CorruptFileError, Warehouse

RUN = "perf-20250101T000000-0000"
COLUMNS = ["run_id", "trial_id", "scorer", "weight", "value", "scored_at"]
DICTIONARY = ["run_id", "trial_id", "scorer"]


def _rows(n: int, start: int = 0) -> list[dict]:
    return [
        {
            "run_id": RUN,
            "trial_id": f"t/{(start + i) % 7}",
            "scorer": "checks" if i % 2 else "ci",
            "weight": 1.0,
            "status": "scored",
            "value": float(start + i),
        }
        for i in range(n)
    ]


def _warehouse(root: Path, files: int, rows: int = 50) -> Warehouse:
    wh = Warehouse(root)
    for k in range(files):
        wh.write("scores", _rows(rows, k * rows), RUN, f"cfg/rep{k:03d}/initial")
    return wh


@pytest.mark.parametrize("files", [3, FEW_FILES + 5])  # file by file, and the dataset scanner
def test_batches_are_read_arrows_rows_in_order(tmp_path: Path, files: int) -> None:
    wh = _warehouse(tmp_path, files)
    whole = read_arrow(wh, "scores", RUN, COLUMNS, dictionary=DICTIONARY)
    batches = list(iter_batches(wh, "scores", RUN, COLUMNS, dictionary=DICTIONARY))
    joined = pa.Table.from_batches(batches).combine_chunks()
    assert joined.schema == whole.schema
    assert joined.to_pylist() == whole.to_pylist()
    assert len(joined) == files * 50


def test_a_column_an_older_file_lacks_comes_back_null(tmp_path: Path) -> None:
    wh = _warehouse(tmp_path, 2)
    old = tmp_path / "scores" / RUN / "cfg" / "old.parquet"
    pq.write_table(pa.table({"run_id": [RUN], "trial_id": ["t/1"], "scorer": ["ci"]}), old)
    rows = pa.Table.from_batches(
        list(iter_batches(wh, "scores", RUN, COLUMNS, dictionary=DICTIONARY))
    ).to_pylist()
    lacking = [r for r in rows if r["weight"] is None]
    assert len(rows) == 101 and lacking == [
        {"run_id": RUN, "trial_id": "t/1", "scorer": "ci", "weight": None, "value": None}
        | {"scored_at": None}
    ]


def test_a_consumer_that_stops_early_leaves_no_reader_behind(tmp_path: Path) -> None:
    import threading

    wh = _warehouse(tmp_path, 6, rows=70_000)  # several batches per file
    batches = iter_batches(wh, "scores", RUN, COLUMNS, dictionary=DICTIONARY)
    first = next(batches)
    assert first.num_rows > 0
    batches.close()  # what `break` + `del` do
    assert not [t for t in threading.enumerate() if t.name == "parquet-read-ahead"]


def test_a_truncated_file_is_named(tmp_path: Path) -> None:
    wh = _warehouse(tmp_path, 3)
    victim = wh.files("scores", RUN)[1]
    victim.write_bytes(victim.read_bytes()[:40])
    with pytest.raises(CorruptFileError) as err:
        list(iter_batches(wh, "scores", RUN, COLUMNS, dictionary=DICTIONARY))
    assert str(victim) in str(err.value)


def test_key_rows_maps_each_chunks_dictionary() -> None:
    keys = pa.chunked_array(
        [
            pa.array(["b", None, "a", "zz", "b"]).dictionary_encode(),
            pa.array(["c", "a"]).dictionary_encode(),
        ]
    )
    # the trials' ids as large strings: compared as one type
    large = pa.large_string()
    values = pa.chunked_array([pa.array(["a", "b"], type=large), pa.array(["c"], type=large)])
    first, rows = key_rows(keys, values)
    assert first.tolist() == [0, 1, 2]  # unique values: their own positions
    assert rows.tolist() == [1, -1, 0, -1, 1, 2, 0]
    # a repeated value (a resumed trial): its first position, for it and for the keys
    first, rows = key_rows(keys, pa.chunked_array([pa.array(["a", "b", "a", "c"])]))
    assert first.tolist() == [0, 1, 0, 3] and rows.tolist() == [1, -1, 0, -1, 1, 3, 0]
    empty = pa.chunked_array([], type=pa.string())
    assert key_rows(keys, empty)[1].tolist() == [-1] * 7
    assert key_rows(pa.chunked_array([], type=keys.type), values)[1].dtype == np.int32


def test_a_frame_with_arrow_columns_is_written_and_read_back(tmp_path: Path) -> None:
    """A nested Arrow column (the grid's lists of trial ids) reads back as the lists a column
    of Python lists gives; a flat one keeps its Arrow dtype. (pandas cannot parse a nested
    Arrow dtype's name in the file's pandas metadata: the read failed before.)"""
    import pandas as pd

    wh = Warehouse(tmp_path)
    ids = pa.ListArray.from_arrays(pa.array([0, 1, 3], pa.int32()), pa.array(["a", "b", "c"]))
    frame = pd.DataFrame(
        {
            "n": pd.array([1, 2], dtype="int64[pyarrow]"),
            "trial_ids": pd.arrays.ArrowExtensionArray(ids),
        }
    )
    wh.write("task_grid", frame, "run-1", "table")
    back = wh.read("task_grid", "run-1")
    assert [list(v) for v in back["trial_ids"]] == [["a"], ["b", "c"]]
    assert back["trial_ids"].dtype == object  # as from a column of Python lists
    assert str(back["n"].dtype) == "int64[pyarrow]" and back["n"].tolist() == [1, 2]
