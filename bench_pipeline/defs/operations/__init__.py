"""Operations: the CI sensor, the nightly schedules and driver, and the notifiers.

`build_operations(partition_job=..., results_job=...)` returns what `definitions.py` adds to
the code location (the jobs are passed in to avoid importing `definitions` from here).
"""

from dataclasses import dataclass, field

from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from bench_pipeline.defs.operations.jobs import BASELINE_JOB, NIGHTLY_JOB, baseline_job, nightly_job
from bench_pipeline.defs.operations.schedules import build_nightly_schedules
from bench_pipeline.defs.operations.sensors import build_sensors


@dataclass
class Operations:
    jobs: list = field(default_factory=list)
    sensors: list = field(default_factory=list)
    schedules: list = field(default_factory=list)


def build_operations(
    *,
    partition_job: UnresolvedAssetJobDefinition,
    results_job: UnresolvedAssetJobDefinition,
    environ: dict[str, str] | None = None,
) -> Operations:
    return Operations(
        jobs=[nightly_job, baseline_job],
        sensors=build_sensors(partition_job, results_job),
        schedules=build_nightly_schedules(nightly_job, environ),
    )


__all__ = ["BASELINE_JOB", "NIGHTLY_JOB", "Operations", "build_operations"]
