"""A regression gate never passes by comparing with a run that has no trials: a run killed
before its first trial ended could be pinned as the suite's baseline, and `--fail-on-regression`
against it then exited 0 with nothing compared."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.processes import wait_until_group_gone

SLEEPER = """
import pathlib, sys, time
with open(sys.argv[1], "a") as fh:
    fh.write("start\\n")
time.sleep(600)
"""
ONE_TRIAL = """kind: BenchmarkLaunch
suite: invoices
configs:
  - {{id: {config}, agent: {agent}}}
repetitions: 1
tasks: [amount-precision]
scorers: [checks]
"""


def test_a_run_without_trials_is_no_baseline_and_no_gate_passes_against_it(
    factory: Path, bench_home: Path, tmp_path: Path
) -> None:
    log = tmp_path / "agent.log"
    log.touch()  # (the one file outside the workspace the sandboxed agent may write)
    script = factory / "agents" / "sleeper.py"
    script.write_text(SLEEPER)
    (factory / "agents" / "sleeper.yaml").write_text(
        f"kind: command\ncommand: [python, '{script}', '{log}']\nmounts: ['{log}:rw']\n"
    )
    empty_launch = factory / "launches" / "empty.yaml"
    empty_launch.write_text(ONE_TRIAL.format(config="x", agent="sleeper"))
    env = {
        **os.environ,
        "BENCH_HOME": str(bench_home),
        "DAGSTER_HOME": str(bench_home / "dagster_home"),
    }
    bench = Path(sys.executable).parent / "bench"
    proc = subprocess.Popen(
        [str(bench), "--home", str(bench_home), "run", str(empty_launch), "--quiet"],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    assert proc.stderr is not None
    empty = re.match(r"run (\S+):", proc.stderr.readline()).group(1)
    deadline = time.monotonic() + 120
    while "start" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert "start" in log.read_text()
    os.killpg(proc.pid, signal.SIGKILL)  # (the run and its sandboxed agent with it)
    proc.wait()
    wait_until_group_gone(proc.pid)

    code, _, err = run_bench("baseline", "set", "invoices", empty, home=bench_home)
    assert code == 2 and f"baseline: run {empty} has no trials" in err, err

    good = factory / "launches" / "good.yaml"
    good.write_text(ONE_TRIAL.format(config="x", agent="reference"))
    code, out, err = run_bench("run", str(good), "--quiet", home=bench_home)
    assert code == 0, err
    night = out.split("Run ", 1)[1].split()[0]
    code, out, err = run_bench(
        "results", night, "--baseline", empty, "--fail-on-regression", home=bench_home
    )
    assert code == 1, out + err
    assert f"--fail-on-regression: nothing compared: baseline {empty} has no trials" in err
    assert f"note: baseline {empty} has no trials: not compared" in out


def test_a_run_without_trials_has_nothing_to_rescore(factory: Path, bench_home: Path) -> None:
    """`bench rescore` of a run with no trials started Dagster, then ended with exit 1 on a
    LookupError from the results step."""
    launch = factory / "launches" / "good.yaml"
    launch.write_text(ONE_TRIAL.format(config="x", agent="reference"))
    code, out, err = run_bench("run", str(launch), "--quiet", home=bench_home)
    assert code == 0, err
    run_id = out.split("Run ", 1)[1].split()[0]
    for path in (bench_home / "warehouse" / "trials" / run_id).rglob("*.parquet"):
        path.unlink()  # (as a run killed before its first trial ended leaves it)
    code, _, err = run_bench("rescore", run_id, home=bench_home)
    assert code == 2 and f"run {run_id} has no trials yet: nothing to rescore" in err, err
