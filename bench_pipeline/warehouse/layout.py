"""Every on-disk path layout under the warehouse root, in one place.

Tables are `<table>/<run_id>/<part>.parquet` (see `Warehouse.write`); the JSON records below sit
beside them. Paths are relative to the warehouse root, with `/` separators, so the same layout
works for a local folder and for an object-store root.
"""

from __future__ import annotations

from datetime import datetime


def manifest(run_id: str) -> str:
    """The frozen benchmark run: tasks, configs, resolved agent texts and their hashes."""
    return f"manifests/{run_id}.json"


def run_tasks(run_id: str) -> str:
    """The frozen run's tasks, apart from its manifest (which names this file and the count):
    read only by what uses a task, not by what counts them (`formats.taskset.StoredTasks`)."""
    return f"manifests/tasks/{run_id}.json"


RUN_STATUS = "run_status"  # one JSON per run: running / finished / interrupted ...


def run_status(run_id: str) -> str:
    """Whether the run is going, finished, failed, cancelled or was interrupted, and by whom."""
    return f"{RUN_STATUS}/{run_id}.json"


def baseline(suite: str) -> str:
    """The suite's pinned baseline run (`bench baseline`)."""
    return f"baselines/{suite}.json"


def derived_meta(run_id: str) -> str:
    """Recommendations and notes stored beside a run's derived tables."""
    return f"derived_meta/{run_id}.json"


def per_trial_cache(run_id: str) -> str:
    """The run's per-trial results (one row per latest trial: what every derived table reads),
    kept beside its tables and keyed by the exact trial and score files it was built from
    (`runs/derived.py`): an Arrow IPC file, not Parquet, so no table's DuckDB view reads it."""
    return f"cache/per_trial/{run_id}.arrow"


def per_trial_cells(run_id: str) -> str:
    """The config x task sums of the run's per-trial cache, beside it and keyed the same: its
    key on the first line, then the sums' bytes (`ConfigCells.to_parts`), mapped, not read."""
    return f"cache/per_trial/{run_id}.cells"


def rescore_settings(run_id: str, rescore_id: str | None = None) -> str:
    """What one rescore graded with (its scorers, the merged judge, the counts it wrote); without
    `rescore_id`, the folder of every rescore of the run, one settings file each."""
    folder = f"rescores/{run_id}"
    return folder if rescore_id is None else f"{folder}/{rescore_id}.json"


def calibration(judge_config_hash: str, at: datetime | None = None) -> str:
    """The latest calibration of one judge configuration; with `at`, the one made then, kept
    with its per-item results under history/ and never overwritten."""
    if at is None:
        return f"calibrations/{judge_config_hash}.json"
    return f"calibrations/history/{judge_config_hash}-{at:%Y%m%dT%H%M%S%fZ}.json"


def notification_state(suite: str) -> str:
    """What was last notified for a suite (regression open or not)."""
    return f"notifications/{suite}.json"


def reported_failed_runs(suite: str | None) -> str:
    """Dagster runs whose failure was already notified, so a failure is sent once."""
    return f"notifications/{suite or '_unknown'}.failed_runs.json"


NIGHTLY_MARKERS = "nightly/runs"  # one JSON per nightly run


def nightly_marker(run_id: str) -> str:
    """Marks a run as started by the nightly schedule (the nightly sensor drives these)."""
    return f"{NIGHTLY_MARKERS}/{run_id}.json"


CHARTS = "charts"  # Pareto chart images drawn for Dagster metadata


def report(run_id: str) -> str:
    """The run's results explorer page, written with its results (linked from Dagster)."""
    return f"reports/{run_id}.html"


def partition_dir(config_id: str, rep: int) -> str:
    """The sub-folder of one partition's rows (trials, check results, scores) within a run."""
    return f"{config_id}/rep{int(rep)}"


def trial_part(config_id: str, rep: int, task_id: str) -> str:
    """The file stem of one trial's rows: a finished trial is written at once, alone (but for
    trials quicker than a second, held briefly and written together: `trial_batch`)."""
    return f"{partition_dir(config_id, rep)}/{task_id}"


# The sub-folder of a partition's folder holding batch files (`trial_batch`): a task id starts
# with a letter or digit, so no trial's own file is ever named like it.
BATCHES = "_batches"


def trial_batch(config_id: str, rep: int, name: str) -> str:
    """The file stem of the rows of several quick trials of one partition written together
    (warehouse/trial_rows.py); readers take every file under the partition's folder."""
    return f"{partition_dir(config_id, rep)}/{BATCHES}/{name}"


# Where a finished partition's files are joined before they are swapped in
# (`trial_rows.join_partition`): a hidden folder of the warehouse root, so no table and no DuckDB
# view reads it, on the tables' own file system.
JOINING = ".joining"


def score_part(config_id: str, rep: int, rescore_id: str) -> str:
    """The file stem of one partition's score rows from one (re)score."""
    return f"{partition_dir(config_id, rep)}/{rescore_id}"


def adaptive_rounds(run_id: str) -> str:
    """The stopping decisions of an adaptive-repetitions run, one per round looked at."""
    return f"adaptive/{run_id}.json"
