"""What start-up costs are kept off: heavy libraries are imported where they are used, and the
work a run repeats (writing a trial's rows, re-reading a partition's files, re-hashing frozen
inputs) is cheap without changing what is stored or read. Timings live in perf/startup.py and
perf/text_cases.py; these tests hold the behaviour."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from bench_pipeline.formats.taskset import file_sha256
from bench_pipeline.warehouse.store import Warehouse
from bench_pipeline.workspace.snapshot import freeze_inputs

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("pandas", "pyarrow", "duckdb", "dagster", "httpx", "anthropic", "scipy", "matplotlib")


def _python(code: str, env: dict[str, str] | None = None) -> str:
    """The last line `code` prints in a fresh interpreter that imports this checkout."""
    env = {**(os.environ if env is None else env), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.splitlines()[-1]


def _imported_after(statement: str) -> list[str]:
    code = f"import sys, json\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    loaded = set(json.loads(_python(code)))
    return [m for m in HEAVY if m in loaded]


def test_the_cli_loads_no_heavy_library_before_a_command_needs_it() -> None:
    # `bench --help`, `bench validate`, `bench status`... pay none of them at start.
    assert _imported_after("import bench_pipeline.cli.main") == []


def test_the_trial_and_scoring_use_cases_import_no_frames_charts_or_clients() -> None:
    statement = (
        "import bench_pipeline.runs.start, bench_pipeline.runs.score, "
        "bench_pipeline.runs.partition_view, bench_pipeline.runs.baseline, "
        "bench_pipeline.runs.cancel, bench_pipeline.trials.runner, bench_pipeline.agents, "
        "bench_pipeline.scorers, bench_pipeline.warehouse.store, bench_pipeline.ops.ci_poll, "
        "bench_pipeline.ops.notify"
    )
    assert _imported_after(statement) == []


def test_the_definitions_load_no_http_client() -> None:
    assert not {"httpx", "anthropic"} & set(_imported_after("import bench_pipeline.definitions"))


def test_the_definitions_load_no_frames_or_charts() -> None:
    # Every `dagster dev` code-server start and every `bench run` loads them.
    assert _imported_after("import bench_pipeline.definitions") == ["dagster"]


def _arrow_allocator(env: dict[str, str]) -> str:
    return _python(
        "import bench_pipeline, pyarrow; print(pyarrow.default_memory_pool().backend_name)", env
    )


def test_a_bench_process_gives_arrow_the_system_allocator_unless_the_user_chose() -> None:
    # mimalloc's arenas added 35-50 MiB to an analysis's peak (bench_pipeline/__init__.py)
    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    assert _arrow_allocator(env) == "system"
    assert _arrow_allocator({**env, "ARROW_DEFAULT_MEMORY_POOL": "mimalloc"}) == "mimalloc"


# Four threads allocate and stay alive until malloc_info has listed glibc's arenas (one
# `<heap nr=...>` each): a live thread's arena is never handed to another, so without a limit
# each thread that allocates gets its own, however the threads are scheduled.
_ARENAS = """
import ctypes, threading
import bench_pipeline  # noqa: F401
libc = ctypes.CDLL(None)
libc.malloc.restype = libc.open_memstream.restype = ctypes.c_void_p
held = []
all_in = threading.Barrier(5)
def allocate():
    held.extend(libc.malloc(4096) for _ in range(64))
    all_in.wait()
    all_in.wait()
threads = [threading.Thread(target=allocate) for _ in range(4)]
for t in threads:
    t.start()
all_in.wait()
text, size = ctypes.c_char_p(), ctypes.c_size_t()
stream = ctypes.c_void_p(libc.open_memstream(ctypes.byref(text), ctypes.byref(size)))
libc.malloc_info(0, stream)
libc.fclose(stream)
all_in.wait()
for t in threads:
    t.join()
print(text.value.decode().count("<heap nr="))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's allocator")
def test_a_bench_process_keeps_one_malloc_arena_unless_the_user_chose() -> None:
    # Arrow's reader threads each kept an arena of freed pages: ~10 MiB of an analysis's peak
    # at 25,000 tasks (bench_pipeline/__init__.py)
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    assert _python(_ARENAS, env) == "1"
    assert int(_python(_ARENAS, {**env, "MALLOC_ARENA_MAX": "3"})) == 3


def test_the_duckdb_views_are_rebuilt_only_when_a_table_appears(tmp_path: Path) -> None:
    """Views bind their files at query time: a new run's rows and columns show without a
    rebuild; a new table rebuilds the file."""
    import duckdb

    warehouse = Warehouse(tmp_path / "wh")
    warehouse.write("config_table", [{"config_id": "a", "overall": 0.5}], "r1", "all")
    warehouse.refresh_views()
    built = warehouse.duckdb_path.stat().st_mtime_ns, warehouse.duckdb_path.stat().st_ino
    warehouse.write(
        "config_table", [{"config_id": "b", "overall": 0.7, "score_judge": 0.9}], "r2", "all"
    )
    warehouse.refresh_views()
    assert (warehouse.duckdb_path.stat().st_mtime_ns, warehouse.duckdb_path.stat().st_ino) == built
    rows = warehouse.query("SELECT config_id, score_judge FROM config_table ORDER BY config_id")
    assert rows.to_dict("records")[1] == {"config_id": "b", "score_judge": 0.9}
    assert rows["score_judge"].isna().tolist() == [True, False]
    warehouse.write("task_grid", [{"task_id": "t", "config_id": "a"}], "r2", "all")
    assert warehouse.refresh_views() == ["config_table", "task_grid"]
    con = duckdb.connect(str(warehouse.duckdb_path), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM task_grid").fetchone() == (1,)
    finally:
        con.close()
    # A deleted database file is rebuilt, whatever the record of the last build says.
    warehouse.duckdb_path.unlink()
    warehouse.refresh_views()
    assert warehouse.duckdb_path.exists()


def _trial_row(i: int, **extra: object) -> dict:
    return {
        "run_id": "r1",
        "trial_id": f"t{i}",
        "task_id": f"task-{i}",
        "config_id": "c",
        "repetition": 1,
        "outcome": "succeeded",
        "started_at": datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        "cost_usd": None,
        "duration_seconds": 1.25,
        "not_a_column": "dropped",
        **extra,
    }


def test_row_dicts_are_stored_exactly_as_through_a_frame(tmp_path: Path) -> None:
    fast, framed = Warehouse(tmp_path / "a"), Warehouse(tmp_path / "b")
    rows = [_trial_row(1), _trial_row(2, cost_usd=0.5, iterations=2)]
    fast.write("trials", rows, "r1", "p")
    framed.write("trials", pd.DataFrame(rows), "r1", "p")
    a, b = fast.read("trials", "r1"), framed.read("trials", "r1")
    pd.testing.assert_frame_equal(a, b)
    assert list(a["trial_id"]) == ["t1", "t2"] and a["cost_usd"].isna().tolist() == [True, False]
    assert "not_a_column" not in a.columns
    # Values only pandas coerces (a numpy integer in a float column, NaN for a missing text)
    # still go through the frame route and read back the same.
    odd = [_trial_row(3, duration_seconds=np.int64(2), error=float("nan"))]
    fast.write("trials", odd, "r1", "odd")
    framed.write("trials", pd.DataFrame(odd), "r1", "odd")
    pd.testing.assert_frame_equal(
        fast.read("trials", "r1", under="odd"), framed.read("trials", "r1", under="odd")
    )


def test_a_rewritten_file_is_read_afresh(tmp_path: Path) -> None:
    wh = Warehouse(tmp_path)
    wh.write("trials", [_trial_row(1)], "r1", "c/rep1/task-1")
    assert wh.read("trials", "r1", under="c/rep1")["outcome"].tolist() == ["succeeded"]
    # The same part written again (a resumed trial): the reader sees the new row, not the
    # one it read before.
    wh.write("trials", [_trial_row(1, outcome="cancelled")], "r1", "c/rep1/task-1")
    assert wh.read("trials", "r1", under="c/rep1")["outcome"].tolist() == ["cancelled"]
    wh.write("trials", [_trial_row(2)], "r1", "c/rep1/task-2")
    assert sorted(wh.read("trials", "r1")["trial_id"]) == ["t1", "t2"]


def test_a_frozen_input_changed_in_the_store_is_restored(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    (suite / "graders").mkdir(parents=True)
    grader = suite / "graders" / "check.py"
    grader.write_text("print('ok')\n")
    hashes = {"t": {"graders/check.py": file_sha256(grader)}}
    store = tmp_path / "store"
    assert freeze_inputs(suite, hashes, store) == []
    stored = store / "graders" / "check.py"
    assert freeze_inputs(suite, hashes, store) == []  # verified before: not re-read
    stored.write_text("print('tampered with')\n")
    assert freeze_inputs(suite, hashes, store) == []
    assert stored.read_text() == "print('ok')\n"
    grader.write_text("changed in the factory\n")
    stored.unlink()
    assert freeze_inputs(suite, hashes, store) == ["graders/check.py"]
    assert not stored.exists()


def _duckdb_shell_count(database: Path, table: str) -> int:
    """What the README's `.venv/bin/duckdb <warehouse>/bench.duckdb` shows: the rows of a view."""
    shell = Path(sys.executable).parent / "duckdb"
    out = subprocess.run(
        [str(shell), "-readonly", "-csv", "-noheader", str(database)],
        input=f"SELECT count(*) FROM {table};",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


def test_a_run_draws_its_chart_and_views_without_matplotlib_or_duckdb(
    factory: Path, tmp_path: Path
) -> None:
    """A whole `bench run` in its own process: the SVG chart and the DuckDB views file are
    written, yet neither matplotlib nor DuckDB is loaded into the harness (~90 MB of its
    peak memory, ~0.6 s of its start)."""
    home = tmp_path / "home"
    code = (
        "import sys, json\nfrom bench_pipeline.cli.main import main\n"
        "rc = main(sys.argv[1:])\n"
        "print('LOADED ' + json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
        "sys.exit(rc)"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DAGSTER_HOME": str(home / "dagster_home")}
    env.pop("BENCH_DUCKDB_SHELL", None)
    launch = factory / "launches" / "demo.yaml"
    argv = [sys.executable, "-c", code, "--home", str(home), "run", str(launch), "--max", "1"]
    out = subprocess.run(
        [*argv, "--repeats", "1"], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    loaded = set(json.loads(out.stdout.split("LOADED ", 1)[1].splitlines()[0]))
    assert {"dagster", "pandas", "pyarrow"} <= loaded  # the measurement sees the run
    assert not {"matplotlib", "duckdb"} & loaded
    (chart,) = (home / "warehouse" / "charts").glob("*-pareto.svg")
    assert chart.read_text().startswith("<svg") and 'data-config="reference"' in chart.read_text()
    assert _duckdb_shell_count(home / "warehouse" / "bench.duckdb", "trials") == 3


def test_the_views_file_is_written_by_python_without_the_shell_or_when_it_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`BENCH_DUCKDB_SHELL=none`, or a shell that fails: Python's duckdb writes the file, at a
    storage version the installed shell reads."""
    for i, shell in enumerate(("none", "/bin/false", str(tmp_path / "no-such-shell"))):
        monkeypatch.setenv("BENCH_DUCKDB_SHELL", shell)
        warehouse = Warehouse(tmp_path / f"wh{i}")
        warehouse.write("config_table", [{"config_id": "a", "overall": 0.5}], "r1", "all")
        assert warehouse.refresh_views() == ["config_table"]
        assert _duckdb_shell_count(warehouse.duckdb_path, "config_table") == 1
        assert [p.name for p in warehouse.root.iterdir() if p.name.endswith(".tmp")] == []


def test_the_console_script_ends_without_teardown_yet_loses_no_output_or_exit_handler(
    factory: Path, tmp_path: Path
) -> None:
    """`bench` (its console script) leaves the process without Python freeing every module
    (~0.9 s after a run): the run's whole JSON still reaches a pipe, atexit handlers still run,
    the exit code is the command's; and an object's finalizer, which only teardown would run,
    does not."""
    home = tmp_path / "home"
    code = (
        "import atexit, sys\n"
        "from bench_pipeline.cli import console\n"
        "class Finalized:\n"
        "    def __del__(self):\n"
        "        sys.stderr.write('TEARDOWN RAN\\n')\n"
        "kept = Finalized()\n"
        "atexit.register(lambda: sys.stderr.write('ATEXIT RAN\\n'))\n"
        "sys.exit(console())\n"
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DAGSTER_HOME": str(home / "dagster_home"),
        "BENCH_NO_SERVE": "1",
    }
    env.pop("PYTHONUNBUFFERED", None)  # stdout to a pipe block-buffered, as a user's is
    launch = factory / "launches" / "demo.yaml"
    argv = [sys.executable, "-c", code, "--home", str(home), "run", str(launch), "--max", "1"]
    out = subprocess.run(
        [*argv, "--repeats", "1", "--json"], env=env, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    # (a pipe is block-buffered: without the flush before the exit this would be cut or empty)
    assert json.loads(out.stdout)["run"]["run_id"]
    assert "ATEXIT RAN" in out.stderr
    assert "TEARDOWN RAN" not in out.stderr

    # A command's own exit code, through the same exit: bad input is 2.
    bad = subprocess.run(
        [sys.executable, "-c", code, "--home", str(home), "run", str(tmp_path / "none.yaml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert bad.returncode == 2, bad.stderr[-2000:]
    assert "none.yaml" in bad.stderr and "ATEXIT RAN" in bad.stderr


# Counts the collector's passes of a `bench` process before and after its start-up objects were
# frozen, and says at exit whether the collector is on.
_WATCH_THE_COLLECTOR = """
import atexit, gc, json, sys
passes = {"before_freeze": 0, "after_freeze": 0}
def count(phase, info):
    if phase == "stop":
        passes["after_freeze" if gc.get_freeze_count() else "before_freeze"] += 1
gc.callbacks.append(count)
atexit.register(lambda: sys.stderr.write("COLLECTOR " + json.dumps(
    {**passes, "enabled": gc.isenabled(), "frozen": gc.get_freeze_count()}) + "\\n"))
from bench_pipeline.cli import console
passes["before_freeze"] = 0  # (this script's own import of the cli above does not count)
sys.exit(console())
"""


def test_a_run_imports_without_collector_passes_then_collects_its_trials_garbage(
    factory: Path, tmp_path: Path
) -> None:
    """The garbage collector's passes over the heap that importing Dagster, pandas and pyarrow
    builds were ~0.3 s of a one-trial run (bench_pipeline/cli/collector.py): `bench run`
    imports with the collector off, then freezes what it imported and collects again for the
    work; `bench rescore` too. Another command gets the collector back before it starts."""
    home = tmp_path / "home"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "DAGSTER_HOME": str(home / "dagster_home"),
        "BENCH_NO_SERVE": "1",
    }
    launch = factory / "launches" / "demo.yaml"
    argv = [sys.executable, "-c", _WATCH_THE_COLLECTOR, "--home", str(home)]
    run = [*argv, "run", str(launch), "--max", "1", "--repeats", "1"]
    out = subprocess.run(run, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stderr.rsplit("COLLECTOR ", 1)[1].splitlines()[0])
    assert seen["before_freeze"] == 0, seen  # no pass while the run imported and opened Dagster
    assert seen["frozen"] > 100_000, seen  # (importing Dagster alone makes more objects)
    assert seen["enabled"] and seen["after_freeze"] > 0, seen  # the run's garbage is collected

    # The rescore flow, beside it, the same way.
    rescore = [*argv, "rescore", "--scorers", "checks", "--all", "--quiet"]
    out = subprocess.run(rescore, env=env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stderr.rsplit("COLLECTOR ", 1)[1].splitlines()[0])
    assert seen["before_freeze"] == 0 and seen["frozen"] > 100_000, seen
    assert seen["enabled"] and seen["after_freeze"] > 0, seen

    out = subprocess.run(
        [*argv, "results", "--list"], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode == 0, out.stderr[-3000:]
    seen = json.loads(out.stderr.rsplit("COLLECTOR ", 1)[1].splitlines()[0])
    assert seen["enabled"] and seen["frozen"] > 0, seen


def test_a_launch_resolves_each_repository_ref_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Loading the demo launch (14 tasks from two refs of one repository) asks git for each
    (repository, ref) once, not once a task; every task still gets its ref's commit. git runs
    for real, behind a wrapper on PATH that logs its arguments."""
    from bench_pipeline.formats.loader import load_launch

    example = tmp_path / "example"
    subprocess.run(
        [sys.executable, str(ROOT / "data" / "seed.py"), "--out", str(example)],
        check=True,
        capture_output=True,
    )
    log = tmp_path / "git.log"
    wrapper = tmp_path / "bin" / "git"
    wrapper.parent.mkdir()
    real_git = subprocess.run(["which", "git"], capture_output=True, text=True).stdout.strip()
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {real_git} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}{os.pathsep}{os.environ['PATH']}")
    launch = load_launch(example / "factory" / "launches" / "demo.yaml")
    resolved = [line for line in log.read_text().splitlines() if "rev-parse --verify" in line]
    refs = {(t.repo, t.base_ref) for t in launch.tasks}
    assert len(launch.tasks) == 14 and len(refs) == 2
    assert len(resolved) == len(refs)
    repo = example / "service-repo"
    for task in launch.tasks:
        want = subprocess.run(
            ["git", "rev-parse", f"{task.base_ref}^{{commit}}"],
            cwd=repo,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        assert task.base_sha == want, task.id
