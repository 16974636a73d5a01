"""`bench serve` for the perf scripts: `bench` run as its console script runs it, start a server
and wait until it is ready, and the CPU time
of the commands it served (they are its children, not the caller's: the `bench` process that
hands a command over only waits)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

_IMPORT_CONSOLE = """
import sys
try:
    from bench_pipeline.cli import console
except ImportError:  # a checkout from before it (--tree): its entry point returned the code
    try:
        from bench_pipeline.cli import main  # (the hand-off to `bench serve`, when it had one)
    except ImportError:
        from bench_pipeline.cli.main import main

    def console():
        return main(sys.argv[1:])
"""

# `bench` as its console script runs it (`python -c ENTRY args...`): handed to a running
# `bench serve` of its home when there is one, else in its own process.
ENTRY = _IMPORT_CONSOLE + "sys.exit(console())\n"


def python_c(code: str, python: str | None = None) -> list[str]:
    """`python -P -c code`: a checkout's code run through `-c` (the `bench` entry, an import)
    from that checkout's PYTHONPATH alone. Without `-P` the current folder comes first on the
    module path, and run from another checkout it imports that checkout's bench_pipeline
    (perf/overhead.py --against timed this tree, unserved, as the other one that way)."""
    return [python or sys.executable, "-P", "-c", code]


# The same, printing its peak RSS at exit (VmHWM: its own process's, not a forked parent's).
ENTRY_WITH_PEAK_RSS = (
    _IMPORT_CONSOLE
    + """
import atexit

def peak_rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            sys.stderr.write("\\nPEAK_RSS_KB " + line.split()[1] + "\\n")

atexit.register(peak_rss)
sys.exit(console())
"""
)


def bench_env(home: Path, tree: Path) -> dict[str, str]:
    """The environment of a measured `bench` command: its home, and the checkout `tree` first on
    the module path (before the venv's own install)."""
    env = {
        **os.environ,
        "BENCH_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster_home"),
        "DAGSTER_DISABLE_TELEMETRY": "1",
        "PYTHONPATH": str(tree),
    }
    # A user's Python caches compiled modules; without it every `bench` start compiles the
    # checkout's modules again (~2 s here, where the shell sets PYTHONDONTWRITEBYTECODE=1).
    # Graders keep it where their check's `env` sets it, as the floors' grader commands do.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def start_server(argv: list[str], home: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """Run `argv` (a `bench ... serve` command line) and return once it says it is ready."""
    log = home / "serve.log"
    server = subprocess.Popen(
        argv, env=env, cwd=home, stdout=subprocess.DEVNULL, stderr=log.open("w")
    )
    deadline = time.monotonic() + 300
    while "ready on" not in log.read_text():
        if server.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"bench serve did not start:\n{log.read_text()[-2000:]}")
        time.sleep(0.1)
    return server


def busy_cpu() -> float:
    """CPU seconds every process of the machine has run so far (/proc/stat's first line:
    user, nice, system, irq and softirq; not idle, iowait or the hypervisor's steal).

    What a measurement that runs sandboxed commands counts instead of rusage: a process in
    bubblewrap's PID namespace is reaped by bubblewrap's own init, and bubblewrap exits
    without waiting for that init (strace: its exit_group comes first), so no rusage of ours
    ever sees the CPU of a sandboxed agent or grader. Whatever else runs on the machine is
    counted too: measure on an otherwise idle machine."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def children_cpu() -> float:
    """CPU seconds (user + system) of every reaped descendant so far: xargs, bash, git and the
    graders for a floor; bench, its trials' git and graders for bench. Unlike wall time it
    barely moves when other work competes for the cores. Blind to sandboxed processes (see
    `busy_cpu`)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measured(fn: Callable[[], float], cpu: Callable[[], float]) -> tuple[float, float]:
    """(wall, CPU) of one measurement: what `fn` returns (its wall seconds) and how much the
    `cpu` count (`busy_cpu`, or a rusage count) grew meanwhile."""
    before = cpu()
    wall = fn()
    return wall, cpu() - before


def reaped_cpu(pid: int) -> float:
    """CPU seconds of the reaped children of `pid` (/proc/<pid>/stat cutime + cstime): a
    served command's, its trials' included, once `bench serve` has collected it."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")


def served_cpu(pid: int, before: float) -> float:
    """What a served command added to the server's reaped children's CPU. The server collects
    a finished command within half a second of its exit: wait for it (up to 5 s)."""
    deadline = time.monotonic() + 5
    while (now := reaped_cpu(pid)) == before and time.monotonic() < deadline:
        time.sleep(0.02)
    return now - before


def served_commands(home: Path) -> int:
    """How many commands the `bench serve` of `home` handed to a child (its log says each)."""
    log = home / "serve.log"
    return sum(" runs bench " in line for line in log.read_text().splitlines())
