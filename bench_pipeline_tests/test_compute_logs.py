"""A step's stdout and stderr on the instance `bench` configures (defs/compute_logs.py): kept in
the compute-log files Dagster's UI reads and shown on the terminal, the step's own output and
its child processes' alike, with no helper process started for it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

# A real Dagster job on an instance made from bench's dagster.yaml, in its own process (its
# file descriptors 1 and 2 are this test's pipes: the terminal). It records every process the
# step's process starts (the interpreter's audit events) and prints what the instance's
# compute-log manager reads back.
JOB = """
import json, subprocess, sys
from pathlib import Path
started = []
sys.addaudithook(lambda e, a: started.append(list(map(str, a[1]))) if e == "subprocess.Popen" else None)
import dagster as dg
from bench_pipeline.defs.launcher import instance_yaml
home = Path(sys.argv[1])
home.mkdir()
(home / "dagster.yaml").write_text(instance_yaml(home))

@dg.op
def talk():
    print("step says out", flush=True)
    print("step says err", file=sys.stderr, flush=True)
    subprocess.run(["sh", "-c", "echo child says out; echo child says err >&2"], check=True)
    print("x" * 200_000, flush=True)  # (more than one read of the copier)

@dg.job
def talking():
    talk()

instance = dg.DagsterInstance.from_config(str(home))
result = talking.execute_in_process(instance=instance)
manager = instance.compute_log_manager
(event,) = [e for e in result.all_events if e.event_type_value == "LOGS_CAPTURED"]
key = manager.build_log_key_for_run(result.run_id, event.logs_captured_data.file_key)
data = manager.get_log_data(key)
print("REPORT " + json.dumps({
    "manager": type(manager).__name__,
    "complete": manager.is_capture_complete(key),
    "stdout": data.stdout.decode(),
    "stderr": data.stderr.decode(),
    "started": started,
}), file=sys.stderr)
"""


def test_a_steps_output_is_captured_and_shown_without_helper_processes(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", JOB, str(tmp_path / "dagster_home")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stderr.split("REPORT ", 1)[1])
    assert report["manager"] == "ThreadedComputeLogManager" and report["complete"]
    # kept where the UI reads them: the step's output and its child's, stream by stream
    assert report["stdout"].startswith("step says out\nchild says out\n" + "x" * 200_000)
    assert "step says err\nchild says err\n" in report["stderr"]
    assert "step says out" not in report["stderr"] and "child says err" not in report["stdout"]
    # and shown on the terminal, whole, in the order written
    assert "step says out\nchild says out\n" + "x" * 200_000 + "\n" in done.stdout
    assert "step says err\nchild says err\n" in done.stderr
    # no helper process: no `tail`, no orphan-watching interpreter (Dagster's own manager
    # starts both for each stream), only the step's child
    commands = [" ".join(argv) for argv in report["started"]]
    assert not any("tail" in c or "watch_orphans" in c for c in commands), commands
    assert "sh -c echo child says out; echo child says err >&2" in commands
