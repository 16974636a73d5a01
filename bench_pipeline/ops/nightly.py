"""Nightly regression runs of every suite with `nightly: true` (plain Python; the schedules
and sensors in `defs/operations` are thin wrappers).

The factory is named by the environment variable `BENCH_FACTORY`. A nightly run is the
suite's default configuration as it is tonight:

- one configuration, id = the suite's `agent` name (so a pinned baseline run that has a
  configuration of that id is compared with it), agent = the suite's `agent` with the suite
  defaults;
- every task of the suite (the task-set revision must match the baseline's to be compared);
- the suite's `scorers`, except `ci` (a suite has no `ci:` remote to push to);
- repetitions 1: a nightly check for drift, not a study; overall moves in steps of
  1/tasks, which `tolerance.overall` should allow for. A drop is a regression only when it
  also is significant (results/regressions.py: paired per task against the baseline, sign-flip
  p < 0.05, so 6 tasks at least); a drop within noise is recorded with its interval and not
  notified. Flaky tasks are found in the baseline's repetitions: pin a baseline run with
  repetitions >= 2 to have them excluded.

Orchestration, through the Dagster daemon with no run per trial:
schedule (per suite, `nightly_cron`) -> one run of `bench_nightly_job` that freezes the run
(`freeze_nightly`: a launch file under `$BENCH_HOME/nightly/`, the manifest with a run id
derived from the scheduled time, the config partitions, a `task_set` materialization) ->
the nightly sensor requests each unfinished partition (run_key `run_id|config|rep`) and, when
every partition is scored, the results job (run_key `run_id|results`), whose `regressions`
table the notification sensor reads.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

from bench_pipeline.formats.loader import load_launch, load_prices, load_suite
from bench_pipeline.formats.model import Suite, valid_id
from bench_pipeline.formats.refs import FactoryView
from bench_pipeline.runs.benchmark_run import (
    BenchmarkRun,
    freeze_run,
    load_run,
    run_exists,
    save_run,
)
from bench_pipeline.runs.paths import BenchPaths
from bench_pipeline.warehouse import layout
from bench_pipeline.warehouse.store import Warehouse

log = logging.getLogger(__name__)

FACTORY_ENV = "BENCH_FACTORY"
DEFAULT_CRON = "0 2 * * *"
NIGHTLY_REPETITIONS = 1
# A nightly run whose partitions are still not all scored after this long is left alone
# (a failed partition run was already reported by the run-failure sensor).
DRIVE_FOR = timedelta(days=3)


def factory_root(environ: dict[str, str] | None = None) -> Path | None:
    env = environ if environ is not None else os.environ
    raw = env.get(FACTORY_ENV, "").strip()
    return Path(raw).expanduser().absolute() if raw else None


def nightly_suites(factory: Path) -> list[Suite]:
    """Suites of the factory with `nightly: true`; a suite that does not load is skipped with a
    warning (a broken suite file must not stop the code location from loading)."""
    view = FactoryView(factory)
    out = []
    for name in view.suite_names():
        try:
            suite = load_suite(view, name)
        except Exception as exc:
            log.warning("nightly: suite %s skipped: %s", name, exc)
            continue
        if suite.nightly:
            out.append(suite)
    return out


def nightly_config_id(suite: Suite) -> str:
    cid = re.sub(r"[^A-Za-z0-9_.-]", "-", suite.agent).lstrip("-_.") or "default"
    return cid if valid_id(cid) else "default"


def nightly_launch(suite: Suite) -> dict[str, Any]:
    """The launch file a nightly run of `suite` freezes (see module doc)."""
    scorers = [s for s in suite.scorers if s != "ci"] or ["checks"]
    return {
        "kind": "BenchmarkLaunch",
        "title": f"nightly regression run of {suite.name}",
        "suite": suite.name,
        "configs": [{"id": nightly_config_id(suite), "agent": suite.agent}],
        "repetitions": NIGHTLY_REPETITIONS,
        "scorers": scorers,
    }


def nightly_run_id(suite: str, scheduled: datetime) -> str:
    """Deterministic per suite and scheduled time, so a retried tick freezes nothing twice."""
    when = scheduled.astimezone(UTC) if scheduled.tzinfo else scheduled
    return f"{suite}-{when:%Y%m%dT%H%M%S}-nightly"


def freeze_nightly(
    factory: Path,
    suite_name: str,
    paths: BenchPaths,
    run_id: str,
    environ: dict[str, str] | None = None,
    scheduled_at: str | None = None,
) -> BenchmarkRun:
    """Freeze (once) and store the nightly run `run_id` of `suite_name`."""
    from bench_pipeline.agents import make_agent
    from bench_pipeline.runs.score import preflight_scorers

    warehouse = paths.warehouse
    if run_exists(warehouse, run_id):
        return load_run(run_id, warehouse)
    view = FactoryView(factory)
    suite = load_suite(view, suite_name)
    launch_file = paths.home / "nightly" / f"{run_id}.yaml"
    launch_file.parent.mkdir(parents=True, exist_ok=True)
    launch_file.write_text(
        "# Written by the nightly schedule: the suite's default configuration.\n"
        + yaml.safe_dump(nightly_launch(suite), sort_keys=False)
    )
    launch = load_launch(launch_file, factory_root=factory)
    prices = load_prices(view)
    env = dict(environ if environ is not None else os.environ)
    for config in launch.configs:
        make_agent(config.agent).preflight(env)
    run = replace(freeze_run(launch, prices, launch_file), run_id=run_id)
    preflight_scorers(run, run.launch.scorers, env)
    save_run(run, warehouse)
    warehouse.write_json(
        layout.nightly_marker(run_id),
        {
            "run_id": run_id,
            "suite": suite_name,
            "factory": str(factory),
            "scheduled_at": scheduled_at,
            "frozen_at": datetime.now(UTC).isoformat(),
        },
    )
    return run


# --------------------------------------------------------------------------- progress


@dataclass(frozen=True)
class NightlyProgress:
    run: BenchmarkRun
    todo: list[tuple[str, int]]  # partitions not scored yet, in execution order

    @property
    def done(self) -> bool:
        return not self.todo


def nightly_run_ids(warehouse: Warehouse) -> list[str]:
    folder = warehouse.root / layout.NIGHTLY_MARKERS
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def partition_progress(warehouse: Warehouse, run: BenchmarkRun) -> NightlyProgress:
    """Partitions of `run` whose every trial has a score row are done; the rest are to do."""
    scores = warehouse.read("scores", run.run_id)
    scored = set(scores["trial_id"]) if not scores.empty else set()
    todo = [
        (config_id, rep)
        for config_id, rep in run.partitions()
        if any(s.trial_id not in scored for s in run.trial_specs(config_id, rep))
    ]
    return NightlyProgress(run, todo)


def pending_nightly(
    warehouse: Warehouse, finished: set[str], now: datetime | None = None
) -> list[NightlyProgress]:
    """Nightly runs frozen, recent, and not yet handed to the results job."""
    now = now or datetime.now(UTC)
    out = []
    for run_id in nightly_run_ids(warehouse):
        if run_id in finished or not run_exists(warehouse, run_id):
            continue
        if warehouse.files("regressions", run_id):  # results already built (a lost cursor)
            continue
        try:
            run = load_run(run_id, warehouse)
        except Exception as exc:
            log.warning("nightly: cannot load %s: %s", run_id, exc)
            continue
        created = datetime.fromisoformat(run.created_at)
        if now - created > DRIVE_FOR:
            continue
        out.append(partition_progress(warehouse, run))
    return out
