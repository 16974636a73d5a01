"""A file the product writes is the whole new file or the whole old one: never half, and no
temp file is left beside it when the write fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench_pipeline.formats.files import replace_text, replacing
from bench_pipeline.warehouse.store import Warehouse


def test_a_write_that_fails_leaves_the_old_file_and_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "table.parquet"
    target.write_bytes(b"old")
    with pytest.raises(RuntimeError, match="disk full"), replacing(target) as tmp:
        tmp.write_bytes(b"half of the ne")
        raise RuntimeError("disk full")
    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["table.parquet"]


def test_a_write_that_ends_replaces_the_file_whole(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    replace_text(target, "old")
    with replacing(target) as tmp:
        assert tmp.parent == target.parent  # a rename within one file system
        tmp.write_text("new")
        assert target.read_text() == "old"  # nothing shows until the block ends
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_a_warehouse_part_is_replaced_whole_and_leaves_nothing_beside_it(tmp_path: Path) -> None:
    warehouse = Warehouse(tmp_path / "warehouse")
    rows = [{"run_id": "r1", "suite": "s", "key": "k", "value": "v1"}]
    path = warehouse.write("notes", rows, "r1", "part")
    warehouse.write("notes", [{**rows[0], "value": "v2"}], "r1", "part")
    assert warehouse.read("notes", "r1")["value"].tolist() == ["v2"]
    assert [p.name for p in path.parent.iterdir()] == [path.name]
