"""Stage 3: the derived tables of a run (config table, grid, recommendations, frontier, by tag,
paired comparison, regressions) as assets, with the checks that guard them."""

# No `from __future__ import annotations`: Dagster reads config types from real annotations.

import base64

import dagster as dg
import pandas as pd

from bench_pipeline.defs.benchmark.assets import scores
from bench_pipeline.defs.resources import BenchResource
from bench_pipeline.derived import DERIVED_TABLES, compute_derived, store_derived
from bench_pipeline.pipeline import resolve_run
from bench_pipeline.tables import OUTCOME_INVALIDATED

RESULTS_OP = "results_tables"
RESULT_ASSET_NAMES = (RESULTS_OP,)
DESCRIPTIONS = {
    "config_table": "One row per configuration: overall, scorer means with scored/of, pass rate, cost with coverage, duration, CIs, change against the baseline.",
    "task_grid": "Task x configuration grid with the trials behind each cell.",
    "recommendations": "Best quality, most efficient, lowest cost; comparable and overlap flags.",
    "pareto_frontier": "Cost-versus-quality Pareto frontier (chart in metadata).",
    "config_table_by_tag": "The config table per task tag (untagged under '-').",
    "recommendations_by_tag": "Recommendations per task tag.",
    "paired_comparison": "Each configuration paired against the baseline config by task and repetition, with a sign test.",
    "regressions": "Overall drops and cost rises beyond the suite's tolerance against its pinned baseline.",
    "scenario_turns": "Text and scenario tasks per turn: passed only if it passed in every repetition (pass^N).",
}


class ResultsConfig(dg.Config):
    run_id: str = ""  # empty = the latest run in the warehouse
    baseline_run_id: str = ""  # empty = the suite's pinned baseline


CHECKS = [
    dg.AssetCheckSpec(
        "grader_integrity",
        asset="config_table",
        description="No trial was invalidated by a changed grader file.",
    ),
    dg.AssetCheckSpec(
        "cost_coverage", asset="config_table", description="Every trial's cost is known."
    ),
    dg.AssetCheckSpec(
        "regression_tolerance",
        asset="regressions",
        description="No configuration regressed beyond the suite's tolerance.",
    ),
]


def _md_table(frame: pd.DataFrame, columns: list[str]) -> str:
    cols = [c for c in columns if c in frame.columns]
    if frame.empty or not cols:
        return "_empty_"
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in frame[cols].iterrows():
        lines.append("| " + " | ".join(_fmt(row[c]) for c in cols) + " |")
    return "\n".join(lines)


def _fmt(v: object) -> str:
    if isinstance(v, float):
        return "" if pd.isna(v) else f"{v:.4g}"
    return "" if v is None else str(v)


@dg.multi_asset(
    name=RESULTS_OP,
    specs=[
        dg.AssetSpec(name, group_name="results", deps=[scores], description=DESCRIPTIONS[name])
        for name in DERIVED_TABLES
    ],
    check_specs=CHECKS,
)
def results_tables(context: dg.AssetExecutionContext, config: ResultsConfig, bench: BenchResource):
    paths = bench.paths
    warehouse = paths.warehouse
    run = resolve_run(warehouse, config.run_id or None)
    derived = compute_derived(
        warehouse,
        run.run_id,
        baseline_run_id=config.baseline_run_id or None,
        chart_dir=warehouse.root / "charts",
    )
    store_derived(warehouse, derived)
    warehouse.refresh_views()
    tables = derived.tables
    common = {
        "run_id": run.run_id,
        "suite": run.suite,
        "baseline_run_id": derived.baseline_run_id or "none",
    }
    for name in DERIVED_TABLES:
        frame = tables[name]
        metadata = {**common, "rows": len(frame)}
        if name == "config_table":
            metadata["table"] = dg.MetadataValue.md(
                _md_table(
                    frame,
                    [
                        "config_id",
                        "overall",
                        "score_checks",
                        "pass_rate",
                        "avg_cost_usd",
                        "cost_coverage",
                        "avg_duration_seconds",
                        "trials_succeeded",
                        "trials",
                    ],
                )
            )
        if name == "pareto_frontier" and derived.chart_png is not None:
            png = derived.chart_png.read_bytes()
            metadata["chart"] = dg.MetadataValue.md(
                f"![Pareto frontier](data:image/png;base64,{base64.b64encode(png).decode()})"
            )
            metadata["chart_path"] = dg.MetadataValue.path(str(derived.chart_png))
            metadata["frontier"] = dg.MetadataValue.md(
                _md_table(
                    frame,
                    ["config_id", "avg_cost_usd", "overall", "on_frontier", "excluded_reason"],
                )
            )
        if name == "recommendations":
            metadata["recommendations"] = dg.MetadataValue.json(derived.recommendations)
        yield dg.MaterializeResult(asset_key=name, metadata=metadata)

    trials = warehouse.read("trials", run.run_id)
    invalid = trials[trials["outcome"] == OUTCOME_INVALIDATED]
    yield dg.AssetCheckResult(
        check_name="grader_integrity",
        asset_key="config_table",
        passed=invalid.empty,
        metadata={
            "invalidated_trials": len(invalid),
            "trials": ", ".join(invalid["trial_id"].head(20)),
        },
    )
    table = tables["config_table"]
    partial = table[table["cost_coverage"] < 1] if "cost_coverage" in table else table.iloc[:0]
    yield dg.AssetCheckResult(
        check_name="cost_coverage",
        asset_key="config_table",
        passed=partial.empty,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={"configs_with_unknown_cost": ", ".join(partial["config_id"]) or "none"},
    )
    regressions = tables["regressions"]
    regressed = (
        regressions[regressions["regressed"].fillna(False).astype(bool)]
        if not regressions.empty
        else regressions
    )
    yield dg.AssetCheckResult(
        check_name="regression_tolerance",
        asset_key="regressions",
        passed=regressed.empty,
        metadata={
            "baseline_run_id": derived.baseline_run_id or "none",
            "regressions": dg.MetadataValue.md(
                _md_table(regressed, ["config_id", "metric", "baseline", "current", "tolerance"])
            ),
        },
    )
