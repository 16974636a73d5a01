"""`bench cancel RUN`: stop a running benchmark run from any process on the same home.

Cancelling is a flag file (`BenchPaths.cancel_flag(run_id)`): every running command polls it
and kills its whole process group, trials that are running end as `cancelled`, queued ones
end as `cancelled` before they start, finished trials are kept. `bench run --resume RUN`
removes the flag and runs only the trials without a final result.

This module creates the flag, waits (bounded) until the run's status leaves `running` (or its
driving process is gone), and reports what was cancelled.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from bench_pipeline.formats.vocabulary import OUTCOME_CANCELLED
from bench_pipeline.runs.status import RUNNING, recover_interrupted, status_of
from bench_pipeline.warehouse.store import Warehouse


@dataclass
class CancelReport:
    run_id: str
    status: str | None  # the run's status when we stopped waiting
    stopped: bool  # the run left `running` within the wait
    cancelled: list[str] = field(default_factory=list)  # trial ids recorded as cancelled
    kept: list[str] = field(default_factory=list)  # trial ids with a final result


def request_cancel(flag) -> None:  # flag: Path
    flag.parent.mkdir(parents=True, exist_ok=True)
    flag.touch()


def wait_until_stopped(
    warehouse: Warehouse,
    run_id: str,
    timeout: float,
    poll: float = 0.2,
    sleep: Callable[[float], None] = time.sleep,
) -> str | None:
    """Poll the run's status until it is no longer `running`; returns the last status seen.
    A run whose driving process died is marked interrupted on the way (runstate)."""
    deadline = time.monotonic() + max(timeout, 0.0)
    while True:
        status = (status_of(warehouse, run_id) or {}).get("status")
        if status != RUNNING:
            return status
        if run_id in recover_interrupted(warehouse):
            return (status_of(warehouse, run_id) or {}).get("status")
        if time.monotonic() >= deadline:
            return status
        sleep(poll)


def trial_outcomes(warehouse: Warehouse, run_id: str) -> tuple[list[str], list[str]]:
    """(cancelled trial ids, trial ids with another outcome): the latest row per trial."""
    from bench_pipeline.results.scores import latest_trials  # the results load only when read

    trials = warehouse.read("trials", run_id)
    if trials.empty:
        return [], []
    latest = latest_trials(trials)
    cancelled = sorted(latest.loc[latest["outcome"] == OUTCOME_CANCELLED, "trial_id"])
    kept = sorted(latest.loc[latest["outcome"] != OUTCOME_CANCELLED, "trial_id"])
    return cancelled, kept


def cancel_run(
    warehouse: Warehouse, flag: Any, run_id: str, timeout: float = 120.0, poll: float = 0.2
) -> CancelReport:
    request_cancel(flag)
    status = wait_until_stopped(warehouse, run_id, timeout, poll)
    cancelled, kept = trial_outcomes(warehouse, run_id)
    return CancelReport(run_id, status, status != RUNNING, cancelled, kept)
