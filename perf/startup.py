"""Start-up cost: importing the definitions, `bench --help`, and a one-trial `bench run` against
the same trial as a plain shell script.

    python perf/startup.py [--rounds 3] [--tree PATH]

Each round runs, in a fresh process each and interleaved so machine noise hits all of them:
`python -c pass` (the interpreter's own start), `import dagster` (Dagster's own import: no
run in its own process starts faster), `import bench_pipeline.definitions`,
`bench --help`, the floor (bash: a fresh repository sharing the source's objects, `git reset
--hard` to the task's base, `git apply` of the reference patch, the task's check) and
`bench run` of one task × one `reference` config × 1 repetition in a BENCH_HOME reused across
rounds (a warm machine: one uncounted warm-up run first). Printed: medians over the rounds,
the same-round differences and ratios, the machine's CPU seconds during each command
(`warm_server.busy_cpu`: the run's grader is sandboxed, and no rusage sees a sandboxed
process's CPU; run it on an otherwise idle machine), and the harness's peak RSS (VmHWM) in
the run.
`--tree` measures another checkout of the code (e.g. an older commit unpacked with
`git archive`) with the same interpreter and packages. `--serve` also starts `bench serve`
(a warm process, bench_pipeline/cli/serve.py) for each checkout that has it and times the
same `bench run` handed to it: "bench run (served)", through the real `bench` entry point;
and "bench run (auto-started server)": the run in a home whose server its first (uncounted)
command started itself, as a command at a terminal does (BENCH_AUTO_SERVE=1 here: the
script's commands have no terminal).
"""

from __future__ import annotations

import argparse
import atexit
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from warm_server import (  # perf/ is sys.path[0]
    ENTRY,
    ENTRY_WITH_PEAK_RSS,
    busy_cpu,
    python_c,
    start_server,
)

ROOT = Path(__file__).resolve().parents[1]

ONE_TRIAL = """kind: BenchmarkLaunch
suite: invoices
configs:
  - {id: reference, agent: reference}
repetitions: 1
tasks: [amount-precision]
scorers: [checks]
max_parallel: 1
"""

# `bench` in its own process: no server runs on its home.
BENCH = ENTRY_WITH_PEAK_RSS


def floor_script(example: Path, work: Path, tree: Path) -> Path:
    """The trial as bash: what the harness does for it with nothing around it."""
    sys.path.insert(0, str(tree))
    from bench_pipeline.formats.loader import load_launch

    launch = load_launch(example / "factory" / "launches" / "one.yaml")
    (task,) = launch.tasks
    suite_dir = launch.suite.directory
    ws = work / "ws"
    q = shlex.quote
    objects = Path(task.repo) / ".git" / "objects"
    lines = [
        "set -eu",
        f"rm -rf {q(str(ws))}",
        f"git init -q --initial-branch=bench {q(str(ws))}",
        f"echo {q(str(objects))} > {q(str(ws))}/.git/objects/info/alternates",
        f"git -C {q(str(ws))} reset -q --hard {task.base_sha}",
        f"git -C {q(str(ws))} apply {q(str(suite_dir / task.reference_patch))}",
    ]
    for check in task.checks:
        argv = [
            a.replace("{inputs}", str(suite_dir)).replace("{workspace}", str(ws))
            for a in check.command
        ]
        if argv[0] in ("python", "python3"):
            argv[0] = sys.executable
        lines.append(f"(cd {q(str(ws))} && {shlex.join(argv)}) >/dev/null 2>&1")
    lines.append(f"rm -rf {q(str(ws))}")
    script = work / "trial.sh"
    script.write_text("\n".join(lines) + "\n")
    return script


def timed(argv: list[str], env: dict[str, str]) -> tuple[float, str, float]:
    """(wall seconds, stderr, the machine's CPU seconds meanwhile). The machine's, not the
    process tree's rusage: the run's grader is sandboxed, and no rusage of ours sees the CPU
    of a sandboxed process (`warm_server.busy_cpu`); a served command's is the server's
    child's, which this counts as well."""
    before = busy_cpu()
    start = time.perf_counter()
    # From a neutral folder: `python -c` puts the working directory first on sys.path, which
    # would import a checkout found there instead of the one PYTHONPATH names.
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=env["BENCH_HOME"])
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(
            f"{shlex.join(argv[:4])}... exited {proc.returncode}:\n{proc.stderr[-2000:]}"
        )
    return elapsed, proc.stderr, busy_cpu() - before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--tree",
        type=Path,
        action="append",
        help="a checkout to measure (repeat to compare checkouts in the same rounds; "
        "default: this one)",
    )
    parser.add_argument(
        "--serve", action="store_true", help="also time `bench run` handed to `bench serve`"
    )
    args = parser.parse_args()
    trees = [t.resolve() for t in (args.tree or [ROOT])]
    servers: list[subprocess.Popen[bytes]] = []
    auto_homes: list[tuple[Path, dict[str, str]]] = []
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        tmpdir = Path(tmp)
        example = tmpdir / "example"
        subprocess.run(
            [py, str(ROOT / "data/seed.py"), "--out", str(example)], check=True, capture_output=True
        )
        launch = example / "factory" / "launches" / "one.yaml"
        launch.write_text(ONE_TRIAL)
        work = tmpdir / "plain"
        work.mkdir()
        script = floor_script(example, work, trees[0])
        plans: list[tuple[str, dict[str, str], dict[str, list[str]]]] = []
        for i, tree in enumerate(trees):
            home = tmpdir / f"home-{i}"
            env = {
                # A user's warm machine has the modules' bytecode cached: let it be written.
                **{k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"},
                "PYTHONPATH": str(tree),
                "BENCH_HOME": str(home),
                "DAGSTER_HOME": str(home / "dagster_home"),
                "DAGSTER_DISABLE_TELEMETRY": "1",
            }
            commands = {
                "python": python_c("pass", py),
                # Dagster's own import: what any run in its own process pays before the
                # definitions (a Dagster code location) add theirs
                "import dagster": python_c("import dagster", py),
                "import definitions": python_c("import bench_pipeline.definitions", py),
                "bench --help": [*python_c(BENCH, py), "--help"],
                "floor (bash)": ["bash", str(script)],
                "bench run": [*python_c(BENCH, py), "run", str(launch), "--quiet", "--json"],
            }
            if args.serve and (tree / "bench_pipeline" / "cli" / "serve.py").exists():
                served_home = tmpdir / f"served-{i}"
                served_home.mkdir()
                argv = [*python_c(ENTRY, py), "--home", str(served_home), "serve"]
                servers.append(start_server(argv, served_home, env))
                atexit.register(servers[-1].terminate)  # on an error too
                commands["bench run (served)"] = [
                    *python_c(ENTRY, py),
                    "--home",
                    str(served_home),
                    *["run", str(launch), "--quiet", "--json"],
                ]
            handoff = tree / "bench_pipeline" / "cli" / "handoff.py"
            if args.serve and handoff.exists() and "AUTO_SERVE_ENV" in handoff.read_text():
                # The default at a terminal: the first command (the uncounted warm-up) starts
                # the server itself; the timed ones are handed to it.
                auto_home = tmpdir / f"auto-{i}"
                auto_home.mkdir()
                auto_homes.append((auto_home, env))
                commands["bench run (auto-started server)"] = [
                    *["env", "BENCH_AUTO_SERVE=1", "BENCH_SERVE_IDLE=600"],
                    *python_c(ENTRY, py),
                    *["--home", str(auto_home), "run", str(launch), "--quiet", "--json"],
                ]
            plans.append((str(tree), env, commands))
        for _tree, env, _commands in plans:
            Path(env["BENCH_HOME"]).mkdir(parents=True, exist_ok=True)
        # Warm-up, uncounted: the Dagster instance is created, the page cache is warm.
        for _tree, env, commands in plans:
            for argv in commands.values():
                timed(argv, env)
        for auto_home, _env in auto_homes:  # (warm before the timed rounds, or it says why)
            log = auto_home / "serve.log"
            deadline = time.monotonic() + 120
            while "ready on" not in (log.read_text() if log.exists() else ""):
                if time.monotonic() > deadline:
                    sys.exit(f"the server the first command started is not ready: {log}")
                time.sleep(0.2)
        times = {t: {name: [] for name in c} for t, _e, c in plans}
        cpus = {t: {name: [] for name in c} for t, _e, c in plans}
        rss: dict[str, list[int]] = {t: [] for t, _e, _c in plans}
        for r in range(args.rounds):
            # Alternate which checkout goes first, so neither always runs on a cooler machine.
            for tree, env, commands in plans if r % 2 == 0 else reversed(plans):
                for name, argv in commands.items():
                    elapsed, err, cpu = timed(argv, env)
                    times[tree][name].append(elapsed)
                    cpus[tree][name].append(cpu)
                    if name == "bench run":
                        rss[tree].append(int(re.search(r"PEAK_RSS_KB (\d+)", err).group(1)))
                print(
                    f"round {r + 1} {tree}: "
                    + ", ".join(f"{n} {t[-1]:.3f} s" for n, t in times[tree].items()),
                    file=sys.stderr,
                )
        for server in servers:
            server.terminate()  # `bench serve` stops cleanly on SIGTERM
            server.wait(timeout=60)
        for auto_home, env in auto_homes:
            stop = [*python_c(ENTRY, py), "--home", str(auto_home), "serve", "--stop"]
            subprocess.run(stop, env=env, capture_output=True, timeout=120)
            served = (auto_home / "serve.log").read_text().count("runs bench --home")
            if served < args.rounds:  # a timed run in its own process: not the figure it names
                sys.exit(f"the auto-started server served {served} of {args.rounds} timed runs")
    for tree, _env, _commands in plans:
        report(tree, args.rounds, times[tree], rss[tree])
        # The machine's busy time while each command ran (a sandboxed grader's CPU reaches no
        # rusage of ours): work done, not time waited; nothing else should run meanwhile.
        print(
            "  CPU seconds (the machine's, medians): "
            + ", ".join(f"{n} {statistics.median(v):.3f}" for n, v in cpus[tree].items())
        )
    if len(plans) > 1:
        first, *others = [t for t, _e, _c in plans]
        for other in others:
            for name in ("import definitions", "bench --help", "bench run", "bench run (served)"):
                if name not in times[other] or name not in times[first]:
                    continue
                for what, table in (("wall", times), ("CPU", cpus)):
                    ratios = [
                        a / b for a, b in zip(table[other][name], table[first][name], strict=True)
                    ]
                    print(
                        f"{name} ({what}): {other} / {first} = "
                        f"{statistics.median(ratios):.2f}x (same round)"
                    )


def report(tree: str, rounds: int, times: dict[str, list[float]], rss: list[int]) -> None:
    def same_round(a: str, b: str, op: str) -> float:
        pairs = zip(times[a], times[b], strict=True)
        return statistics.median([x - y if op == "-" else x / y for x, y in pairs])

    print(f"tree: {tree}  rounds: {rounds}  (medians, seconds)")
    for name, values in times.items():
        print(f"  {name:20s} {statistics.median(values):7.3f}")
    print(
        f"  import dagster - python:     {same_round('import dagster', 'python', '-'):.3f} s"
        "  (a floor under any own-process run's fixed cost)"
    )
    print(f"  import definitions - python: {same_round('import definitions', 'python', '-'):.3f} s")
    print(f"  bench --help - python:       {same_round('bench --help', 'python', '-'):.3f} s")
    print(
        f"  bench run - floor:           {same_round('bench run', 'floor (bash)', '-'):.3f} s"
        "  (the fixed cost of a one-trial run)"
    )
    print(f"  bench run / floor:           {same_round('bench run', 'floor (bash)', '/'):.2f}x")
    print(f"  bench run peak RSS (VmHWM):  {statistics.median(rss) / 1024:.0f} MB")
    if "bench run (served)" in times:
        print(
            f"  bench run (served) - floor:  "
            f"{same_round('bench run (served)', 'floor (bash)', '-'):.3f} s"
            "  (the same run handed to a warm `bench serve`)"
        )
        print(
            f"  bench run (served) / floor:  "
            f"{same_round('bench run (served)', 'floor (bash)', '/'):.2f}x"
        )
    auto = "bench run (auto-started server)"
    if auto in times:
        print(
            f"  {auto} - floor:  {same_round(auto, 'floor (bash)', '-'):.3f} s"
            "  (the default at a terminal: the server the first command started)"
        )


if __name__ == "__main__":
    main()
