"""`cap_files`: every file an agent or the harness left in a trial's evidence folder is cut to
the cap (nested folders too), symlinks are never followed, skipped names are left alone."""

from __future__ import annotations

import os
from pathlib import Path

from bench_pipeline.workspace.evidence import cap_files


def test_cap_files_cuts_big_files_and_never_follows_links(tmp_path: Path) -> None:
    folder = tmp_path / "trial"
    (folder / "attempt1" / "checks").mkdir(parents=True)
    (folder / "small.txt").write_text("ok")
    (folder / "big.txt").write_text("x" * 100)
    (folder / "attempt1" / "checks" / "c.log").write_text("y" * 50)
    (folder / "changes.patch").write_text("z" * 100)
    outside = tmp_path / "outside.txt"
    outside.write_text("w" * 100)
    os.symlink(outside, folder / "link.txt")
    os.symlink(tmp_path, folder / "linked-dir")

    cut = cap_files(folder, 10, skip=("changes.patch",))

    assert cut == {
        "big.txt": {"bytes": 10, "full_bytes": 100, "truncated": True},
        "attempt1/checks/c.log": {"bytes": 10, "full_bytes": 50, "truncated": True},
    }
    assert (folder / "big.txt").read_text() == "x" * 10
    assert (folder / "small.txt").read_text() == "ok"
    assert (folder / "changes.patch").stat().st_size == 100
    assert outside.stat().st_size == 100  # the link's target outside the folder is untouched
    assert cap_files(tmp_path / "missing", 10) == {}
