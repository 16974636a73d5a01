"""bench run against a plain shell loop on the issue-16 fixture: same-round ratios and a fixed/per-trial fit.

    python perf/compare.py [--rounds 3] [--jobs 2 1] [--tasks 20] [--reps 5] [--quick]

The fixture, built here in a temp folder: a git repository with one small module per task at a
pinned commit, a reference patch per task that fixes its module, and a real pytest test file
per task as the grader (`python -m pytest -q -p no:cacheprovider`, plugin auto-loading off as
the harness sets it for graders). 20 tasks x 5 repetitions = 100 trials of the `reference`
agent, which applies the patch.

The floor is a bash script per trial run by `xargs -P <jobs>`: `git clone --local --shared` at
the commit, `git apply` of the patch, the grader, `rm -rf` of the workspace. bench is the real
`bench run` in a fresh process and a fresh BENCH_HOME per measurement. Within a round every
measurement runs floor, bench, floor back to back (the floor's figure is the mean of the two,
which cancels a drift in the machine's load), so a noisy machine hits both alike; the
same-round ratio is what counts, and its median over rounds is printed. CPU seconds of all
descendants are printed next to wall time: on a shared machine they move far less. With
`--isolation sandbox` they are the machine's busy seconds instead (`warm_server.busy_cpu`: no
rusage sees a sandboxed process's CPU), so nothing else should run meanwhile. The fit
runs N = 1, <tasks> and <tasks> x <reps> trials of each and solves
wall = fixed + N x per_trial (and the same for CPU) by least squares over every round's points.

`--serve` hands every `bench run` to one `bench serve` started first (a warm process,
bench_pipeline/cli/serve.py) on one home kept across the measurements, as a user's machine
keeps it: the same `bench` command, without its start-up.

Only the floor and bench are compared (no other harness is run).
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from warm_server import bench_env as home_env  # perf/ is sys.path[0]
from warm_server import (
    busy_cpu,
    children_cpu,
    measured,
    reaped_cpu,
    served_cpu,
    start_server,
)

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from overhead import time_plain  # noqa: E402 - perf/ is sys.path[0] when run as a script

SUITE = "perf"
CONFIG = "reference"
# The grader's environment as the harness gives it to graders, plus no .pyc files written next
# to the test files (the harness's frozen inputs are read-only in the sandbox).
GRADER_ENV = {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PYTHONDONTWRITEBYTECODE": "1"}
GRADER_ARGV = ["-m", "pytest", "-q", "-p", "no:cacheprovider"]


@dataclass
class Fixture:
    root: Path
    repo: Path
    sha: str
    factory: Path
    tasks: list[str]

    @property
    def suite_dir(self) -> Path:
        return self.factory / "benchmarks" / SUITE

    def launch(self, n_tasks: int) -> Path:
        return self.factory / "launches" / f"tasks{n_tasks}.yaml"


def _git(*args: str, cwd: Path) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "perf",
        "GIT_AUTHOR_EMAIL": "perf@example.invalid",
        "GIT_COMMITTER_NAME": "perf",
        "GIT_COMMITTER_EMAIL": "perf@example.invalid",
    }
    out = subprocess.run(
        ["git", *args], cwd=cwd, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout


def _yaml(path: Path, data: object) -> None:
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def build_fixture(dest: Path, n_tasks: int, isolation: str, launch_sizes: list[int]) -> Fixture:
    """The repository, a factory with one suite of `n_tasks` tasks, and a launch per size."""
    repo = dest / "repo"
    pkg = repo / "calc"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    tasks = [f"t{i:02d}" for i in range(n_tasks)]
    for task in tasks:
        (pkg / f"{task}.py").write_text(
            f'"""Module of task {task}."""\n\n\ndef value(x: int) -> int:\n    return x\n'
        )
    (repo / ".gitignore").write_text("__pycache__/\n")
    _git("init", "-q", "--initial-branch=main", cwd=repo)
    _git("add", ".", cwd=repo)
    _git("commit", "-q", "-m", "base", cwd=repo)
    sha = _git("rev-parse", "HEAD", cwd=repo).strip()

    factory = dest / "factory"
    suite_dir = factory / "benchmarks" / SUITE
    (factory / "prices.yaml").parent.mkdir(parents=True, exist_ok=True)
    (factory / "prices.yaml").write_text("# no model is called\n{}\n")
    _yaml(
        factory / "agents" / "reference.yaml",
        {"kind": "reference", "timeout_seconds": 120, "isolation": isolation},
    )
    _yaml(
        suite_dir / "suite.yaml", {"title": "perf fixture", "agent": "reference", "repo": str(repo)}
    )
    for i, task in enumerate(tasks):
        # The reference patch: value() must add the task's number.
        module = pkg / f"{task}.py"
        original = module.read_text()
        module.write_text(original.replace("return x", f"return x + {i + 1}"))
        patch = _git("diff", cwd=repo)
        module.write_text(original)
        (suite_dir / "references").mkdir(parents=True, exist_ok=True)
        (suite_dir / "references" / f"{task}.patch").write_text(patch)
        grader = suite_dir / "graders" / f"test_{task}.py"
        grader.parent.mkdir(parents=True, exist_ok=True)
        grader.write_text(
            f"from calc.{task} import value\n\n\n"
            f"def test_adds_{i + 1}():\n    assert value(0) == {i + 1}\n    assert value(2) == {i + 3}\n"
        )
        _yaml(
            suite_dir / "tasks" / f"{task}.yaml",
            {
                "title": f"value() of {task} adds {i + 1}",
                "base_ref": sha,
                "prompt": f"calc.{task}.value(x) must return x + {i + 1}.",
                "checks": [
                    {
                        "id": "AC-1",
                        "description": f"value adds {i + 1}",
                        "command": ["python", *GRADER_ARGV, f"{{inputs}}/graders/test_{task}.py"],
                        "files": [f"graders/test_{task}.py"],
                        "timeout_seconds": 60,
                        "env": {"PYTHONDONTWRITEBYTECODE": "1"},
                    }
                ],
            },
        )
    for size in sorted(set(launch_sizes)):
        _yaml(
            factory / "launches" / f"tasks{size}.yaml",
            {
                "kind": "BenchmarkLaunch",
                "suite": SUITE,
                "configs": [{"id": CONFIG, "agent": "reference"}],
                "repetitions": 1,
                "scorers": ["checks"],
                "max_parallel": 1,
                "tasks": tasks[:size],
            },
        )
    _git("init", "-q", "--initial-branch=main", cwd=factory)
    _git("add", ".", cwd=factory)
    _git("commit", "-q", "-m", "perf factory", cwd=factory)
    return Fixture(dest, repo, sha, factory, tasks)


def floor_scripts(fx: Fixture, work: Path, n_tasks: int, reps: int) -> list[Path]:
    """One bash script per trial: the same work as a trial of the `reference` agent."""
    work.mkdir(parents=True, exist_ok=True)
    env = " ".join(f"{k}={v}" for k, v in GRADER_ENV.items())
    scripts = []
    for rep in range(1, reps + 1):
        for task in fx.tasks[:n_tasks]:
            ws = shlex.quote(str(work / f"ws-{task}-{rep}"))
            patch = shlex.quote(str(fx.suite_dir / "references" / f"{task}.patch"))
            grader = shlex.quote(str(fx.suite_dir / "graders" / f"test_{task}.py"))
            python = shlex.quote(sys.executable)
            lines = [
                "set -eu",  # a failing step (the grader too) fails the measurement
                f"rm -rf {ws}",
                f"git clone -q --local --shared --no-checkout {shlex.quote(str(fx.repo))} {ws}",
                f"git -C {ws} checkout -q --detach {fx.sha}",
                f"git -C {ws} apply {patch}",
                f"(cd {ws} && {env} {python} {shlex.join(GRADER_ARGV)} {grader}) >/dev/null 2>&1",
                f"rm -rf {ws}",
            ]
            script = work / f"trial-{task}-{rep}.sh"
            script.write_text("\n".join(lines) + "\n")
            scripts.append(script)
    return scripts


def bench_env(home: Path) -> dict[str, str]:
    return home_env(home, ROOT)


def time_bench(fx: Fixture, home: Path, n_tasks: int, reps: int, jobs: int) -> float:
    """Wall time of `bench run` in a fresh process (handed to `bench serve` when one runs on
    `home`); fails unless every trial ran and passed (a measurement of broken trials would be
    no measurement)."""
    bench = Path(sys.executable).parent / "bench"
    argv = [
        str(bench),
        "--home",
        str(home),
        "run",
        str(fx.launch(n_tasks)),
        "--parallel",
        str(jobs),
    ]
    argv += ["--repeats", str(reps), "--quiet", "--json"]
    start = time.perf_counter()
    proc = subprocess.run(argv, env=bench_env(home), capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"bench run exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    check_bench_result(proc.stdout, n_tasks * reps)
    return elapsed


def check_bench_result(stdout: str, trials: int) -> None:
    data = json.loads(stdout)
    rows = [r for r in data["config_table"] if r["config_id"] == CONFIG]
    if not rows or rows[0]["trials"] != trials or rows[0]["pass_rate"] != 1.0:
        raise RuntimeError(f"bench run did not pass {trials} trials: {rows}")


def fit(points: list[tuple[int, float]]) -> tuple[float, float] | None:
    """(fixed, per_trial) of wall = fixed + N x per_trial, least squares; None if N never varies."""
    if len({n for n, _ in points}) < 2:
        return None
    slope, intercept = statistics.linear_regression([n for n, _ in points], [w for _, w in points])
    return intercept, slope


class Homes:
    """A fresh, empty BENCH_HOME per measurement, removed after it (outside the timing)."""

    def __init__(self, root: Path):
        self.root = root
        self.count = 0

    def new(self) -> Path:
        self.count += 1
        return self.root / f"home-{self.count:03d}"

    def drop(self, home: Path) -> None:
        shutil.rmtree(home, ignore_errors=True)


def _jobs(jobs: int) -> str:
    return f"{jobs} job{'s' if jobs > 1 else ' '}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, nargs="+", default=[2, 1], help="parallel trials")
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5, help="repetitions of every task")
    parser.add_argument(
        "--isolation",
        choices=["process", "sandbox"],
        default="process",
        help="the agent's isolation (the floor runs unsandboxed, so process is the same work)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="a smoke run: 1 round, 5 tasks x 2 reps, 2 jobs"
    )
    parser.add_argument(
        "--serve", action="store_true", help="hand every bench run to one warm `bench serve`"
    )
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # each round's line as it is measured
    # SIGTERM/SIGHUP leave through the `with` below, so the temp folder is removed.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))
    if args.quick:
        args.rounds, args.tasks, args.reps, args.jobs = 1, 5, 2, [2]
    full = args.tasks * args.reps
    # (tasks, reps) per fit point: 1 trial, one repetition of every task, the whole fixture.
    sizes = sorted({(1, 1), (args.tasks, 1), (args.tasks, args.reps)}, key=lambda s: s[0] * s[1])

    with tempfile.TemporaryDirectory(prefix="bench-compare-") as tmp:
        tmpdir = Path(tmp)
        fx = build_fixture(tmpdir / "fixture", args.tasks, args.isolation, [t for t, _ in sizes])
        homes = Homes(tmpdir / "homes")
        scripts = {s: floor_scripts(fx, tmpdir / "floor", *s) for s in sizes}

        # Sandboxed graders' CPU reaches no rusage of ours: then the machine's busy time is
        # counted for both (and a served run's is in it, the server's child's included).
        sandboxed = args.isolation == "sandbox"
        cpu_count = busy_cpu if sandboxed else children_cpu

        def floor(size: tuple[int, int], jobs: int) -> tuple[float, float]:
            return measured(lambda: time_plain(scripts[size], jobs), cpu_count)

        served = tmpdir / "served-home" if args.serve else None
        server = None
        if served is not None:
            served.mkdir(parents=True)
            bench_script = str(Path(sys.executable).parent / "bench")
            argv = [bench_script, "--home", str(served), "serve"]
            server = start_server(argv, served, bench_env(served))
            atexit.register(server.terminate)  # on an error or SIGTERM too

        def bench(size: tuple[int, int], jobs: int) -> tuple[float, float]:
            if served is not None and server is not None:

                def run() -> float:
                    return time_bench(fx, served, size[0], size[1], jobs)

                if sandboxed:  # (the machine's count has the server's child in it)
                    return measured(run, cpu_count)
                before = reaped_cpu(server.pid)
                wall, cpu = measured(run, cpu_count)
                return wall, cpu + served_cpu(server.pid, before)
            home = homes.new()
            try:
                return measured(lambda: time_bench(fx, home, size[0], size[1], jobs), cpu_count)
            finally:
                homes.drop(home)

        # Uncounted warm-up of both (page cache, .pyc files, git's first run).
        floor(sizes[-1], max(args.jobs))
        bench(sizes[0], 1)

        print(
            f"fixture: {args.tasks} tasks x {args.reps} reps = {full} trials; pytest grader; "
            f"agent isolation: {args.isolation}; rounds: {args.rounds}; jobs: {args.jobs}"
            + ("; bench: handed to a warm `bench serve`" if served else "")
        )
        print(f"cores: {os.cpu_count()}; load average at start: {os.getloadavg()[0]:.2f}")
        print(
            "each measurement: floor, bench, floor back to back; the floor's figure is the mean "
            "of the two around bench (cancels drift in the machine's load)"
        )
        # runs[(size, jobs)] = per round ((floor wall, floor cpu), (bench wall, bench cpu))
        Pair = tuple[tuple[float, float], tuple[float, float]]
        runs: dict[tuple[tuple[int, int], int], list[Pair]] = {}
        for rnd in range(1, args.rounds + 1):
            for jobs in args.jobs:
                for size in sizes:
                    f1 = floor(size, jobs)
                    b = bench(size, jobs)
                    f2 = floor(size, jobs)
                    f = ((f1[0] + f2[0]) / 2, (f1[1] + f2[1]) / 2)
                    runs.setdefault((size, jobs), []).append((f, b))
                (fw, fc), (bw, bc) = runs[(sizes[-1], jobs)][-1]
                print(
                    f"round {rnd}  {_jobs(jobs)}  {full} trials:  floor {fw:6.2f} s  "
                    f"bench {bw:6.2f} s  ratio {bw / fw:.2f}x   |  cpu: floor {fc:6.2f} s  "
                    f"bench {bc:6.2f} s  ratio {bc / fc:.2f}x"
                )
        print()
        for jobs in args.jobs:
            pairs = runs[(sizes[-1], jobs)]
            ratios = [b[0] / f[0] for f, b in pairs]
            cpu_ratios = [b[1] / f[1] for f, b in pairs]
            fm = statistics.median(f[0] for f, _ in pairs)
            bm = statistics.median(b[0] for _, b in pairs)
            print(
                f"{_jobs(jobs)}, {full} trials: median same-round ratio "
                f"{statistics.median(ratios):.2f}x  (ratios {', '.join(f'{r:.2f}' for r in ratios)}; "
                f"median floor {fm:.2f} s = {fm / full:.3f} s/trial, bench {bm:.2f} s); "
                f"cpu ratio {statistics.median(cpu_ratios):.2f}x"
            )
        print()
        ns = ", ".join(str(t * r) for t, r in sizes)
        print(f"fit wall = fixed + N x per_trial over N = {ns}, every round (cpu: the same fit):")
        for jobs in args.jobs:
            for tool, index in (("floor", 0), ("bench", 1)):
                shown = []
                for what, unit in ((0, "wall"), (1, "cpu")):
                    points = [
                        (t * r, pair[index][what])
                        for t, r in sizes
                        for pair in runs[((t, r), jobs)]
                    ]
                    result = fit(points)
                    shown.append(
                        f"{unit}: n/a (needs two sizes)"
                        if result is None
                        else f"{unit}: fixed {result[0]:6.2f} s  per trial {result[1]:.3f} s"
                    )
                medians = "  ".join(
                    f"N={t * r}: {statistics.median(p[index][0] for p in runs[((t, r), jobs)]):.2f} s"
                    for t, r in sizes
                )
                print(
                    f"  {_jobs(jobs)}  {tool}:  {shown[0]}   |  {shown[1]}   (wall medians {medians})"
                )
        if server is not None:
            server.terminate()  # `bench serve` stops cleanly on SIGTERM
            server.wait(timeout=60)


if __name__ == "__main__":
    main()
