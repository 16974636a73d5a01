"""Execute a job of this code location in this process, recorded as the UI records its runs.

`execute_in_process` builds an ephemeral copy of the job (its own executor and IO manager,
resources overridden), and its run has no code-location origin: the UI lists it under Runs but
not on the job's page nor in Overview, and "Re-execute" warns it "may be a different version".
Here the run is created from the code location's own job (same snapshot), with the same
`RemoteJobOrigin` the webserver gives runs it launches (location `bench_pipeline` of
workspace.yaml), then executed in this process by Dagster's `execute_run`. Resources come
through run config, not overrides, for the same reason.
"""

from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

import dagster as dg

# Private Dagster APIs, on purpose: the public ones (execute_in_process, execute_job) cannot
# record a run with a remote origin; pinned Dagster (pyproject) keeps these stable.
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.execution.api import execute_run
from dagster._core.remote_origin import RemoteRepositoryOrigin
from dagster._core.workspace.load import location_origin_from_module_name

MODULE = "bench_pipeline.definitions"
LOCATION = "bench_pipeline"  # workspace.yaml's location_name
REPOSITORY = "__repository__"  # the name Dagster gives a Definitions object's repository
ROOT = Path(__file__).resolve().parents[2]  # workspace.yaml's working_directory


@cache  # the definitions are module-level constants: resolve each job once per process
def _job(job_name: str) -> tuple[Any, Any]:
    repository = ReconstructableRepository.for_module(MODULE, "defs", working_directory=str(ROOT))
    recon = repository.get_reconstructable_job(job_name)
    return recon, recon.get_definition()


def job_origin(job_name: str) -> Any:
    location = location_origin_from_module_name(MODULE, None, str(ROOT), LOCATION, None)
    return RemoteRepositoryOrigin(location, REPOSITORY).get_job_origin(job_name)


def prepare_recorded(job_name: str) -> None:
    """Resolve `job_name`, its snapshot (Dagster caches it on the definition) and its origin
    now rather than at its first execution."""
    _recon, job_def = _job(job_name)
    job_def.get_job_snapshot_id()
    job_origin(job_name)


def execute_recorded(
    job_name: str,
    *,
    instance: dg.DagsterInstance,
    run_config: Mapping[str, Any],
    tags: Mapping[str, str],
    partition_key: dg.MultiPartitionKey | str | None = None,
) -> dg.ExecuteInProcessResult | Any:
    """Run `job_name` to the end in this process; returns Dagster's execution result."""
    recon, job_def = _job(job_name)
    run_tags = dict(tags)
    if partition_key is not None:
        run_tags.update(job_def.get_tags_for_partition_key(partition_key, None))
    run = instance.create_run_for_job(
        job_def=job_def,
        run_config=dict(run_config),
        tags=run_tags,
        job_code_origin=recon.get_python_origin(),
        remote_job_origin=job_origin(job_name),
    )
    return execute_run(recon, run, instance, raise_on_error=False)
