"""`bench cancel RUN` against a real `bench run` in another process: the running agents' process
groups are killed, finished trials are kept, the running ones are recorded as cancelled."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.processes import is_alive

pytestmark = pytest.mark.slow

SLEEPER = """import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
path = os.path.join(sys.argv[1], f"{os.getpid()}.pid")
with open(path + ".tmp", "w") as fh:
    fh.write(f"{os.getpid()} {child.pid}")
os.replace(path + ".tmp", path)
time.sleep(300)
"""

LAUNCH = """kind: BenchmarkLaunch
suite: invoices
tasks: [amount-precision, currency-code]
configs:
  - {id: fast, agent: reference}
  - {id: slow, agent: sleeper}
repetitions: 1
scorers: [checks]
max_parallel: 2
"""


def wait_for(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_cancel_kills_running_agents_and_keeps_finished_trials(factory, bench_home, tmp_path):
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    script = tmp_path / "sleeper.py"
    script.write_text(SLEEPER)
    (factory / "agents" / "sleeper.yaml").write_text(
        f"kind: command\ncommand: [python, {json.dumps(str(script))}, {json.dumps(str(pids_dir))}]\n"
        # `process`: the pids the agent writes must be host pids, in a folder it can reach.
        "timeout_seconds: 600\nmax_iterations: 1\nisolation: process\n"
    )
    launch = factory / "launches" / "slow.yaml"
    launch.write_text(LAUNCH)
    bench = Path(sys.executable).parent / "bench"
    log = (tmp_path / "run.log").open("w")
    proc = subprocess.Popen(
        [str(bench), "--home", str(bench_home), "run", str(launch), "--quiet"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "BENCH_HOME": str(bench_home)},
    )
    try:
        files = wait_for(
            lambda: (fs := sorted(pids_dir.glob("*.pid"))) and len(fs) == 2 and fs, 180, "agents"
        )
        pids = [int(p) for f in files for p in f.read_text().split()]
        assert len(pids) == 4 and all(is_alive(p) for p in pids)
        (run_id,) = [p.stem for p in (bench_home / "warehouse" / "manifests").glob("*.json")]

        code, out, err = run_bench("cancel", run_id, "--wait", "120", home=bench_home)
        assert code == 0, out + err
        assert "cancelled 2 trial(s)" in out
        assert "amount-precision/slow/1" in out and "currency-code/slow/1" in out
        assert "kept 2 finished trial(s)" in out
        wait_for(
            lambda: not any(is_alive(p) for p in pids), 60, "the agents' process groups to die"
        )
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()

    from bench_pipeline.runs.status import status_of
    from bench_pipeline.warehouse.store import Warehouse

    wh = Warehouse(bench_home / "warehouse")
    assert status_of(wh, run_id)["status"] == "cancelled"
    trials = wh.read("trials", run_id).set_index("trial_id")
    assert trials.loc["amount-precision/fast/1", "outcome"] == "succeeded"
    assert trials.loc["currency-code/fast/1", "outcome"] == "succeeded"
    assert trials.loc["amount-precision/slow/1", "outcome"] == "cancelled"
    assert trials.loc["currency-code/slow/1", "outcome"] == "cancelled"

    # a run that is not running: nothing to do
    code, out, _ = run_bench("cancel", run_id, home=bench_home)
    assert code == 0 and "not running" in out
    code, _, err = run_bench("cancel", "no-such-run", home=bench_home)
    assert code == 2 and "no benchmark run" in err
