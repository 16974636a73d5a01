"""The perf/ measuring scripts still run: each in a tiny mode, end to end (real git, pytest
graders, `bench run`, redis and celery workers), printing its table. Behaviour only: the
figures are measured by running the scripts themselves, never asserted here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bench_pipeline_tests.processes import wait_until_group_gone
from bench_pipeline_tests.servers import redis_available

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 900  # seconds; a tiny mode takes ~30-60 s on an idle 2-core machine


def _run(script: str, *args: str) -> str:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, str(ROOT / "perf" / script), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout


def test_compare_prints_same_round_ratios_and_the_fit() -> None:
    out = _run("compare.py", "--tasks", "2", "--reps", "1", "--rounds", "1", "--jobs", "2")
    assert "2 tasks x 1 reps = 2 trials" in out
    assert re.search(
        r"round 1 +2 jobs +2 trials: +floor +[\d.]+ s +bench +[\d.]+ s +ratio [\d.]+x", out
    ), out
    assert re.search(r"2 jobs, 2 trials: median same-round ratio [\d.]+x", out), out
    assert "fit wall = fixed + N x per_trial over N = 1, 2" in out
    for tool in ("floor", "bench"):
        fit = rf"2 jobs +{tool}: +wall: fixed +-?[\d.]+ s +per trial -?[\d.]+ s +\| +cpu: fixed"
        assert re.search(fit, out), out


def test_compare_and_startup_time_a_run_handed_to_bench_serve() -> None:
    out = _run(
        "compare.py", "--tasks", "2", "--reps", "1", "--rounds", "1", "--jobs", "2", "--serve"
    )
    assert "bench: handed to a warm `bench serve`" in out
    # The served run's CPU is counted (the server's child's, its graders included), not only
    # the waiting caller's (~0.04 s): at least half the floor's, which runs the same graders
    # (a ratio, as a faster machine does both in less time)
    row = re.search(
        r"round 1 +2 jobs +2 trials: .*\| +cpu: floor +([\d.]+) s +bench +([\d.]+) s", out
    )
    assert row and float(row.group(2)) > 0.5 * float(row.group(1)) > 0, out
    out = _run("startup.py", "--rounds", "1", "--serve")
    assert re.search(r"bench run \(served\) - floor: +-?[\d.]+ s", out), out
    # (the script stops with an error unless the server the first command started served them)
    assert re.search(r"bench run \(auto-started server\) - floor: +-?[\d.]+ s", out), out
    # Dagster's own import is timed apart: the floor under an own-process run's fixed cost
    dagster = re.search(r"import dagster - python: +(-?[\d.]+) s", out)
    assert dagster and float(dagster.group(1)) > 0.1, out


def test_overhead_times_the_demo_against_the_plain_loop_served(tmp_path: Path) -> None:
    # --against a copy of this checkout (another tree's path, its own home and server), run
    # from this checkout: its commands must run the copy's code, handed to the copy's server
    # (run with this checkout's code instead, they ran unserved: a 3 s start-up each that
    # passed for the other tree's slowness)
    other = tmp_path / "other"
    other.mkdir()
    archive = subprocess.run(["git", "archive", "HEAD"], cwd=ROOT, capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(other)], input=archive.stdout, check=True)
    out = _run("overhead.py", "--rounds", "1", "--repeats", "1", "--serve", "--against", str(other))
    assert "bench run: handed to a warm `bench serve`" in out, out
    assert f"served: 2 of 2 bench runs ({ROOT})" in out, out
    assert f"served: 2 of 2 bench runs ({other})" in out, out
    assert re.search(rf"bench run \({re.escape(str(other))}\): +[\d.]+s +median [\d.]+s", out), out
    assert re.search(r"bench run, this tree / .*: same-round median [\d.]+x \([\d.]+\)", out), out
    for name in ("plain loop (bash + xargs)", "bench run (Dagster)", "trial layer (no Dagster)"):
        assert re.search(rf"{re.escape(name)}: +[\d.]+s +median [\d.]+s", out), out
    for name in ("bench run", "trial layer"):
        ratio = rf"overhead ratio, {name}: +[\d.]+x +\(same-round median [\d.]+x: [\d.]+\)"
        assert re.search(ratio, out), out
        assert re.search(rf"cpu ratio, {name}: +same-round median [\d.]+x: [\d.]+", out), out
    cpu = re.search(
        r"cpu \(the machine's, every process\), medians: plain loop ([\d.]+)s, "
        r"bench run ([\d.]+)s, trial layer ([\d.]+)s",
        out,
    )
    assert cpu, out
    # each counts its trials' processes, not only the waiting caller (the served run's are
    # the server's child's); that sandboxed ones are counted is the next test's
    assert all(float(x) > 0.5 for x in cpu.groups()), out


def test_the_perf_cpu_count_sees_sandboxed_processes() -> None:
    """A process in bubblewrap's PID namespace is collected by bubblewrap's own init, and
    bubblewrap exits without waiting for that init: no rusage of ours sees its CPU (a rusage
    count gave 0.0 s for this second). `busy_cpu`, which the perf scripts count sandboxed
    runs by, sees it."""
    from bench_pipeline.workspace.sandbox import bwrap_path, sandbox_available

    ok, why = sandbox_available()
    # CI installs bubblewrap (make system-deps): there a missing sandbox is a failure.
    assert ok, f"bubblewrap cannot run here: {why}"
    sys.path.insert(0, str(ROOT / "perf"))
    try:
        import warm_server
    finally:
        sys.path.remove(str(ROOT / "perf"))
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1: pass"
    argv = [bwrap_path(), "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    argv += ["--unshare-pid", "--", sys.executable, "-c", spin]
    before = warm_server.busy_cpu()
    subprocess.run(argv, check=True)
    assert warm_server.busy_cpu() - before >= 0.9  # (its second; anything else only adds)


def test_text_cases_fits_the_per_case_overhead_in_process_and_served() -> None:
    # 200 cases: the floor's slope (~0.4 ms a case) shows in 4 decimals, so a missing
    # subtraction would show below (no bound on it here: one round's slope is noise-prone)
    out = _run("text_cases.py", "--rounds", "1", "--sizes", "2", "200", "--serve")
    # The floor ran at both sizes in the same round (its client checked both assertions on
    # every case, or the script would have stopped), and each tree's overhead is its slope
    # minus the floor's.
    floor = re.search(
        r"^floor \(.*\): \(wall - server\) ([-+][\d.]+) .* cpu ([-+][\d.]+) .*"
        r"N=2 ([\d.]+) s, N=200 ([\d.]+) s$",
        out,
        re.M,
    )
    assert floor and float(floor[3]) > 0 and float(floor[4]) > 0, out
    trees = re.split(r"^tree: ", out, flags=re.M)[1:]
    assert [t.split("  rounds")[0].endswith("(served)") for t in trees] == [False, True], out
    for tree in trees:
        for n in (2, 200):
            row = rf"N= +{n}: bench run +([\d.]+) s; .* s per case; cpu +([\d.]+) s"
            found = re.search(row, tree)
            # (the served command's CPU is counted: the server's child's, busy most of the wall
            # time, not the waiting caller's, ~0.04 s; a ratio, as a faster machine does both
            # in less time)
            assert found and float(found.group(2)) > 0.3 * float(found.group(1)), tree
        assert re.search(r"fit over N = 2, 200: fixed -?[\d.]+ s \+ -?[\d.]+ s per case", tree)
        assert re.search(r"cpu fit: fixed -?[\d.]+ s \+ -?[\d.]+ s per case", tree), tree
        raw = float(re.search(r"fit over N = 2, 200: fixed -?[\d.]+ s \+ (-?[\d.]+) s", tree)[1])
        beyond = re.search(r"beyond the floor \(overhead\), same round: wall ([-+][\d.]+) ", tree)
        assert beyond and abs(float(beyond[1]) - (raw - float(floor[1]))) <= 0.00015, tree
        assert re.search(r"promptfoo's bar 0.005 s per case, overhead: wall ", tree), tree
    assert re.search(r"\(served\) minus .*, same round: wall [-+][\d.]+ ", out), out


def test_scaleout_times_both_paths_and_stops_its_servers() -> None:
    if not redis_available():
        pytest.skip("redis-server is not installed (make system-deps installs it)")
    pytest.importorskip("dagster_celery", reason="the celery extra: pip install -e '.[celery]'")
    out = _run("scaleout.py", "--tasks", "1", "--reps", "1")
    assert re.search(r"round 1: +in-process +[\d.]+ s +celery +[\d.]+ s", out), out
    assert re.search(r"celery step overhead per partition: .* / 1 partitions = -?[\d.]+ s", out), (
        out
    )
    groups = [int(g) for g in re.findall(r"process group (\d+)", out)]
    assert len(groups) == 3, out  # redis and two workers
    for pgid in groups:
        assert wait_until_group_gone(pgid), f"process group {pgid} still running"
