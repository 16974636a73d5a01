"""Benchmark run status across processes: running, finished, cancelled, interrupted.

A running run records the process that drives it; when the tool next starts and that process
is gone (kill -9, a crash, a reboot), the run is marked interrupted, and `bench run --resume`
finishes only its trials without a final result.
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import CorruptFileError, Warehouse

RUNNING, FINISHED, FAILED, CANCELLED, INTERRUPTED = (
    "running",
    "finished",
    "failed",
    "cancelled",
    "interrupted",
)


def _write(warehouse: Warehouse, run_id: str, status: str, **extra: Any) -> None:
    warehouse.write_json(
        layout.run_status(run_id),
        {"run_id": run_id, "status": status, "updated_at": datetime.now(UTC).isoformat(), **extra},
    )


def mark_running(warehouse: Warehouse, run_id: str) -> None:
    _write(warehouse, run_id, RUNNING, pid=os.getpid(), host=socket.gethostname())


def mark_finished(warehouse: Warehouse, run_id: str, status: str = FINISHED, **extra: Any) -> None:
    _write(warehouse, run_id, status, **extra)


def status_of(warehouse: Warehouse, run_id: str) -> dict[str, Any] | None:
    return _read_status(warehouse, run_id) if warehouse.exists(layout.run_status(run_id)) else None


def _read_status(warehouse: Warehouse, run_id: str) -> dict[str, Any]:
    data = warehouse.read_json(layout.run_status(run_id))
    # (JSON of another shape, `[]` or `{}`, is as unreadable as JSON cut short)
    if not isinstance(data, dict) or not isinstance(data.get("status"), str):
        problem = ValueError("not a run status: no 'status' in a JSON object")
        raise CorruptFileError(warehouse.root / layout.run_status(run_id), problem, "JSON")
    return data


def progress_note(warehouse: Warehouse, run_id: str, trial_count: int) -> str | None:
    """While a run is still going, or after it stopped short (interrupted, cancelled, failed),
    its numbers are partial: say how far it got, and how to finish it."""
    status = (status_of(warehouse, run_id) or {}).get("status")
    if status not in (RUNNING, INTERRUPTED, CANCELLED, FAILED):
        return None
    finished = trials_written(warehouse, run_id)
    if status != RUNNING and finished >= trial_count:
        return None  # (every trial ended: only the results step stopped short)
    note = f"{status}: {finished} of {trial_count} trials finished (the numbers are partial)"
    if status != RUNNING:
        note += f"; finish it with `bench run --resume {run_id}`"
    return note


# Runs no `bench run` process drives (launched from the Dagster UI, a backfill, the nightly
# sensor) have no status file until their results are built; their status is read from what
# the warehouse holds.
FROZEN = "frozen"  # frozen, no trial yet
PARTIAL = "partial"  # some trials, not all (in progress, or partitions not launched)


# A run the runs table lists whose manifest is gone (moved aside as unreadable): listed, not
# loadable.
NO_MANIFEST = "no manifest"


def inferred_status(warehouse: Warehouse, run_id: str) -> str:
    """frozen | partial (n/N trials) | trials done | finished, from the warehouse alone (or
    `no manifest` for a run whose manifest is gone)."""
    from bench_pipeline.runs.benchmark_run import load_run, run_exists

    if not run_exists(warehouse, run_id):
        return NO_MANIFEST
    run = load_run(run_id, warehouse)
    expected = len(run.taskset.tasks) * len(run.launch.configs) * run.repetitions
    done = trials_written(warehouse, run_id)
    if done == 0:
        return FROZEN
    if done < expected:
        return f"{PARTIAL} ({done}/{expected} trials)"
    return FINISHED if warehouse.exists(layout.derived_meta(run_id)) else "trials done"


def trials_written(warehouse: Warehouse, run_id: str) -> int:
    """How many of the run's trials have a row (a file holds one trial's rows, or a batch of
    quick trials': its files do not count its trials)."""
    import pyarrow.compute as pc

    from bench_pipeline.warehouse.columns import read_arrow

    ids = read_arrow(warehouse, "trials", run_id, ["trial_id"]).column("trial_id")
    return int(pc.count_distinct(ids).as_py()) if len(ids) else 0


def mark_finished_if_complete(warehouse: Warehouse, run_id: str, by: str) -> None:
    """Record `finished` for a run no process is driving, once every trial exists (the
    results build calls it; a `bench run` in progress keeps its own status)."""
    current = status_of(warehouse, run_id)
    if current is not None:
        return
    if inferred_status(warehouse, run_id) in (FINISHED, "trials done"):
        mark_finished(warehouse, run_id, FINISHED, by=by)


# A run whose status file, or (with none) manifest or trial rows, cannot be read: listed as
# such, the file named apart, so that one damaged run does not hide the others.
UNREADABLE_STATUS = "unreadable status"
UNREADABLE_MANIFEST = "unreadable manifest"
UNREADABLE_ROWS = "unreadable trial rows"


def run_statuses(
    warehouse: Warehouse,
    run_ids: list[str] | None = None,
    unreadable: list[CorruptFileError] | None = None,
) -> dict[str, str]:
    """run id -> status: the recorded one, else (for `run_ids` without one) the inferred one;
    `no manifest` for those of `run_ids` whose manifest is gone, whatever was recorded. A file
    that cannot be read gives its run UNREADABLE_STATUS, UNREADABLE_MANIFEST or
    UNREADABLE_ROWS, its error appended to `unreadable` (when given)."""
    from bench_pipeline.runs.benchmark_run import run_exists

    folder = warehouse.root / layout.RUN_STATUS
    out = {}
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            out[f.stem] = _read_status(warehouse, f.stem)["status"]
        except CorruptFileError as exc:
            out[f.stem] = UNREADABLE_STATUS
            if unreadable is not None:
                unreadable.append(exc)
    for run_id in run_ids or []:
        if not run_exists(warehouse, run_id):  # (set aside: what its status says is moot)
            out[run_id] = NO_MANIFEST
        elif run_id not in out:
            try:
                out[run_id] = inferred_status(warehouse, run_id)
            except CorruptFileError as exc:
                manifest = str(warehouse.root / layout.manifest(run_id))
                out[run_id] = UNREADABLE_MANIFEST if exc.file == manifest else UNREADABLE_ROWS
                if unreadable is not None:
                    unreadable.append(exc)
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped by its parent) is not alive either.
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


def recover_interrupted(warehouse: Warehouse, pid_root: Path | None = None) -> list[str]:
    """Mark runs whose driving process on this host is gone as interrupted, and kill every agent
    and grader process they left behind: the process groups recorded under `pid_root/<run_id>`
    and — whole trees, setsid'd and re-parented descendants included — every process whose
    trial marker names a harness process that no longer exists (workspace/sandbox.py). Sandboxed
    trials die with their harness already (PID namespace, --die-with-parent); the marker sweep is
    what makes the `process` fallback and anything that slipped through safe too."""
    from bench_pipeline.workspace.process import kill_recorded_groups
    from bench_pipeline.workspace.sandbox import kill_orphans

    orphans = kill_orphans()

    host = socket.gethostname()
    interrupted = []
    folder = warehouse.root / layout.RUN_STATUS
    for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = _read_status(warehouse, f.stem)
        except CorruptFileError:
            # (named by a read or the listing of that run; every other run's is recovered)
            continue
        if (
            data.get("status") == RUNNING
            and data.get("host") == host
            and not _alive(int(data.get("pid", 0)))
        ):
            killed = kill_recorded_groups(pid_root / data["run_id"]) if pid_root else []
            _write(
                warehouse,
                data["run_id"],
                INTERRUPTED,
                pid=data.get("pid"),
                killed_groups=killed,
                killed_orphans=orphans,
            )
            interrupted.append(data["run_id"])
    return interrupted


def isolation_summary(trials: Any) -> list[dict[str, Any]]:
    """Per configuration: the isolation and network its trials ran with, and what that mode
    does not guarantee (empty for `sandbox`). `trials`: the trial rows' `config_id`,
    `isolation` and `network` (strings or categoricals)."""
    from bench_pipeline.formats.vocabulary import ISOLATION_PROCESS
    from bench_pipeline.workspace.sandbox import PROCESS_GAPS

    if len(trials) == 0 or "isolation" not in trials.columns:
        return []
    keys = ["config_id", "isolation", "network"]
    # counted on the columns as they are (a million trials: their codes, not their strings),
    # then the few groups named as shown: a trial not run yet has no isolation or network
    counts = trials.groupby(keys, dropna=False, observed=True, sort=False).size()
    groups = counts.reset_index(name="trials").astype({k: object for k in keys})
    groups["isolation"] = groups["isolation"].where(groups["isolation"].notna(), "not run")
    groups["network"] = groups["network"].where(groups["network"].notna(), "-")
    groups = groups.groupby(keys, sort=True)["trials"].sum().reset_index()
    rows = []
    for config, mode, network, count in groups.itertuples(index=False):
        rows.append(
            {
                "config_id": config,
                "isolation": mode,
                "network": network,
                "trials": int(count),
                "not_guaranteed": sorted(PROCESS_GAPS) if mode == ISOLATION_PROCESS else [],
                "gaps": [PROCESS_GAPS[g] for g in sorted(PROCESS_GAPS)]
                if mode == ISOLATION_PROCESS
                else [],
            }
        )
    return rows
