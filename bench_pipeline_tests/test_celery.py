"""Scale-out: a 2-config x 2-repetition launch executed by two celery workers through
`bench_pipeline.defs.celery` gives the same config table as `bench run` in-process."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml

from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.servers import (
    redis_available,
    server_env,
    start_celery_worker,
    start_redis,
    stopping,
)

pytestmark = pytest.mark.slow

CONFIGS = ["reference", "noop"]
REPETITIONS = 2
COMPARED = ["config_id", "trials", "overall", "score_checks", "pass_rate"]
WORKERS = ["bench-w1", "bench-w2"]


def _write_launch(factory: Path) -> Path:
    from bench_pipeline.formats.loader import load_launch

    tasks = [t.id for t in load_launch(factory / "launches" / "demo.yaml").tasks][:2]
    launch = factory / "launches" / "celery.yaml"
    launch.write_text(
        yaml.safe_dump(
            {
                "kind": "BenchmarkLaunch",
                "suite": "invoices",
                "configs": [{"id": c, "agent": c} for c in CONFIGS],
                "repetitions": REPETITIONS,
                "tasks": tasks,
                "scorers": ["checks"],
                "max_parallel": 2,
            },
            sort_keys=False,
        )
    )
    return launch


def _config_table(home: Path, run_id: str):
    from bench_pipeline.runs.derived import compute_derived
    from bench_pipeline.runs.paths import BenchPaths

    table = compute_derived(BenchPaths.from_home(home).warehouse, run_id).tables["config_table"]
    return table[COMPARED].sort_values("config_id").reset_index(drop=True)


def _step_workers(instance, run_id: str) -> dict[str, str]:
    """step key -> celery worker hostname, from the engine event each worker reports."""
    out: dict[str, str] = {}
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if (
            event is None
            or not event.is_engine_event
            or "in celery worker" not in (event.message or "")
        ):
            continue
        entries = event.engine_event_data.metadata
        out[event.step_key] = str(entries["Celery worker"].value)
    return out


def test_celery_workers_match_in_process_run(
    factory: Path,
    bench_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    recwarn: pytest.WarningsRecorder,
) -> None:
    if not redis_available():
        pytest.skip("redis-server is not installed (make system-deps installs it)")
    pytest.importorskip(
        "dagster_celery",
        reason="dagster-celery is not installed: pip install -e '.[celery]' (needs the "
        "integration release matching the pinned dagster, see pyproject.toml)",
    )
    launch = _write_launch(factory)

    # ---- the same launch in-process (`bench run`), in its own bench home and instance
    inproc_home = tmp_path / "inproc-home"
    with monkeypatch.context() as m:
        m.setenv("BENCH_HOME", str(inproc_home))
        m.setenv("DAGSTER_HOME", str(inproc_home / "dagster_home"))
        code, _, err = run_bench("run", str(launch), "--quiet", home=inproc_home)
    assert code == 0, err
    from bench_pipeline.runs.paths import BenchPaths
    from bench_pipeline.runs.start import latest_run_id

    inproc_run = latest_run_id(BenchPaths.from_home(inproc_home).warehouse)
    expected = _config_table(inproc_home, inproc_run)

    # ---- through celery: a broker, two workers, one shared DAGSTER_HOME and BENCH_HOME
    import dagster as dg

    from bench_pipeline.defs.launcher import ensure_dagster_home
    from bench_pipeline.defs.partitions import register_configs
    from bench_pipeline.runs.start import start_run

    paths = BenchPaths.from_home(bench_home)
    dagster_home = ensure_dagster_home(paths)  # also sets DAGSTER_HOME (monkeypatched)
    logs = tmp_path / "logs"
    redis = start_redis(log_dir=logs)
    with stopping(redis):
        monkeypatch.setenv("BENCH_CELERY_BROKER", redis.url)
        monkeypatch.setenv("BENCH_CELERY_BACKEND", redis.url)
        import bench_pipeline.defs.celery as dc

        config_yaml = tmp_path / "celery.yaml"
        config_yaml.write_text(yaml.safe_dump(dc.worker_config()))
        env = server_env(
            DAGSTER_HOME=str(dagster_home),
            BENCH_HOME=str(bench_home),
            BENCH_CELERY_BROKER=redis.url,
            BENCH_CELERY_BACKEND=redis.url,
        )
        workers = []
        try:
            for name in WORKERS:
                workers.append(
                    start_celery_worker(
                        name, config_yaml=config_yaml, env=env, log_dir=logs, cwd=Path.cwd()
                    )
                )
            run = start_run(launch, paths)
            instance = dg.DagsterInstance.get()
            register_configs(instance, run.suite, [c.id for c in run.launch.configs])
            home = str(bench_home)
            dagster_runs = []
            for config_id, rep in run.partitions():
                result = dg.execute_job(
                    dg.reconstructable(dc.define_partition_job),
                    instance=instance,
                    run_config=dc.partition_run_config(run.run_id, home),
                    tags=dc.partition_tags(run.suite, config_id, rep, run.run_id),
                )
                assert result.success, f"partition {config_id}|{rep} failed"
                dagster_runs.append(result.run_id)
            result = dg.execute_job(
                dg.reconstructable(dc.define_results_job),
                instance=instance,
                run_config=dc.results_run_config(run.run_id, home),
                tags={"bench/run_id": run.run_id},
            )
            assert result.success, "results failed"
            dagster_runs.append(result.run_id)

            # Every step ran in a worker (its own process), none in this one.
            hosts: set[str] = set()
            for dagster_run_id in dagster_runs:
                steps = _step_workers(instance, dagster_run_id)
                plan = {
                    e.step_key
                    for e in (r.dagster_event for r in instance.all_logs(dagster_run_id))
                    if e is not None and e.event_type_value == "STEP_SUCCESS"
                }
                assert plan and plan <= set(steps), (dagster_run_id, plan, steps)
                hosts |= {h.split("@")[0] for h in steps.values()}
                for record in instance.all_logs(dagster_run_id):
                    ev = record.dagster_event
                    if ev is not None and ev.event_type_value == "STEP_START":
                        assert ev.pid != os.getpid(), f"{ev.step_key} ran in the test process"
            assert hosts and hosts <= set(WORKERS), hosts
            worker_logs = "".join(w.log_tail(1_000_000) for w in workers)
            assert "execute_plan" in worker_logs and "succeeded" in worker_logs
        finally:
            for w in workers:
                w.stop()

    # one step task per celery app, not one registration (and a warning) per submitted step
    duplicates = [w for w in recwarn if w.category.__name__ == "DuplicateTaskNameWarning"]
    assert not duplicates, duplicates[0].message
    got = _config_table(bench_home, run.run_id)
    assert len(got) == len(CONFIGS) and set(got["config_id"]) == set(CONFIGS)
    assert list(got["trials"]) == [2 * REPETITIONS] * len(CONFIGS)
    assert got.equals(expected), f"celery:\n{got}\nin-process:\n{expected}"


def test_the_orchestrating_loop_looks_for_finished_steps_every_step_poll() -> None:
    """dagster-celery's loop sleeps its module's TICK_SECONDS between looks at the submitted
    steps (a second, no setting); bench's celery definitions set it to STEP_POLL_SECONDS. The
    pinned dagster-celery must still read that constant where it sleeps, or the setting is
    silently ignored."""
    import ast
    import inspect

    from dagster_celery import core_execution_loop

    from bench_pipeline.defs.celery import STEP_POLL_SECONDS

    assert core_execution_loop.TICK_SECONDS == STEP_POLL_SECONDS < 1
    tree = ast.parse(inspect.getsource(core_execution_loop.core_celery_execution_loop))
    sleeps = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and ast.unparse(node.func) == "time.sleep"
        and [ast.unparse(a) for a in node.args] == ["TICK_SECONDS"]
    ]
    assert sleeps, "the loop no longer sleeps TICK_SECONDS: set its new poll interval"


def test_the_executor_registers_its_step_task_once_per_app() -> None:
    """dagster-celery's executor asks `tasks.create_task(app)` for the step task of every step it
    submits; with bench's celery definitions loaded that is one task per app, registered once,
    so Celery has no duplicate registration to warn about. The executor must still look the
    function up in `dagster_celery.tasks` when it submits, or the fix is silently bypassed."""
    import ast
    import gc
    import inspect
    import warnings
    import weakref

    celery = pytest.importorskip("celery")
    from dagster_celery import executor, tasks

    import bench_pipeline.defs.celery as dc

    # (made first: Celery itself holds on to the app made last, its "current" one)
    other = celery.Celery("bench-test-2", broker="memory://", backend="cache+memory://")
    app = celery.Celery("bench-test", broker="memory://", backend="cache+memory://")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = tasks.create_task(app)
        assert first.name == "execute_plan"  # (the app is finalized: the task is registered)
        again = tasks.create_task(app)
        elsewhere = tasks.create_task(other)
        assert elsewhere.name == "execute_plan"
    assert again is first and elsewhere is not first
    # the task goes with its app: nothing here keeps the app of a finished run alive
    ref = weakref.ref(other)
    del other, elsewhere
    gc.collect()
    assert ref() is None
    assert not [w for w in caught if w.category.__name__ == "DuplicateTaskNameWarning"]
    assert tasks.create_task is dc.create_plan_task_once

    tree = ast.parse(inspect.getsource(executor._submit_task))
    imports = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module == "dagster_celery.tasks"
        and [a.name for a in node.names] == ["create_task"]
    ]
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "create_task"
    ]
    assert imports and calls, "_submit_task no longer imports create_task when it runs"
