"""Significance-gated regressions, from trial tables to the webhook (a ScriptedServer on
127.0.0.1 reached through the real sender).

A regression needs the paired drop beyond the tolerance AND a significant sign-flip test over
tasks; a drop within noise is recorded with its interval and never sent; tasks with mixed
outcomes across the baseline's repetitions are excluded and named.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
import pytest

from bench_pipeline.ops.notify import regression_events, send_notification
from bench_pipeline.results import config_table, detect_regressions, trial_overall
from bench_pipeline_tests.http_fakes import Reply, ScriptedServer


def run_tables(run: str, cells: dict[tuple[str, int], float]) -> tuple[pd.DataFrame, pd.DataFrame]:
    trials, scores = [], []
    for (task, rep), value in cells.items():
        tid = f"{run}/{task}/{rep}"
        trials.append(
            {
                "run_id": run,
                "suite": "s",
                "trial_id": tid,
                "task_id": task,
                "config_id": "agent",
                "repetition": rep,
                "tags": [],
                "holdout": False,
                "outcome": "succeeded",
                "cost_usd": 0.1,
                "duration_seconds": 1.0,
            }
        )
        scores.append(
            {
                "run_id": run,
                "trial_id": tid,
                "task_id": task,
                "config_id": "agent",
                "repetition": rep,
                "scorer": "checks",
                "scorer_group": "checks",
                "weight": 1.0,
                "status": "scored",
                "value": value,
                "cost_usd": None,
                "scored_at": pd.Timestamp("2025-01-01", tz="UTC"),
            }
        )
    return pd.DataFrame(trials), pd.DataFrame(scores)


def gate(base: dict, cur: dict) -> dict[str, Any]:
    bt, bs = run_tables("base", base)
    ct, cs = run_tables("cur", cur)
    out = detect_regressions(
        config_table(ct, cs),
        config_table(bt, bs),
        {"overall": 0.05},
        suite="s",
        run_id="cur",
        baseline_run_id="base",
        current_trials=trial_overall(ct, cs),
        baseline_trials=trial_overall(bt, bs),
    )
    return out[out["metric"] == "overall"].iloc[0].to_dict()


def notices(row: dict[str, Any], url: str | None = None) -> list[dict[str, Any]]:
    events, _ = regression_events(
        [row], {}, suite="s", run_id="cur", run_created_at="2026-01-02T00:00:00+00:00", link="l"
    )
    for event in events:
        assert url is None or send_notification(url, event)
    return events


def test_noisy_drop_on_two_tasks_is_within_noise_and_not_sent() -> None:
    # Baseline passes on a: 1, 1; on b: 0.8, 0.2. Current: a 0.6, 1.0; b 1.0, 0.0.
    # Overall 0.75 -> 0.65: a drop of 0.1, beyond the 0.05 tolerance, on 2 tasks x 2 reps.
    base = {("a", 1): 1.0, ("a", 2): 1.0, ("b", 1): 0.8, ("b", 2): 0.2}
    cur = {("a", 1): 0.6, ("a", 2): 1.0, ("b", 1): 1.0, ("b", 2): 0.0}
    row = gate(base, cur)
    assert row["baseline"] - row["current"] == pytest.approx(0.1)
    assert row["verdict"] == "within noise" and not row["regressed"]
    assert row["effect"] == pytest.approx(-0.1)
    assert row["ci_low"] < 0 < row["ci_high"] or row["ci_high"] == pytest.approx(0)
    assert row["p_value"] >= 0.05 and row["alpha"] == 0.05
    assert "within noise" in row["note"] and "95% CI" in row["note"]
    with ScriptedServer(handler=lambda rec: Reply(200, {"ok": True})) as hook:
        assert notices(row, f"{hook.url}/h") == []
        assert hook.requests == []


def test_consistent_drop_over_fourteen_tasks_is_a_regression_with_its_interval() -> None:
    tasks = [f"t{i:02d}" for i in range(14)]
    base = {(t, r): 1.0 for t in tasks for r in (1, 2, 3)}
    # The same drop of 0.1, now on every task: 0.9 on each rep (partial checks).
    cur = {(t, r): 0.9 for t in tasks for r in (1, 2, 3)}
    row = gate(base, cur)
    assert row["verdict"] == "regression" and row["regressed"]
    assert row["effect"] == pytest.approx(-0.1) and row["p_value"] == pytest.approx(2 / 2**14)
    with ScriptedServer(handler=lambda rec: Reply(200, {"ok": True})) as hook:
        (event,) = notices(row, f"{hook.url}/hooks/bench")
        (request,) = [r for r in hook.requests if r.method == "POST"]
    body = request.body
    assert body["event"] == "regression" and body["metric"] == "overall"
    assert body["effect"] == pytest.approx(-0.1)
    assert body["ci_low"] == pytest.approx(-0.1) and body["ci_high"] == pytest.approx(-0.1)
    assert body["p_value"] == pytest.approx(2 / 2**14) and body["alpha"] == 0.05
    assert body["tolerance"] == pytest.approx(0.05) and body["tasks_compared"] == 14


def test_flaky_task_is_excluded_and_named() -> None:
    tasks = [f"t{i:02d}" for i in range(8)]
    base = {(t, r): 1.0 for t in tasks for r in (1, 2)}
    base[("t03", 2)] = 0.0  # mixed outcomes on identical configs in the baseline: flaky
    cur = {(t, r): 1.0 for t in tasks for r in (1, 2)}
    cur[("t03", 1)] = cur[("t03", 2)] = 0.0  # its "drop" alone would look like a regression
    row = gate(base, cur)
    assert row["flaky_tasks"] == "t03" and row["tasks_compared"] == 7
    assert row["effect"] == pytest.approx(0.0) and row["verdict"] == "within tolerance"
    assert not row["regressed"] and notices(row) == []
    # Without excluding it, the same tables would show a drop of 0.5 / 8 on one task.
    assert row["baseline"] - row["current"] > 0.05
