"""Run a frozen benchmark run through the Dagster definitions on a real instance.

`bench run` calls this so that its runs land in the instance `dagster dev` shows: one run of
the launch job per `bench run` (every partition's trials, scores and the derived tables, each
reported as the assets' materializations); `bench report`/rescore rebuild the results alone.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg

from bench_pipeline.defs import run_config
from bench_pipeline.defs.recorded import execute_recorded, prepare_recorded
from bench_pipeline.defs.storage import warm_sqlite_storage
from bench_pipeline.formats.errors import (
    BenchInputError,
    RunFailed,
    input_error_names,
    malformed_yaml,
)
from bench_pipeline.formats.files import replace_text
from bench_pipeline.runs.benchmark_run import BenchmarkRun
from bench_pipeline.runs.paths import BenchPaths

if TYPE_CHECKING:  # (Dagster's error record: only named here)
    from dagster_shared.error import SerializableErrorInfo

_INSTANCE_YAML = """\
# Written by bench on first use. Edit freely: bench never overwrites it.
telemetry:
  enabled: false
# Trials run in the `bench_trials` pool: one launch (or one backfilled partition) at a time
# across every run on this instance, each up to its max_parallel trials, so two launches, a
# backfill and a nightly run never oversubscribe the machine. Queued steps wait
# for a slot without using compute. Raise the limit on a bigger machine.
concurrency:
  pools:
    default_limit: 1
# Dagster's SQLite storage (same files under this folder) with its connections kept open:
# the plain one opens the database for every statement, ~1 s of a short bench run.
storage:
  custom:
    module: bench_pipeline.defs.storage
    class: BenchSqliteStorage
    config:
      base_dir: {base_dir}
# Each step's stdout and stderr in files under storage/, as Dagster's own manager keeps them,
# copied to the terminal by a thread: Dagster's starts a `tail` and a Python interpreter per
# stream and step (~0.05 s of a short run).
compute_logs:
  module: bench_pipeline.defs.compute_logs
  class: ThreadedComputeLogManager
  config:
    base_dir: {logs_dir}
"""


def instance_yaml(dagster_home: Path) -> str:
    """The dagster.yaml of a new instance. The storage's folder is written out: a process that
    loads the instance from a run's reference (a celery worker) may not share DAGSTER_HOME."""
    home = dagster_home.absolute()
    return _INSTANCE_YAML.format(
        base_dir=json.dumps(str(home)), logs_dir=json.dumps(str(home / "storage"))
    )


def ensure_dagster_home(paths: BenchPaths) -> Path:
    """DAGSTER_HOME as set, else <bench home>/dagster_home, with a dagster.yaml in it."""
    given = os.environ.get("DAGSTER_HOME")
    home = Path(given or paths.home / "dagster_home").absolute()
    try:
        home.mkdir(parents=True, exist_ok=True)
        config = home / "dagster.yaml"
        if not config.exists():
            replace_text(config, instance_yaml(home))
    except OSError as exc:
        problem = f"{home} cannot hold the Dagster instance ({exc.strerror or exc})"
        if given:
            raise BenchInputError(
                None, "DAGSTER_HOME", f"{problem}; set it to a folder you can write, or unset it"
            ) from None
        raise BenchInputError(None, "--home", f"{problem}; use a folder you can write") from None
    os.environ["DAGSTER_HOME"] = str(home)
    return home


def open_instance(home: Path) -> dg.DagsterInstance:
    """The Dagster instance of DAGSTER_HOME `home`. Its dagster.yaml is the user's to edit (it
    says so): one it cannot use is their input, reported as one line naming it, never a
    traceback; callers open it before they write anything, so a failure leaves nothing behind."""
    import yaml

    config = home / "dagster.yaml"
    fix = "fix it, or remove it and bench writes its default instance there"
    try:
        return dg.DagsterInstance.get()
    except yaml.YAMLError as exc:
        raise BenchInputError(config, None, f"{malformed_yaml(exc)}; {fix}") from None
    except dg.DagsterInvalidConfigError as exc:
        # (Dagster's message goes on to print the whole expected schema: its first sentence)
        found = [e.message.split(' Expected: "')[0].strip().rstrip(".") for e in exc.errors]
        found = found or [str(exc)]
        more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
        raise BenchInputError(
            config, None, f"Dagster refuses it: {found[0]}{more}; {fix}"
        ) from None
    except Exception as exc:  # a storage module that does not import, a database not reached
        text = str(exc).strip().removeprefix("Failure condition:").strip()
        reason = text.splitlines()[0].rstrip(".") if text else type(exc).__name__
        raise BenchInputError(
            config, None, f"Dagster cannot open the instance it configures ({reason}); {fix}"
        ) from None


# The instance `prepare_instance` opened (`bench serve`, before it forks), with what it was
# opened from: (DAGSTER_HOME, dagster.yaml's size and mtime, the run database's inode).
_prepared: tuple[tuple[str, int, int, int], dg.DagsterInstance] | None = None


def _instance_key(home: Path) -> tuple[str, int, int, int]:
    config = (home / "dagster.yaml").stat()
    try:  # a history removed (or replaced) since: opened afresh, its tables made again
        runs = (home / "history" / "runs.db").stat().st_ino
    except FileNotFoundError:
        runs = -1
    return (str(home), config.st_size, config.st_mtime_ns, runs)


def get_instance(paths: BenchPaths) -> dg.DagsterInstance:
    home = ensure_dagster_home(paths)
    if _prepared is not None and _prepared[0] == _instance_key(home):
        return _prepared[1]
    return open_instance(home)


def prepare_instance(paths: BenchPaths) -> None:
    """Open the instance of `paths` now, for every later `get_instance` of the same
    DAGSTER_HOME and dagster.yaml in this process and its forked children: its SQLite pools
    start empty in each child (defs/storage.py), the migrations are checked once."""
    global _prepared
    home = ensure_dagster_home(paths)
    instance = open_instance(home)  # (first: it makes the run database the key names)
    warm_sqlite_storage(instance)
    _prepared = (_instance_key(home), instance)


def resource_config(paths: BenchPaths, progress: bool) -> dict[str, object]:
    """The bench resource as run config (recorded runs keep the code location's job as is)."""
    return run_config.bench_resource_config(str(paths.home), paths.warehouse_root, progress)


def check_success(result: dg.ExecuteInProcessResult, what: str) -> None:
    """Raise what made the run fail: RunFailed naming each failed step and the error it ended
    with (Dagster's own message says only that the step failed); Ctrl-C (Dagster reports it as
    a failed run with an interrupted step) as KeyboardInterrupt, which the CLI reports as an
    interruption."""
    if result.success:
        return
    errors = [
        (e.step_key, e.step_failure_data.error)
        for e in result.all_events
        if e.is_step_failure and e.step_failure_data.error is not None
    ]
    if any(error.cls_name == "DagsterExecutionInterruptedError" for _, error in errors):
        raise KeyboardInterrupt(what)
    roots = [(step, _root(error)) for step, error in errors]
    causes = [f"step {step}: {_first_line(root)}" for step, root in roots]
    if not causes:  # (the run failed outside a step)
        causes = [e.message for e in result.all_events if e.is_failure and e.message]
    run_id = result.dagster_run.run_id
    inputs = input_error_names()
    raise RunFailed(
        f"{what} failed: {'; '.join(causes) or 'no step said why'} "
        f"(Dagster run {run_id}: its logs in `bench ui`)",
        bad_input=bool(roots) and all(root.cls_name in inputs for _, root in roots),
    )


def _root(error: SerializableErrorInfo) -> SerializableErrorInfo:
    """The error a chain of Dagster's wrappers (the step's execution error, a retry's) began as."""
    while error.cause is not None:
        error = error.cause
    return error


def _first_line(error: SerializableErrorInfo) -> str:
    """`ClassName: message`, its first line (Dagster writes the class's full module path)."""
    text = error.message.strip().splitlines()[0] if error.message.strip() else ""
    head, sep, rest = text.partition(": ")
    if sep and head.rsplit(".", 1)[-1] == error.cls_name:
        text = rest
    return f"{error.cls_name}: {text}" if text else error.cls_name


def execute_run(
    run: BenchmarkRun,
    paths: BenchPaths,
    instance: dg.DagsterInstance,
    *,
    progress: bool = False,
    retry_infra: bool = True,
) -> None:
    """The whole benchmark run as one run of the launch job: trials, scores, results."""
    from bench_pipeline.defs.definitions import LAUNCH_JOB

    result = execute_recorded(
        LAUNCH_JOB,
        run_config={
            **run_config.launch_config(run.run_id, retry_infra),
            **run_config.QUIET_LOGGERS,
            **resource_config(paths, progress),
        },
        instance=instance,
        tags={"bench/run_id": run.run_id, "bench/suite": run.suite},
    )
    check_success(result, f"run {run.run_id}")


def prepare_jobs() -> None:
    """Resolve the jobs `bench` executes, once per process (`bench serve` does it before it
    forks, so that no command pays it)."""
    from bench_pipeline.defs.definitions import LAUNCH_JOB, RESCORE_JOB, RESULTS_JOB

    for job in (LAUNCH_JOB, RESULTS_JOB, RESCORE_JOB):
        prepare_recorded(job)


def build_results(run_id: str, paths: BenchPaths, instance: dg.DagsterInstance) -> None:
    from bench_pipeline.defs.definitions import RESULTS_JOB

    result = execute_recorded(
        RESULTS_JOB,
        run_config={
            **run_config.results_config(run_id),
            **run_config.QUIET_LOGGERS,
            **resource_config(paths, False),
        },
        instance=instance,
        tags={"bench/run_id": run_id},
    )
    check_success(result, "results")


def fail_orphaned_runs(instance: dg.DagsterInstance, run_id: str) -> int:
    """Dagster runs of an interrupted benchmark run still marked in progress: report them failed."""
    runs = instance.get_runs(
        filters=dg.RunsFilter(
            statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING],
            tags={"bench/run_id": run_id},
        )
    )
    for run in runs:
        instance.report_run_failed(
            run, message="bench: the process driving this run died (interrupted)"
        )
        # A killed run never releases its pool slot itself; free it or every later run waits.
        if instance.event_log_storage.supports_global_concurrency_limits:
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
    return len(runs)
