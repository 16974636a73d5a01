"""Crash and resume: a run killed with SIGKILL is marked interrupted on the next start, and
`bench run --resume` finishes only the trials without a final result."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

from bench_pipeline_tests.conftest import run_bench

pytestmark = pytest.mark.slow

AGENT = """
import os, pathlib, sys, time
workspace = pathlib.Path(os.getcwd())
key = "/".join(workspace.parts[-4:-1])  # <task>/<config>/rep<N>
log = pathlib.Path(sys.argv[1])
with open(log, "a") as fh:
    fh.write(f"start {key}\\n")
time.sleep(1.5)
with open(log, "a") as fh:
    fh.write(f"end {key}\\n")
"""


def _finished(home: Path, run_id: str) -> set[str]:
    """The trials with a row on disk, as the agent's log names them (`<task>/<config>/rep<N>`):
    read as rows, not file names (a partition's files are joined into one when it ends)."""
    from bench_pipeline.warehouse.store import Warehouse

    rows = Warehouse(home / "warehouse").read("trials", run_id)
    return {
        f"{t}/{c}/rep{r}"
        for t, c, r in zip(rows["task_id"], rows["config_id"], rows["repetition"], strict=True)
    }


@pytest.mark.parametrize(
    ("configs", "n_tasks", "parallel"),
    [
        (["slow"], 4, 1),
        # One Dagster run for the whole launch: two configurations interleaved in one pool of
        # two, so the kill lands with trials of two partitions in flight.
        (["slow-a", "slow-b"], 2, 2),
    ],
    ids=["one-config", "two-configs-interleaved"],
)
def test_sigkill_then_resume_finishes_without_rerunning_or_duplicating(
    factory: Path,
    bench_home: Path,
    tmp_path: Path,
    configs: list[str],
    n_tasks: int,
    parallel: int,
) -> None:
    log = tmp_path / "agent.log"
    script = factory / "agents" / "slow.py"
    script.write_text(textwrap.dedent(AGENT))
    log.touch()  # the one file outside the workspace the sandboxed agent may write
    (factory / "agents" / "slow.yaml").write_text(
        f"kind: command\ncommand: [python, '{script}', '{log}']\nmax_iterations: 1\n"
        f"mounts: ['{log}:rw']\n"
    )
    tasks = sorted(p.stem for p in (factory / "benchmarks/invoices/tasks").glob("*.yaml"))
    tasks = tasks[:n_tasks]
    total = n_tasks * len(configs) * 2
    launch = factory / "launches" / "slow.yaml"
    launch.write_text(
        "kind: BenchmarkLaunch\nsuite: invoices\nconfigs:\n"
        + "".join(f"  - {{id: {c}, agent: slow}}\n" for c in configs)
        + f"tasks: {json.dumps(tasks)}\nrepetitions: 2\nscorers: [checks]\n"
        f"max_parallel: {parallel}\n"
    )
    bench = Path(sys.executable).parent / "bench"
    env = {
        **os.environ,
        "BENCH_HOME": str(bench_home),
        "DAGSTER_HOME": str(bench_home / "dagster_home"),
    }
    proc = subprocess.Popen(
        [str(bench), "--home", str(bench_home), "run", str(launch), "--quiet"],
        env=env,
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    first_line = proc.stderr.readline()
    run_id = re.match(r"run (\S+):", first_line).group(1)
    deadline = time.monotonic() + 120
    while len(_finished(bench_home, run_id)) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    finished_before = _finished(bench_home, run_id)
    assert len(finished_before) >= 3
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()

    code, out, err = run_bench("results", "--list", home=bench_home)
    assert f"run {run_id} was interrupted" in err
    assert re.search(rf"{run_id}.*interrupted", out)
    # Its results say they are partial, and how to finish them.
    code, out, err = run_bench("results", run_id, home=bench_home)
    assert code == 0, err
    note = re.search(r"note: interrupted: (\d+) of (\d+) trials finished \(the numbers are "
                     rf"partial\); finish it with `bench run --resume {run_id}`", out)  # fmt: skip
    assert note and int(note.group(1)) < int(note.group(2)) == total, out

    code, out, err = run_bench("run", "--resume", run_id, "--json", home=bench_home)
    assert code == 0, err
    table = json.loads(out)["config_table"]
    assert sorted(row["trials"] for row in table) == [total // len(configs)] * len(configs)

    from bench_pipeline.warehouse.store import Warehouse

    rows = Warehouse(bench_home / "warehouse").read("trials", run_id)
    counts = Counter(rows["trial_id"])
    assert len(counts) == total and set(counts.values()) == {1}
    # Every trial graded once: none lost between its row and its score, none scored twice.
    scores = Warehouse(bench_home / "warehouse").read("scores", run_id)
    graded = scores.loc[scores["scorer"] == "checks", "trial_id"]
    assert Counter(graded) == Counter({t: 1 for t in counts}), scores
    starts = Counter(ln.split()[1] for ln in log.read_text().splitlines() if ln.startswith("start"))
    # Trials finished before the crash never ran again; at most those in flight ran twice.
    assert all(starts[k] == 1 for k in finished_before), (starts, finished_before)
    assert len(starts) == total and sum(starts.values()) <= total + parallel
    # Every partition ended in this launch or the last: each trial table's rows in one file.
    for table in ("trials", "check_results"):
        folder = bench_home / "warehouse" / table / run_id
        per_partition = Counter(p.relative_to(folder).parts[:2] for p in folder.rglob("*.parquet"))
        assert len(per_partition) == len(configs) * 2 and set(per_partition.values()) == {1}
