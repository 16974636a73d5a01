"""Sensors of the code location (thin: the logic lives in `ci.status`, `nightly`, `notify`).

- `bench_ci_checks`: polls the GitHub checks API for pushed trial commits and appends `ci`
  score rows; rebuilds the results of runs that already had them.
- `bench_nightly_driver`: for nightly runs whose partitions are not all scored, requests the
  partition runs (run_key `run_id|config|rep`), then the results job (`run_id|results`).
- `bench_regression_notifier`: reads every new `regressions` materialization and sends
  regression/recovery notices to the suite's webhook.
- `bench_run_failure_notifier`: reports failed runs of this code location (`run_failed`).

All start RUNNING (each is a no-op when there is nothing to do) and are idempotent through
their cursor and run keys.
"""

# No `from __future__ import annotations`: Dagster reads resource types from real annotations.

import json
from datetime import UTC, datetime

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from bench_pipeline.defs import run_config
from bench_pipeline.defs.partitions import CONFIG_PARTITIONS_NAME, config_key, partition_key
from bench_pipeline.defs.resources import BenchResource
from bench_pipeline.formats.loader import load_suite
from bench_pipeline.formats.refs import FactoryView
from bench_pipeline.ops.ci_poll import CI_RESCORE_ID, CICursor, poll_ci
from bench_pipeline.ops.nightly import factory_root, pending_nightly
from bench_pipeline.ops.notify import notify_run, notify_run_failure
from bench_pipeline.runs.benchmark_run import load_run, run_exists

CI_SENSOR = "bench_ci_checks"
NIGHTLY_SENSOR = "bench_nightly_driver"
REGRESSION_SENSOR = "bench_regression_notifier"
RUN_FAILURE_SENSOR = "bench_run_failure_notifier"
REGRESSIONS_KEY = dg.AssetKey("regressions")
MAX_FINISHED_KEPT = 500


def build_sensors(
    partition_job: UnresolvedAssetJobDefinition,
    results_job: UnresolvedAssetJobDefinition,
) -> list[dg.SensorDefinition]:
    results_job_name = results_job.name
    partition_job_name = partition_job.name

    @dg.sensor(
        name=CI_SENSOR,
        job=results_job,
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="GitHub check suites of pushed trial commits -> `ci` scores.",
    )
    def ci_checks(context: dg.SensorEvaluationContext, bench: BenchResource):
        warehouse = bench.paths.warehouse
        cursor = CICursor.from_json(context.cursor)
        report = poll_ci(warehouse, cursor)
        for error in report.errors:
            context.log.warning(f"ci: {error}")
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
        requests = [
            dg.RunRequest(
                run_key=f"{run_id}|results|ci|{stamp}",
                job_name=results_job_name,
                run_config=run_config.results_config(run_id),
                tags={"bench/run_id": run_id, "bench/trigger": "ci"},
            )
            for run_id in sorted(report.changed_runs)
            if warehouse.files("config_table", run_id)  # results existed: refresh them
        ]
        known = set(context.instance.get_dynamic_partitions(CONFIG_PARTITIONS_NAME))
        suites = {r: load_run(r, warehouse).suite for r, _, _ in report.partitions}
        events = [
            dg.AssetMaterialization(
                asset_key="scores",
                partition=partition_key(suites[run_id], config_id, rep),
                description="ci scores appended by the CI sensor",
                metadata={"run_id": run_id, "rescore_id": CI_RESCORE_ID},
            )
            for run_id, config_id, rep in sorted(report.partitions)
            if config_key(suites[run_id], config_id) in known
        ]
        skip = None
        if not requests and not report.rows:
            skip = report.skipped or f"{report.pending} pushed commit(s) pending, no change"
        return dg.SensorResult(
            run_requests=requests,
            asset_events=events,
            cursor=cursor.to_json(),
            skip_reason=skip,
        )

    @dg.sensor(
        name=NIGHTLY_SENSOR,
        jobs=[partition_job, results_job],
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Runs each nightly run's partitions, then its results.",
    )
    def nightly_driver(context: dg.SensorEvaluationContext, bench: BenchResource):
        warehouse = bench.paths.warehouse
        finished: list[str] = json.loads(context.cursor) if context.cursor else []
        requests: list[dg.RunRequest] = []
        new_configs: set[str] = set()
        for progress in pending_nightly(warehouse, set(finished)):
            run = progress.run
            tags = {"bench/run_id": run.run_id, "bench/suite": run.suite, "bench/nightly": "true"}
            if progress.done:
                requests.append(
                    dg.RunRequest(
                        run_key=f"{run.run_id}|results",
                        job_name=results_job_name,
                        run_config=run_config.results_config(run.run_id),
                        tags=tags,
                    )
                )
                finished.append(run.run_id)
                continue
            new_configs.update(config_key(run.suite, c) for c, _ in progress.todo)
            requests.extend(
                dg.RunRequest(
                    run_key=f"{run.run_id}|{config_id}|{rep}",
                    job_name=partition_job_name,
                    partition_key=partition_key(run.suite, config_id, rep),
                    run_config=run_config.partition_config(run.run_id),
                    tags=tags,
                )
                for config_id, rep in progress.todo
            )
        known = set(context.instance.get_dynamic_partitions(CONFIG_PARTITIONS_NAME))
        missing = sorted(new_configs - known)
        return dg.SensorResult(
            run_requests=requests,
            cursor=json.dumps(finished[-MAX_FINISHED_KEPT:]),
            dynamic_partitions_requests=(
                [dg.AddDynamicPartitionsRequest(CONFIG_PARTITIONS_NAME, missing)] if missing else []
            ),
            skip_reason=None if requests else "no nightly run waiting",
        )

    @dg.sensor(
        name=REGRESSION_SENSOR,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Regression and recovery notices from new `regressions` materializations.",
    )
    def regression_notifier(context: dg.SensorEvaluationContext, bench: BenchResource):
        warehouse = bench.paths.warehouse
        after = int(context.cursor) if context.cursor else None
        result = context.instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=REGRESSIONS_KEY, after_storage_id=after),
            limit=100,
            ascending=True,
        )
        sent = 0
        for record in result.records:
            materialization = record.asset_materialization
            value = materialization.metadata.get("run_id") if materialization else None
            run_id = getattr(value, "value", value)
            if run_id and run_exists(warehouse, str(run_id)):
                try:
                    events = notify_run(warehouse, str(run_id), dagster_run_id=record.run_id)
                except Exception as exc:  # one bad run must not stop the notices
                    context.log.error(f"notify: run {run_id}: {type(exc).__name__}: {exc}")
                    events = []
                sent += len(events)
                for event in events:
                    context.log.info(
                        f"{event['event']}: {event['suite']} {event['config']} {event['metric']}"
                    )
            after = record.storage_id
        if after is not None:
            context.update_cursor(str(after))
        if not result.records:
            return dg.SkipReason("no new regressions table")
        return dg.SkipReason(f"{len(result.records)} table(s) read, {sent} notice(s)")

    @dg.run_failure_sensor(
        name=RUN_FAILURE_SENSOR,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Reports failed benchmark runs to the suite's webhook (`run_failed`).",
    )
    def run_failure_notifier(context: dg.RunFailureSensorContext, bench: BenchResource):
        run = context.dagster_run
        warehouse = bench.paths.warehouse
        run_id = run.tags.get("bench/run_id") or _config_run_id(run.run_config)
        suite, url = run.tags.get("bench/suite"), None
        if run_id and run_exists(warehouse, run_id):
            frozen = load_run(run_id, warehouse)
            suite, url = frozen.suite, frozen.launch.suite.notify
        elif suite:
            url = _live_notify_url(suite)
        error = context.failure_event.message if context.failure_event else None
        notify_run_failure(
            warehouse,
            suite=suite,
            url=url,
            run_id=run_id,
            dagster_run_id=run.run_id,
            job_name=run.job_name,
            error=error,
        )

    return [ci_checks, nightly_driver, regression_notifier, run_failure_notifier]


def _config_run_id(run_config: dict) -> str | None:
    """The bench run id a run was configured with (`ops.<op>.config.run_id`), if any."""
    for op in (run_config or {}).get("ops", {}).values():
        value = (op or {}).get("config", {}).get("run_id") if isinstance(op, dict) else None
        if value:
            return str(value)
    return None


def _live_notify_url(suite: str) -> str | None:
    """The suite's webhook from the live factory (a run that failed before freezing)."""
    factory = factory_root()
    if factory is None:
        return None
    try:
        return load_suite(FactoryView(factory), suite).notify
    except Exception:
        return None
