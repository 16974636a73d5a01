"""The 100-trial fixture launch in-process (`bench run`) and through the celery executor with 2 workers.

    python perf/scaleout.py [--tasks 20] [--reps 5] [--jobs 2] [--workers 2] [--rounds 1]

(Not named celery.py: run as a script, perf/ is first on sys.path and a perf/celery.py would
shadow the celery package the executor imports.)

Builds the fixture of perf/compare.py (a repo at a pinned commit, the `reference` agent applying
each task's patch, a pytest grader per task), starts redis-server on a free 127.0.0.1 port and
<workers> `dagster-celery` workers (each in its own process group, stopped at the end, on error
too), then times, in the same round and in alternating order:

- in-process: `bench run LAUNCH --parallel <jobs> --repeats <reps>` in a fresh process and home;
- celery: a fresh process that freezes the same launch (`start_run`), submits every
  config x repetition partition of `bench_pipeline.defs.celery`'s partition job one after the
  other (as docs/deploy.md and test_celery.py do), then its results job; every step runs in a
  worker. A fresh home and DAGSTER_HOME, shared with the workers, per measurement.

Both are checked to have run and passed every trial (outside the timing). It prints both wall
times and the per-partition overhead of the celery path: (celery - in-process) / partitions.
The workers' start-up is not counted (a deployed pool is already running).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import compare  # noqa: E402 - perf/ is sys.path[0] when run as a script

WORKERS_PREFIX = "bench-perf-w"


def submit(launch: Path, home: Path, reps: int, jobs: int) -> None:
    """The celery path, run in a child process (see --submit): freeze, partitions, results."""
    import dagster as dg

    import bench_pipeline.defs.celery as dc
    from bench_pipeline.defs.launcher import ensure_dagster_home
    from bench_pipeline.defs.partitions import register_configs
    from bench_pipeline.runs.paths import BenchPaths
    from bench_pipeline.runs.start import start_run

    paths = BenchPaths.from_home(home)
    ensure_dagster_home(paths)
    run = start_run(launch, paths, overrides={"parallel": jobs, "repeats": reps})
    instance = dg.DagsterInstance.get()
    register_configs(instance, run.suite, [c.id for c in run.launch.configs])
    for config_id, rep in run.partitions():
        result = dg.execute_job(
            dg.reconstructable(dc.define_partition_job),
            instance=instance,
            run_config=dc.partition_run_config(run.run_id, str(home)),
            tags=dc.partition_tags(run.suite, config_id, rep, run.run_id),
        )
        if not result.success:
            raise RuntimeError(f"partition {config_id}|{rep} failed")
    result = dg.execute_job(
        dg.reconstructable(dc.define_results_job),
        instance=instance,
        run_config=dc.results_run_config(run.run_id, str(home)),
        tags={"bench/run_id": run.run_id},
    )
    if not result.success:
        raise RuntimeError("results failed")
    sys.stdout.write(json.dumps({"run_id": run.run_id, "partitions": len(run.partitions())}))


def time_celery(fx: compare.Fixture, home: Path, broker: str, n_tasks: int, reps: int, jobs: int):
    env = {
        **compare.bench_env(home),
        "BENCH_CELERY_BROKER": broker,
        "BENCH_CELERY_BACKEND": broker,
    }
    argv = [sys.executable, __file__, "--submit", str(fx.launch(n_tasks)), "--home", str(home)]
    argv += ["--reps", str(reps), "--jobs", str(jobs)]
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, cwd=ROOT)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise RuntimeError(f"celery submission exited {proc.returncode}:\n{proc.stderr[-4000:]}")
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # The same check as for `bench run`, from the results the workers built.
    bench = Path(sys.executable).parent / "bench"
    results = subprocess.run(
        [str(bench), "results", out["run_id"], "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    compare.check_bench_result(results.stdout, n_tasks * reps)
    return elapsed, out["partitions"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=2, help="max_parallel: trials at once per step")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--isolation", choices=["process", "sandbox"], default="process")
    parser.add_argument("--submit", help=argparse.SUPPRESS)  # child mode: the celery path
    parser.add_argument("--home", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # each round's line as it is measured
    if args.submit:
        submit(Path(args.submit), Path(args.home), args.reps, args.jobs)
        return

    from bench_pipeline_tests.servers import (
        redis_available,
        server_env,
        start_celery_worker,
        start_redis,
    )

    if not redis_available():
        sys.exit("redis-server is not installed (make system-deps installs it)")
    # SIGTERM/SIGHUP end the script through the finally below, which stops every server.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda signum, _frame: sys.exit(128 + signum))

    servers = []
    with tempfile.TemporaryDirectory(prefix="bench-scaleout-") as tmp:
        tmpdir = Path(tmp)
        try:
            fx = compare.build_fixture(tmpdir / "fixture", args.tasks, args.isolation, [args.tasks])
            logs = tmpdir / "logs"
            redis = start_redis(log_dir=logs)
            servers.append(redis)
            os.environ["BENCH_CELERY_BROKER"] = redis.url
            os.environ["BENCH_CELERY_BACKEND"] = redis.url
            import yaml

            import bench_pipeline.defs.celery as dc

            config_yaml = tmpdir / "celery.yaml"
            config_yaml.write_text(yaml.safe_dump(dc.worker_config()))
            # A step runs against the instance its task names (the submitter's, a fresh one
            # per measurement) and the bench home in its run config; the worker's own
            # DAGSTER_HOME is only what `dagster-celery worker start` insists on at start-up.
            worker_home = tmpdir / "worker_dagster_home"
            worker_home.mkdir()
            worker_env = server_env(
                DAGSTER_HOME=str(worker_home),
                BENCH_CELERY_BROKER=redis.url,
                BENCH_CELERY_BACKEND=redis.url,
                PYTHONPATH=compare.bench_env(tmpdir)["PYTHONPATH"],
            )
            worker_env.pop("PYTHONDONTWRITEBYTECODE", None)
            for i in range(1, args.workers + 1):
                servers.append(
                    start_celery_worker(
                        f"{WORKERS_PREFIX}{i}",
                        config_yaml=config_yaml,
                        env=worker_env,
                        log_dir=logs,
                        cwd=ROOT,
                    )
                )
            homes = compare.Homes(tmpdir / "homes")
            trials = args.tasks * args.reps
            print(
                f"fixture: {args.tasks} tasks x {args.reps} reps = {trials} trials, max_parallel "
                f"{args.jobs}; celery: {args.workers} workers (concurrency 1), redis {redis.url}"
            )
            pairs = []
            partitions = 0
            for rnd in range(1, args.rounds + 1):
                order = ("inproc", "celery") if rnd % 2 else ("celery", "inproc")
                got: dict[str, float] = {}
                for which in order:
                    home = homes.new()
                    try:
                        if which == "inproc":
                            got[which] = compare.time_bench(
                                fx, home, args.tasks, args.reps, args.jobs
                            )
                        else:
                            got[which], partitions = time_celery(
                                fx, home, redis.url, args.tasks, args.reps, args.jobs
                            )
                    finally:
                        homes.drop(home)
                pairs.append((got["inproc"], got["celery"]))
                print(
                    f"round {rnd}:  in-process {got['inproc']:6.2f} s   celery {got['celery']:6.2f} s"
                    f"   ratio {got['celery'] / got['inproc']:.2f}x"
                )
            inproc = statistics.median(p for p, _ in pairs)
            celery = statistics.median(c for _, c in pairs)
            print(f"in-process (bench run): {inproc:.2f} s  ({inproc / trials:.3f} s/trial)")
            print(
                f"celery ({args.workers} workers):     {celery:.2f} s  ({celery / trials:.3f} s/trial)"
            )
            print(
                f"celery step overhead per partition: ({celery:.2f} - {inproc:.2f}) / {partitions} "
                f"partitions = {(celery - inproc) / partitions:.2f} s "
                f"({(celery - inproc) / trials:.3f} s per trial)"
            )
        finally:
            for server in reversed(servers):
                server.stop()
            if servers:
                stopped = ", ".join(f"{s.name} (process group {s.pgid})" for s in servers)
                print(f"stopped: {stopped}", flush=True)


if __name__ == "__main__":
    main()
