"""Every Dagster run config this code location builds: one function per job, so the launcher,
the sensors, the schedules, the rescore backfill and the celery path cannot drift apart."""

from typing import Any

TASK_SET_OP = "task_set"
TRIALS_OP = "trials"
SCORES_OP = "scores"
RESULTS_OP = "results_tables"
NIGHTLY_OP = "nightly_freeze"
LAUNCH_OP = "launch"

# Dagster's console logger off (CRITICAL: Dagster logs nothing there): `bench` prints its own
# progress, and a failed step as one line naming its error (`launcher.check_success`); the
# step's whole log, stack trace included, is in the Dagster run's event log (`bench ui`).
QUIET_LOGGERS: dict[str, Any] = {"loggers": {"console": {"config": {"log_level": "CRITICAL"}}}}


def _ops(**configs: dict[str, Any]) -> dict[str, Any]:
    return {"ops": {op: {"config": config} for op, config in configs.items()}}


def task_set_config(run_id: str) -> dict[str, Any]:
    return _ops(**{TASK_SET_OP: {"run_id": run_id}})


def partition_config(run_id: str, retry_infra: bool = True) -> dict[str, Any]:
    """Trials then scores of one partition (the partition itself is the run's partition key)."""
    return _ops(
        **{
            TRIALS_OP: {"run_id": run_id, "retry_infra": retry_infra},
            SCORES_OP: {"run_id": run_id},
        }
    )


def launch_config(run_id: str, retry_infra: bool = True) -> dict[str, Any]:
    """A whole benchmark run in one Dagster run (defs/benchmark/launch.py)."""
    return _ops(**{LAUNCH_OP: {"run_id": run_id, "retry_infra": retry_infra}})


def rescore_config(
    run_id: str,
    *,
    scorers: list[str],
    rescore_id: str,
    only_unscored: bool,
    judge_json: str = "",
) -> dict[str, Any]:
    config: dict[str, Any] = {
        "run_id": run_id,
        "scorers": list(scorers),
        "rescore_id": rescore_id,
        "only_unscored": only_unscored,
    }
    if judge_json:
        config["judge_json"] = judge_json
    return _ops(**{SCORES_OP: config})


def results_config(run_id: str) -> dict[str, Any]:
    return _ops(**{RESULTS_OP: {"run_id": run_id}})


def nightly_config(suite: str, run_id: str, factory: str, scheduled_at: str) -> dict[str, Any]:
    return _ops(
        **{
            NIGHTLY_OP: {
                "suite": suite,
                "run_id": run_id,
                "factory": factory,
                "scheduled_at": scheduled_at,
            }
        }
    )


def bench_resource_config(
    home: str, warehouse_root: str = "", progress: bool = False
) -> dict[str, Any]:
    """Run config naming the bench home explicitly: workers of a distributed executor may not
    share the submitter's environment, so never rely on their BENCH_HOME or working directory.
    `progress`: one line per finished trial on stderr (the CLI's in-process runs)."""
    config: dict[str, Any] = {"home": home, "warehouse_root": warehouse_root}
    if progress:
        config["progress"] = True
    return {"resources": {"bench": {"config": config}}}
