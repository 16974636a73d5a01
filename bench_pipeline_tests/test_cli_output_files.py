"""`--out FILE` replaces FILE whole by a rename. Before, that put a regular file in place of
whatever FILE was: as root, `bench report --out /dev/full` replaced the device itself, and a
FIFO or a symlink was swapped out the same way; `--out missing-folder/` wrote a file named
after the folder."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from bench_pipeline_tests.conftest import run_bench

ONE_TRIAL = """kind: BenchmarkLaunch
suite: invoices
configs:
  - {id: reference, agent: reference}
repetitions: 1
tasks: [amount-precision]
scorers: [checks]
"""


def test_out_writes_regular_files_only_and_through_a_symlink(
    factory: Path, bench_home: Path, tmp_path: Path
) -> None:
    launch = factory / "launches" / "one.yaml"
    launch.write_text(ONE_TRIAL)
    code, out, err = run_bench("run", str(launch), "--json", "--quiet", home=bench_home)
    assert code == 0, err
    run_id = json.loads(out)["run"]["run_id"]
    place = tmp_path / "out"
    place.mkdir()

    fifo = place / "fifo.html"
    os.mkfifo(fifo)
    refused = {"fifo": fifo}
    if os.geteuid() == 0:  # (a device of our own: what /dev/full is, in a scratch folder)
        device = place / "full"
        os.mknod(device, 0o666 | stat.S_IFCHR, os.makedev(1, 7))
        refused["device"] = device
    for kind, path in refused.items():
        for argv in (["report", run_id], ["results", run_id]):
            code, _, err = run_bench(*argv, "--out", str(path), home=bench_home)
            assert code == 2, (kind, argv, err)
            assert f"--out: {path} is not a regular file" in err, err
        mode = path.lstat().st_mode
        assert stat.S_ISFIFO(mode) if kind == "fifo" else stat.S_ISCHR(mode), kind

    # a trailing slash names a folder, which does not exist: nothing is written
    missing = place / "nonexist"
    code, _, err = run_bench("report", run_id, "--out", f"{missing}/", home=bench_home)
    assert code == 2 and "names a folder" in err, err
    assert not missing.exists()

    # a symlink: the file it names is written, the link stays a link
    real = place / "real.html"
    real.write_text("old")
    link = place / "link.html"
    link.symlink_to(real)
    code, _, err = run_bench("report", run_id, "--out", str(link), home=bench_home)
    assert code == 0, err
    assert link.is_symlink() and link.resolve() == real
    assert real.read_text().lstrip().lower().startswith("<!doctype html")
    assert sorted(p.name for p in place.iterdir()) == sorted(
        ["fifo.html", "real.html", "link.html", *(["full"] if "device" in refused else [])]
    )


def test_run_refuses_a_pipe_before_any_trial(
    factory: Path, bench_home: Path, tmp_path: Path
) -> None:
    launch = factory / "launches" / "one.yaml"
    launch.write_text(ONE_TRIAL)
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    code, _, err = run_bench("run", str(launch), "--out", str(fifo), home=bench_home)
    assert code == 2 and "is not a regular file" in err, err
    assert not (bench_home / "warehouse" / "trials").exists()
