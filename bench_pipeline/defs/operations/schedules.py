"""One schedule per suite with `nightly: true` in the factory named by $BENCH_FACTORY.

Built when the definitions load: no factory (or no nightly suite) -> no schedules. Each tick
asks for one run of `bench_nightly_job` with `run_key` = the nightly run id (suite + scheduled
time), so a tick evaluated twice launches one run. Schedules run in UTC and start RUNNING:
`nightly: true` in the suite file is the opt-in.
"""

from __future__ import annotations

import logging
import re
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from bench_pipeline.defs import run_config
from bench_pipeline.formats.model import Suite
from bench_pipeline.ops.nightly import factory_root, nightly_run_id, nightly_suites

log = logging.getLogger(__name__)


def schedule_name(suite: str) -> str:
    return "bench_nightly_" + re.sub(r"[^A-Za-z0-9_]", "_", suite)


def nightly_schedule(suite: Suite, factory: Path, job: dg.JobDefinition) -> dg.ScheduleDefinition:
    @dg.schedule(
        name=schedule_name(suite.name),
        cron_schedule=suite.nightly_cron,
        job=job,
        execution_timezone="UTC",
        default_status=dg.DefaultScheduleStatus.RUNNING,
        description=f"Nightly regression run of suite {suite.name} against its pinned baseline.",
        tags={"bench/suite": suite.name, "bench/nightly": "true"},
    )
    def _nightly(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        scheduled = context.scheduled_execution_time or datetime.now(UTC)
        run_id = nightly_run_id(suite.name, scheduled)
        return dg.RunRequest(
            run_key=run_id,
            run_config=run_config.nightly_config(
                suite.name, run_id, str(factory), scheduled.isoformat()
            ),
            tags={"bench/run_id": run_id, "bench/suite": suite.name, "bench/nightly": "true"},
        )

    return _nightly


def build_nightly_schedules(
    job: dg.JobDefinition, environ: dict[str, str] | None = None
) -> list[dg.ScheduleDefinition]:
    factory = factory_root(environ)
    if factory is None:
        return []
    if not factory.is_dir():
        log.warning("BENCH_FACTORY=%s is not a folder: no nightly schedules", factory)
        return []
    schedules = []
    for suite in nightly_suites(factory):
        try:
            schedules.append(nightly_schedule(suite, factory, job))
        except Exception as exc:  # e.g. an invalid nightly_cron: skip it, keep the location up
            log.warning("nightly schedule of %s skipped: %s", suite.name, exc)
    return schedules
