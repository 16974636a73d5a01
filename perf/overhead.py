"""Harness overhead: the demo's trials through `bench run` against the same work as a plain loop.

    python perf/overhead.py [--rounds 2] [--parallel 2] [--serve] [--isolation process]
        [--against OTHER_CHECKOUT]

The plain floor is a bash script per trial run by `xargs -P <parallel>`: a fresh repository
sharing the source's objects, `git apply` of the patch the agent would apply (reference patch,
recorded original, or nothing), then every check command. The pipeline is the real thing:
`bench run` in a fresh process and a fresh BENCH_HOME (Python start-up, Dagster runs on a
persistent SQLite instance, evidence, Parquet, scoring and derived tables included), in one
home reused across rounds as a user's is. Both run in the same invocation, alternating, after
one uncounted warm-up each, so machine noise hits both; the ratio is what counts.

`--isolation process` runs the demo's agents and graders without the bubblewrap sandbox (the
demo's default is `sandbox` where bubblewrap runs; the plain loop never sandboxes), to tell the
sandbox's own cost from the harness's.

`--against DIR` also times another checkout's `bench run` (e.g. `git archive <commit> | tar -x
-C DIR`) in the same rounds, in its own home (and its own `bench serve` with `--serve`), the two
in alternating order, and prints this tree's same-round ratio to it.

`--serve` hands every `bench run` to one `bench serve` of that home, started first (a warm
process, bench_pipeline/cli/serve.py): the same `bench` command, without its start-up.

Each measurement's CPU time is counted too: the machine's, from /proc/stat (every process, the
sandboxed agents and graders included: bubblewrap never collects its own init, so no rusage
of ours sees them). Its same-round ratio is a second figure, of the work done rather than of
the time waited; run the script on an otherwise idle machine, since whatever else runs is
counted too.
"""

from __future__ import annotations

import argparse
import atexit
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import warm_server  # perf/ is sys.path[0]

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def plain_scripts(example: Path, work: Path, repeats: int) -> list[Path]:
    from bench_pipeline.formats.loader import load_launch

    launch = load_launch(example / "factory" / "launches" / "demo.yaml")
    suite_dir = launch.suite.directory
    scripts = []
    for rep in range(1, repeats + 1):
        for config in launch.configs:
            for task in launch.tasks:
                if config.agent.kind == "replay" and task.original is None:
                    continue  # nothing to replay: the pipeline records it without running
                patch = None
                if config.agent.kind == "reference":
                    patch = suite_dir / task.reference_patch
                elif config.agent.kind == "replay":
                    patch = work / f"original-{task.id}.patch"
                    patch.write_text(task.original.patch or "")
                ws = work / f"ws-{task.id}-{config.id}-{rep}"
                objects = Path(task.repo) / ".git" / "objects"
                lines = [
                    "set -u",
                    f"rm -rf {shlex.quote(str(ws))}",
                    f"git init -q --initial-branch=bench {shlex.quote(str(ws))}",
                    f"echo {shlex.quote(str(objects))} > {shlex.quote(str(ws))}/.git/objects/info/alternates",
                    f"git -C {shlex.quote(str(ws))} reset -q --hard {task.base_sha}",
                ]
                if patch is not None:
                    lines.append(f"git -C {shlex.quote(str(ws))} apply {shlex.quote(str(patch))}")
                for check in task.checks:
                    argv = [
                        a.replace("{inputs}", str(suite_dir)).replace("{workspace}", str(ws))
                        for a in check.command
                    ]
                    if argv[0] in ("python", "python3"):
                        argv[0] = sys.executable
                    lines.append(
                        f"(cd {shlex.quote(str(ws))} && {shlex.join(argv)}) >/dev/null 2>&1"
                    )
                lines.append(f"rm -rf {shlex.quote(str(ws))}")
                script = work / f"trial-{len(scripts):04d}.sh"
                script.write_text("\n".join(lines) + "\n")
                scripts.append(script)
    return scripts


Timing = tuple[float, float]  # (wall seconds, CPU seconds) of one measurement


def measured(fn: Callable[[], float]) -> Timing:
    """`fn`'s wall time and the machine's CPU time meanwhile: the demo's agents and graders
    run sandboxed, where no rusage sees them (`warm_server.busy_cpu`)."""
    return warm_server.measured(fn, warm_server.busy_cpu)


def time_plain(scripts: list[Path], parallel: int) -> float:
    start = time.perf_counter()
    subprocess.run(
        ["xargs", "-P", str(parallel), "-n", "1", "bash"],
        input="\n".join(str(s) for s in scripts),
        text=True,
        check=True,
    )
    return time.perf_counter() - start


def time_trial_layer(example: Path, home: Path, parallel: int, repeats: int) -> float:
    """The same trials through bench's own trial layer (workspace, agent, checks, evidence,
    Parquet rows, scoring) in one process, without Dagster or the CLI: every partition's
    trials in one pool, each partition scored as its last trial ends, as `bench run`'s launch
    does (partitions one after the other would add a wait at each partition's end that
    neither `bench run` nor the plain loop has)."""
    from bench_pipeline.runs.execute import execute_trials
    from bench_pipeline.runs.paths import BenchPaths
    from bench_pipeline.runs.score import score_partition
    from bench_pipeline.runs.start import start_run

    paths = BenchPaths.from_home(home)
    start = time.perf_counter()
    run = start_run(
        example / "factory/launches/demo.yaml",
        paths,
        overrides={"parallel": parallel, "repeats": repeats},
    )
    for config_id, rep in execute_trials(run, list(run.partitions()), paths):
        score_partition(run, config_id, rep, paths)
    return time.perf_counter() - start


def bench_env(home: Path, tree: Path | None = None) -> dict[str, str]:
    return warm_server.bench_env(home, tree or ROOT)


BENCH = Path(sys.executable).parent / "bench"


def bench_argv(tree: Path | None) -> list[str]:
    """`bench` as its console script runs it, from this checkout or from `tree`."""
    if tree is None:
        return [str(BENCH)]
    return warm_server.python_c(warm_server.ENTRY)


def time_pipeline(
    example: Path, home: Path, parallel: int, repeats: int, tree: Path | None = None
) -> float:
    start = time.perf_counter()
    subprocess.run(
        [
            *bench_argv(tree),
            "--home",
            str(home),
            "run",
            str(example / "factory/launches/demo.yaml"),
            "--parallel",
            str(parallel),
            "--repeats",
            str(repeats),
            "--quiet",
            "--json",
        ],
        env=bench_env(home, tree),
        cwd=home,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=2, help="repetitions (more = more trials)")
    parser.add_argument(
        "--isolation",
        choices=["sandbox", "process"],
        help="every demo agent's isolation (default: as the demo gives it)",
    )
    parser.add_argument(
        "--serve", action="store_true", help="hand each bench run to a warm `bench serve`"
    )
    parser.add_argument(
        "--against", type=Path, help="another checkout whose bench run is timed in the same rounds"
    )
    args = parser.parse_args()
    against = args.against.resolve() if args.against else None
    with tempfile.TemporaryDirectory(prefix="bench-perf-") as tmp:
        tmpdir = Path(tmp)
        example = tmpdir / "example"
        subprocess.run(
            [sys.executable, str(ROOT / "data/seed.py"), "--out", str(example)],
            check=True,
            capture_output=True,
        )
        if args.isolation:
            for agent in sorted((example / "factory" / "agents").glob("*.yaml")):
                agent.write_text(agent.read_text() + f"\nisolation: {args.isolation}\n")
        work = tmpdir / "plain"
        work.mkdir()
        scripts = plain_scripts(example, work, args.repeats)
        home, other_home = tmpdir / "home", tmpdir / "home-against"
        for folder, tree in ((home, None), (other_home, against)):
            folder.mkdir()
            if args.serve and (tree is not None or folder == home):
                argv = [*bench_argv(tree), "--home", str(folder), "serve"]
                server = warm_server.start_server(argv, folder, bench_env(folder, tree))
                atexit.register(server.terminate)  # on an error too
        # One warm-up of each, not counted: the first `bench run` in a new home also creates the
        # Dagster instance's SQLite schema (~1.5 s), which a user pays once, not per run.
        time_plain(scripts, args.parallel)
        time_pipeline(example, home, args.parallel, args.repeats)
        if against is not None:
            time_pipeline(example, other_home, args.parallel, args.repeats, against)
        plain_t: list[Timing] = []
        pipe_t: list[Timing] = []
        layer_t: list[Timing] = []
        other: list[float] = []

        def other_run() -> None:
            other.append(time_pipeline(example, other_home, args.parallel, args.repeats, against))

        for n in range(args.rounds):
            plain_t.append(measured(lambda: time_plain(scripts, args.parallel)))
            if against is not None and n % 2:  # alternating which of the two goes first
                other_run()
            pipe_t.append(
                measured(lambda: time_pipeline(example, home, args.parallel, args.repeats))
            )
            if against is not None and not n % 2:
                other_run()
            layer_t.append(
                measured(
                    lambda: time_trial_layer(example, tmpdir / "layer", args.parallel, args.repeats)
                )
            )
        plain, pipe, layer = ([w for w, _ in t] for t in (plain_t, pipe_t, layer_t))
        if args.serve:
            # A command the server cannot run (other code than it loaded) runs in its own
            # process and stops the server: its time would pass for a served one. Every timed
            # `bench run` (and the warm-up) must have been handed over.
            for folder, tree in ((home, None), (other_home, against)):
                if folder == other_home and against is None:
                    continue
                served = warm_server.served_commands(folder)
                label = tree or ROOT
                print(f"served: {served} of {args.rounds + 1} bench runs ({label})")
                if served != args.rounds + 1:
                    log = (folder / "serve.log").read_text()[-1500:]
                    raise SystemExit(f"bench run of {label} was not served:\n{log}")
        p, q, r = statistics.median(plain), statistics.median(pipe), statistics.median(layer)
        print(
            f"trials executed by both: {len(scripts)} (demo launch; replays without an original are recorded, not run)"
        )
        served = "; bench run: handed to a warm `bench serve`" if args.serve else ""
        isolation = args.isolation or "as the demo gives it (sandbox where bubblewrap runs)"
        print(
            f"parallelism: {args.parallel}; rounds: {args.rounds}; isolation: {isolation}{served}"
        )
        print(
            f"plain loop (bash + xargs): {', '.join(f'{t:.2f}s' for t in plain)}  median {p:.2f}s  ({p / len(scripts):.3f} s/trial)"
        )
        print(
            f"bench run (Dagster):       {', '.join(f'{t:.2f}s' for t in pipe)}  median {q:.2f}s  ({q / len(scripts):.3f} s/trial)"
        )
        print(
            f"trial layer (no Dagster):  {', '.join(f'{t:.2f}s' for t in layer)}  median {r:.2f}s  ({r / len(scripts):.3f} s/trial)"
        )
        # Same-round ratios too: the machine's speed drifts between rounds, and a round's
        # measurements ran back to back.
        pipe_ratios = [b / a for a, b in zip(plain, pipe, strict=True)]
        layer_ratios = [b / a for a, b in zip(plain, layer, strict=True)]
        print(
            f"overhead ratio, bench run:   {q / p:.2f}x  (same-round median "
            f"{statistics.median(pipe_ratios):.2f}x: {', '.join(f'{x:.2f}' for x in pipe_ratios)})"
        )
        print(
            f"overhead ratio, trial layer: {r / p:.2f}x  (same-round median "
            f"{statistics.median(layer_ratios):.2f}x: {', '.join(f'{x:.2f}' for x in layer_ratios)})"
        )
        start_up = "the hand-off to the server" if args.serve else "Python and Dagster start-up"
        print(
            f"fixed cost of bench run over its trial layer: {q - r:.2f}s ({start_up}, the "
            "launch's Dagster run and its catalog events, the derived tables and report)"
        )
        # CPU seconds: what the work cost, every process included (the sandboxed ones too)
        cpu = {
            key: [c for _, c in timings]
            for key, timings in (("plain", plain_t), ("bench", pipe_t), ("layer", layer_t))
        }
        print(
            "cpu (the machine's, every process), medians: "
            f"plain loop {statistics.median(cpu['plain']):.2f}s, "
            f"bench run {statistics.median(cpu['bench']):.2f}s, "
            f"trial layer {statistics.median(cpu['layer']):.2f}s"
        )
        for name, key in (("bench run", "bench"), ("trial layer", "layer")):
            ratios = [b / a for a, b in zip(cpu["plain"], cpu[key], strict=True)]
            print(
                f"cpu ratio, {name}:{' ' * (12 - len(name))}same-round median "
                f"{statistics.median(ratios):.2f}x: {', '.join(f'{x:.2f}' for x in ratios)}"
            )
        if against is not None:
            o = statistics.median(other)
            ratios = [b / a for a, b in zip(other, pipe, strict=True)]
            print(
                f"bench run ({against}): {', '.join(f'{t:.2f}s' for t in other)}  median {o:.2f}s"
            )
            print(
                f"bench run, this tree / {against}: same-round median "
                f"{statistics.median(ratios):.3f}x ({', '.join(f'{x:.3f}' for x in ratios)})"
            )


if __name__ == "__main__":
    main()
