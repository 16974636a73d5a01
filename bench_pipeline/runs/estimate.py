"""`bench estimate`: trial count, cost cap (sum of budgets) and a forecast from past runs."""

from __future__ import annotations

from typing import Any

import pandas as pd

from bench_pipeline.formats.model import Launch, Prices
from bench_pipeline.formats.registry import AGENT_KINDS
from bench_pipeline.runs.benchmark_run import with_original_config
from bench_pipeline.warehouse.store import Warehouse


def estimate_launch(
    launch: Launch, prices: Prices, warehouse: Warehouse, *, detect: float = 0.05
) -> dict[str, Any]:
    """Per config: trials, cap (budget x trials; None when a config has no budget) and a
    forecast (mean known cost per task of past trials with the same model, per task)."""
    launch = with_original_config(launch)
    past = warehouse.read("trials")
    if not past.empty:
        past = past[(past["suite"] == launch.suite.name) & past["cost_usd"].notna()]
    per_task = launch.repetitions
    configs = []
    for c in launch.configs:
        trials = len(launch.tasks) * per_task
        cap = None if c.agent.budget_usd is None else c.agent.budget_usd * trials
        if AGENT_KINDS.trait(c.agent.kind, "offline"):
            cap = 0.0  # no model is called (replay reports recorded usage, it spends nothing)
        forecast, known_tasks = _forecast(
            past, c.agent.model, c.agent.kind, [t.id for t in launch.tasks]
        )
        configs.append(
            {
                "config_id": c.id,
                "agent": c.agent.name,
                "kind": c.agent.kind,
                "model": c.agent.model,
                "trials": trials,
                "budget_usd": c.agent.budget_usd,
                "cost_cap_usd": cap,
                "forecast_usd": None if forecast is None else forecast * per_task,
                "forecast_basis": _basis(c.agent.kind, forecast, known_tasks, len(launch.tasks)),
                "price_known": c.agent.model in prices.rates if c.agent.model else None,
            }
        )
    caps = [c["cost_cap_usd"] for c in configs]
    extra = _adaptive_and_power(launch, warehouse, configs, detect)
    return {
        "launch": launch.name,
        "suite": launch.suite.name,
        "tasks": len(launch.tasks),
        "configs": len(launch.configs),
        "repetitions": launch.repetitions,
        "trials": launch.trial_count,
        "cost_cap_usd": None if any(c is None for c in caps) else sum(caps),
        "per_config": configs,
        **extra,
    }


def _forecast(
    past: pd.DataFrame, model: str | None, kind: str, task_ids: list[str]
) -> tuple[float | None, int]:
    if AGENT_KINDS.trait(kind, "offline"):
        return 0.0, len(task_ids)
    if past.empty or model is None:
        return None, 0
    rows = past[(past["model"] == model) & past["task_id"].isin(task_ids)]
    if rows.empty:
        return None, 0
    per_task = rows.groupby("task_id")["cost_usd"].mean()
    # Tasks never run with this model are forecast at the mean of the ones that were.
    return float(per_task.mean() * len(task_ids)), len(per_task)


def _basis(kind: str, forecast: float | None, known: int, total: int) -> str:
    if AGENT_KINDS.trait(kind, "offline"):
        return "no model is called"
    if forecast is None:
        return "no past runs with known cost"
    return f"{known}/{total} tasks with past cost"


def _adaptive_and_power(
    launch: Launch, warehouse: Warehouse, configs: list[dict[str, Any]], detect: float
) -> dict[str, Any]:
    """The range of an adaptive launch and the repetitions a 0.05 difference needs."""
    from bench_pipeline.runs.power import power_estimate

    reps = launch.repetitions
    forecasts = [c["forecast_usd"] for c in configs]
    caps = [c["cost_cap_usd"] for c in configs]
    per_rep = None if any(f is None for f in forecasts) else sum(forecasts) / reps
    per_rep_cap = None if any(c is None for c in caps) else sum(caps) / reps
    power = power_estimate(launch, warehouse, per_rep, per_rep_cap, delta=detect)
    out: dict[str, Any] = {"power": power}
    plan = launch.adaptive
    if plan is not None:
        per_rep_trials = len(launch.tasks) * len(launch.configs)
        out["adaptive"] = {
            "min": plan.min,
            "max": plan.max,
            "stop": plan.stop,
            "ci_width": plan.ci_width,
            "max_cost_usd": plan.max_cost_usd,
            "trials_min": per_rep_trials * plan.min,
            "trials_max": per_rep_trials * plan.max,
            "cost_cap_min_usd": None if per_rep_cap is None else per_rep_cap * plan.min,
            "cost_cap_max_usd": None if per_rep_cap is None else per_rep_cap * plan.max,
            "forecast_min_usd": None if per_rep is None else per_rep * plan.min,
            "forecast_max_usd": None if per_rep is None else per_rep * plan.max,
        }
    return out
