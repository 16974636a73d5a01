"""Nightly schedules, the nightly driver sensor and the regression/recovery/run-failure notices,
through the real Dagster definitions on a temporary instance.

Each "night" goes the way the daemon would: the schedule's run request -> `bench_nightly_job`
(freezes the run) -> the nightly sensor's partition requests -> its results request -> the
regression notifier sensor -> the webhook (a ScriptedServer on 127.0.0.1).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from bench_pipeline.defs.definitions import PARTITION_JOB, RESULTS_JOB, defs
from bench_pipeline.defs.operations.jobs import NIGHTLY_JOB, nightly_job
from bench_pipeline.defs.operations.schedules import build_nightly_schedules
from bench_pipeline.defs.resources import BenchResource
from bench_pipeline.ops.nightly import nightly_run_id
from bench_pipeline.runs.paths import BenchPaths
from bench_pipeline.runs.score import score_row
from bench_pipeline.scorers.base import ScoreResult
from bench_pipeline_tests.conftest import ROOT, run_bench
from bench_pipeline_tests.http_fakes import Reply, ScriptedServer

# Six tasks: a drop on all of them is the least a sign-flip test over tasks can call significant
# at 5% (p = 2 / 2^6); a drop on one of them is noise whatever its size.
TASKS = (
    "amount-precision",
    "currency-code",
    "due-date-order",
    "pagination",
    "partial-payment",
    "tax-rounding",
)
REPO = defs.get_repository_def()


def make_nightly(factory: Path, notify: str, cron: str = "30 3 * * *") -> None:
    """The invoices suite, nightly, on the offline reference agent, cut down to six tasks."""
    suite = factory / "benchmarks" / "invoices" / "suite.yaml"
    text = suite.read_text().replace("agent: coder", "agent: reference")
    text = re.sub(r"^nightly: false.*$", f"nightly: true\nnightly_cron: '{cron}'", text, flags=re.M)
    suite.write_text(text + f"notify: {notify}\n")
    for task in (factory / "benchmarks" / "invoices" / "tasks").glob("*.yaml"):
        if task.stem not in TASKS:
            task.unlink()


class Webhook(ScriptedServer):
    def __init__(self) -> None:
        super().__init__(handler=lambda rec: Reply(200, {"ok": True}))

    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.requests if r.method == "POST"]


def sensor(name: str) -> dg.SensorDefinition:
    return REPO.get_sensor_def(name)


class Nights:
    """Drives nightly runs through the schedule, jobs and sensors, as the daemon would."""

    def __init__(self, instance: dg.DagsterInstance, home: Path, factory: Path):
        self.instance = instance
        self.home = home
        self.resources = {"bench": BenchResource(home=str(home))}
        self.driver_cursor: str | None = None
        self.notifier_cursor: str | None = None
        self.keys: set[str] = set()
        os.environ["BENCH_FACTORY"] = str(factory)
        (schedule,) = build_nightly_schedules(nightly_job)
        self.schedule = schedule

    @property
    def paths(self) -> BenchPaths:
        return BenchPaths.from_home(self.home)

    def driver_tick(self) -> list[dg.RunRequest]:
        ctx = dg.build_sensor_context(
            instance=self.instance,
            cursor=self.driver_cursor,
            resources=self.resources,
            definitions=defs,
        )
        # Invoked directly: `evaluate_tick` cannot validate dynamic partition keys outside the
        # daemon. The daemon launches a run_key once per sensor; so does this helper.
        data = sensor("bench_nightly_driver")(ctx)
        assert isinstance(data, dg.SensorResult)
        self.driver_cursor = data.cursor
        fresh = [r for r in data.run_requests or [] if r.run_key not in self.keys]
        self.keys.update(r.run_key for r in fresh)
        return fresh

    def notifier_tick(self) -> None:
        ctx = dg.build_sensor_context(
            instance=self.instance, cursor=self.notifier_cursor, resources=self.resources
        )
        data = sensor("bench_regression_notifier").evaluate_tick(ctx)
        self.notifier_cursor = data.cursor

    def execute(self, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
        job = nightly_job if request.job_name in (None, NIGHTLY_JOB) else None
        job = job or defs.resolve_job_def(request.job_name)
        return job.execute_in_process(
            run_config=request.run_config,
            instance=self.instance,
            resources=self.resources,
            partition_key=request.partition_key,
            tags=dict(request.tags),
            raise_on_error=False,
        )

    def night(
        self, when: datetime, tamper: Callable[[str], None] | None = None
    ) -> tuple[str, dg.ExecuteInProcessResult]:
        ctx = dg.build_schedule_context(instance=self.instance, scheduled_execution_time=when)
        (request,) = self.schedule.evaluate_tick(ctx).run_requests
        run_id = request.run_key
        assert self.execute(request).success
        partitions = self.driver_tick()
        assert [r.job_name for r in partitions] == [PARTITION_JOB]
        assert partitions[0].run_key == f"{run_id}|reference|1"
        for req in partitions:
            assert self.execute(req).success
        if tamper:
            tamper(run_id)
        (results,) = self.driver_tick()
        assert (results.job_name, results.run_key) == (RESULTS_JOB, f"{run_id}|results")
        result = self.execute(results)
        assert result.success
        assert self.driver_tick() == []  # nothing left for this run
        self.notifier_tick()
        return run_id, result


def rescored(paths: BenchPaths, value: float, trials: int | None = None) -> Callable[[str], None]:
    """Hand-made rescore rows: the checks of the first `trials` trials (all by default) become
    `value` instead of 1."""

    def tamper(run_id: str) -> None:
        rows = paths.warehouse.read("trials", run_id).sort_values("trial_id").to_dict("records")
        for trial in rows[:trials]:
            row = score_row(
                trial, ScoreResult.scored("checks", value, reason="hand-made"), "manual"
            )
            part = f"reference/rep1/manual-{trial['task_id']}"
            paths.warehouse.write("scores", [row], run_id, part)

    return tamper


def test_schedule_per_nightly_suite(factory: Path, bench_home: Path) -> None:
    assert build_nightly_schedules(nightly_job, environ={}) == []  # no factory, no schedules
    make_nightly(factory, "http://127.0.0.1:9/hook")
    (schedule,) = build_nightly_schedules(nightly_job, environ={"BENCH_FACTORY": str(factory)})
    assert schedule.name == "bench_nightly_invoices"  # support is not nightly
    assert schedule.cron_schedule == "30 3 * * *"
    when = datetime(2026, 1, 2, 3, 30, tzinfo=UTC)
    with dg.instance_for_test() as instance:
        ctx = dg.build_schedule_context(instance=instance, scheduled_execution_time=when)
        (request,) = schedule.evaluate_tick(ctx).run_requests
    assert request.run_key == nightly_run_id("invoices", when) == "invoices-20260102T033000-nightly"
    config = request.run_config["ops"]["nightly_freeze"]["config"]
    assert config["suite"] == "invoices" and config["run_id"] == request.run_key
    assert request.tags["bench/suite"] == "invoices"

    # The default cron, and the schedules the code location builds when it loads.
    suite = factory / "benchmarks" / "invoices" / "suite.yaml"
    suite.write_text(re.sub(r"^nightly_cron: .*\n", "", suite.read_text(), flags=re.M))
    probe = (
        "from bench_pipeline.defs.definitions import defs\n"
        "r = defs.get_repository_def()\n"
        "print([(s.name, s.cron_schedule) for s in r.schedule_defs])"
    )
    env = {**os.environ, "BENCH_FACTORY": str(factory), "DAGSTER_HOME": str(bench_home)}
    out = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[('bench_nightly_invoices', '0 2 * * *')]"


def test_nightly_regression_then_recovery(
    factory: Path, bench_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_FACTORY", str(factory))
    monkeypatch.delenv("BENCH_UI_URL", raising=False)
    with Webhook() as hook, dg.instance_for_test() as instance:
        make_nightly(factory, f"{hook.url}/hooks/bench")
        nights = Nights(instance, bench_home, factory)

        # Night 1 becomes the pinned baseline (no baseline yet: nothing to notify).
        run1, _ = nights.night(datetime(2026, 3, 1, 3, 30, tzinfo=UTC))
        assert hook.bodies() == []
        code, out, _ = run_bench("baseline", "set", "invoices", run1, home=bench_home)
        assert code == 0, out

        # Night 2: one task of six much worse (overall 0.9 instead of 1): a drop beyond the
        # tolerance, but one task of six is within noise -> recorded with its interval, no notice.
        run2, result = nights.night(
            datetime(2026, 3, 2, 3, 30, tzinfo=UTC), tamper=rescored(nights.paths, 0.4, 1)
        )
        regressions = nights.paths.warehouse.read("regressions", run2)
        overall = regressions[regressions["metric"] == "overall"].iloc[0]
        assert not bool(overall["regressed"]) and overall["verdict"] == "within noise"
        assert overall["effect"] == pytest.approx(-0.1) and overall["p_value"] == pytest.approx(1.0)
        assert overall["ci_low"] < 0 <= overall["ci_high"]
        assert "within noise" in overall["note"] and "not alerted" in overall["note"]
        nights.notifier_tick()
        assert hook.bodies() == []

        # Night 3: every task 0.2 worse -> a significant drop beyond tolerance: one notice.
        run2, result = nights.night(
            datetime(2026, 3, 2, 4, 30, tzinfo=UTC), tamper=rescored(nights.paths, 0.8)
        )
        (check,) = [
            c
            for c in result.get_asset_check_evaluations()
            if c.check_name == "regression_tolerance"
        ]
        assert not check.passed
        regressions = nights.paths.warehouse.read("regressions", run2)
        overall = regressions[regressions["metric"] == "overall"].iloc[0]
        assert bool(overall["regressed"]) and overall["verdict"] == "regression"
        bodies = hook.bodies()
        assert len(bodies) == 1
        body = bodies[0]
        # Issue 15 added the evidence (effect, interval, p-value, level) to the notice.
        assert body == {
            "event": "regression",
            "suite": "invoices",
            "config": "reference",
            "metric": "overall",
            "baseline": pytest.approx(1.0),
            "current": pytest.approx(0.8),
            "tolerance": pytest.approx(0.05),
            "run_id": run2,
            "baseline_run_id": run1,
            "link": f"http://localhost:3000/runs/{result.run_id}",
            "effect": pytest.approx(-0.2),
            "ci_low": pytest.approx(-0.2),
            "ci_high": pytest.approx(-0.2),
            "p_value": pytest.approx(2 / 2**6),
            "alpha": pytest.approx(0.05),
            "verdict": "regression",
            "tasks_compared": 6,
            "flaky_tasks": [],
        }
        assert hook.requests[0].path == "/hooks/bench"

        # Evaluating again, or rebuilding the same run's results, sends nothing more.
        nights.notifier_tick()
        rebuilt = nights.execute(
            dg.RunRequest(
                job_name=RESULTS_JOB,
                run_config={"ops": {"results_tables": {"config": {"run_id": run2}}}},
            )
        )
        assert rebuilt.success
        nights.notifier_tick()
        assert len(hook.bodies()) == 1
        state = nights.paths.warehouse.read_json("notifications/invoices.json")
        assert set(state["open"]) == {"reference|overall"}

        # Night 4 is back within tolerance -> one recovery notice.
        run3, _ = nights.night(datetime(2026, 3, 3, 3, 30, tzinfo=UTC))
        bodies = hook.bodies()
        assert len(bodies) == 2
        assert bodies[1]["event"] == "recovery"
        assert (bodies[1]["config"], bodies[1]["metric"], bodies[1]["run_id"]) == (
            "reference",
            "overall",
            run3,
        )
        assert bodies[1]["current"] == pytest.approx(1.0)
        state = nights.paths.warehouse.read_json("notifications/invoices.json")
        assert state["open"] == {}

        # The nightly runs are frozen under BENCH_HOME with the suite's default config.
        launch = (bench_home / "nightly" / f"{run1}.yaml").read_text()
        assert "repetitions: 1" in launch and "agent: reference" in launch


def test_failed_run_is_reported(
    factory: Path, bench_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BENCH_UI_URL", "http://127.0.0.1:3000/")
    monkeypatch.setenv("BENCH_FACTORY", str(factory))
    resources = {"bench": BenchResource(home=str(bench_home))}
    with Webhook() as hook, dg.instance_for_test() as instance:
        make_nightly(factory, f"{hook.url}/hook")
        run_id = "invoices-20260305T033000-nightly"
        result = nightly_job.execute_in_process(
            run_config={
                "ops": {
                    "nightly_freeze": {
                        "config": {
                            "suite": "invoices",
                            "run_id": run_id,
                            "factory": str(factory / "no-such-factory"),
                        }
                    }
                }
            },
            instance=instance,
            resources=resources,
            tags={"bench/suite": "invoices", "bench/run_id": run_id},
            raise_on_error=False,
        )
        assert not result.success
        notifier = sensor("bench_run_failure_notifier")
        for _ in range(2):  # reported once, however often the sensor sees it
            ctx = dg.build_run_status_sensor_context(
                sensor_name=notifier.name,
                dagster_instance=instance,
                dagster_run=result.dagster_run,
                dagster_event=result.get_run_failure_event(),
                resources=resources,
            ).for_run_failure()
            notifier(ctx)
        (body,) = hook.bodies()
        assert body["event"] == "run_failed"
        assert body["suite"] == "invoices" and body["run_id"] == run_id
        assert body["link"] == f"http://127.0.0.1:3000/runs/{result.run_id}"
        for key in ("config", "metric", "baseline", "current", "tolerance", "baseline_run_id"):
            assert key in body


def test_definitions_expose_the_operations() -> None:
    names = {s.name for s in REPO.sensor_defs}
    assert {
        "bench_ci_checks",
        "bench_nightly_driver",
        "bench_regression_notifier",
        "bench_run_failure_notifier",
    } <= names
    assert REPO.has_job(NIGHTLY_JOB)
    assert json.loads(json.dumps(sorted(names)))  # plain names, nothing odd
