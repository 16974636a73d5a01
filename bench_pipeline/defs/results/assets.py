"""Stage 3: the derived tables of a run (config table, grid, recommendations, frontier, by tag,
paired comparison, regressions) as assets, with the checks that guard them."""

# No `from __future__ import annotations`: Dagster reads config types from real annotations.

import base64
from typing import TYPE_CHECKING

import dagster as dg

from bench_pipeline.defs.benchmark.assets import scores
from bench_pipeline.defs.metadata import KINDS, OWNERS, schema_metadata, table_schema, table_value
from bench_pipeline.defs.resources import BenchResource
from bench_pipeline.defs.run_config import RESULTS_OP
from bench_pipeline.formats import display
from bench_pipeline.results import verdicts
from bench_pipeline.runs.derived import DERIVED_TABLES
from bench_pipeline.runs.paths import BenchPaths
from bench_pipeline.warehouse import layout

if TYPE_CHECKING:  # pandas, the charts and the report load when the results are computed
    import pandas as pd

RESULT_ASSET_NAMES = (RESULTS_OP,)
DESCRIPTIONS = {
    "config_table": "One row per configuration: overall, scorer means with scored/of, pass rate, cost with coverage, duration, CIs, change against the baseline.",
    "task_grid": "Task x configuration grid with the trials behind each cell.",
    "recommendations": "Best quality, most efficient, lowest cost; comparable and overlap flags.",
    "pareto_frontier": "Cost-versus-quality Pareto frontier: the chart inline in the latest materialization, the full chart one click away, every axis pair in the explorer page.",
    "config_table_by_tag": "The config table per task tag (untagged under '-').",
    "recommendations_by_tag": "Recommendations per task tag.",
    "paired_comparison": "Each configuration paired against the baseline config by task and repetition, with a sign test.",
    "regressions": "Overall drops and cost rises beyond the suite's tolerance against its pinned baseline.",
    "scenario_turns": "Text and scenario tasks per turn: passed only if it passed in every repetition (pass^N).",
}


class ResultsConfig(dg.Config):
    run_id: str = ""  # empty = the latest run (of `suite` when given)
    suite: str = ""  # empty = any suite
    baseline_run_id: str = ""  # empty = the suite's pinned baseline


# The columns each results asset shows inline (the full table is in the warehouse and DuckDB).
INLINE_COLUMNS: dict[str, list[str]] = {
    "config_table": [
        "config_id",
        "is_baseline",
        "overall",
        "overall_ci_low",
        "overall_ci_high",
        "pass_rate",
        "pass_hat_k",
        "avg_cost_usd",
        "cost_coverage",
        "avg_duration_seconds",
        "trials_succeeded",
        "trials",
        "delta_overall",
        "delta_pass_rate",
        "delta_avg_cost_usd",
    ],
    "task_grid": [
        "task_id",
        "config_id",
        "holdout",
        "reps",
        "reps_scored",
        "reps_passed",
        "overall",
        "avg_cost_usd",
    ],
    "recommendations": [
        "recommendation",
        "config_id",
        "metric",
        "value",
        "comparable",
        "overlap_note",
    ],
    "pareto_frontier": [
        "config_id",
        "avg_cost_usd",
        "overall",
        "on_frontier",
        "dominated_by",
        "excluded_reason",
    ],
    "config_table_by_tag": [
        "tag",
        "config_id",
        "overall",
        "overall_ci_low",
        "overall_ci_high",
        "pass_rate",
        "avg_cost_usd",
        "cost_coverage",
        "trials",
    ],
    "recommendations_by_tag": [
        "tag",
        "recommendation",
        "config_id",
        "metric",
        "value",
        "comparable",
    ],
    "paired_comparison": [
        "candidate_config",
        "baseline_config",
        "pairs",
        "both_pass",
        "candidate_only",
        "baseline_only",
        "neither",
        "sign_test_p",
        "cost_delta_mean_usd",
    ],
    "regressions": ["config_id", "metric", "baseline", "current", "tolerance", "regressed", "note"],
    "scenario_turns": [
        "task_id",
        "config_id",
        "turn",
        "repetitions",
        "passes",
        "passed",
        "pass_rate",
    ],
}


CHECKS = [
    dg.AssetCheckSpec(
        verdicts.GRADER_INTEGRITY,
        asset="config_table",
        description=verdicts.DESCRIPTIONS[verdicts.GRADER_INTEGRITY],
    ),
    dg.AssetCheckSpec(
        verdicts.COST_COVERAGE,
        asset="config_table",
        description=verdicts.DESCRIPTIONS[verdicts.COST_COVERAGE],
    ),
    dg.AssetCheckSpec(
        verdicts.REGRESSION_TOLERANCE,
        asset="regressions",
        description=verdicts.DESCRIPTIONS[verdicts.REGRESSION_TOLERANCE],
    ),
]


def _md_table(frame: "pd.DataFrame", columns: list[str]) -> str:
    cols = [c for c in columns if c in frame.columns]
    if frame.empty or not cols:
        return "_empty_"
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, row in frame[cols].iterrows():
        lines.append("| " + " | ".join(_fmt(row[c]) for c in cols) + " |")
    return "\n".join(lines)


_fmt = display.short


@dg.multi_asset(
    name=RESULTS_OP,
    specs=[
        dg.AssetSpec(
            name,
            group_name="results",
            deps=[scores],
            description=DESCRIPTIONS[name],
            kinds=KINDS,
            owners=OWNERS,
            tags={"bench/stage": "results"},
        )
        for name in DERIVED_TABLES
    ],
    check_specs=CHECKS,
)
def results_tables(context: dg.AssetExecutionContext, config: ResultsConfig, bench: BenchResource):
    from bench_pipeline.runs.start import resolve_run

    run = resolve_run(bench.paths.warehouse, config.run_id or None, config.suite or None)
    tables, checks = derive_results(run.run_id, bench.paths, config.baseline_run_id or None)
    for name, metadata in tables:
        yield dg.MaterializeResult(asset_key=name, metadata=metadata)
    for check in checks:
        yield dg.AssetCheckResult(**check)


def derive_results(
    run_id: str, paths: BenchPaths, baseline_run_id: str | None = None
) -> tuple[list[tuple[str, dict]], list[dict]]:
    """Compute and store a run's derived tables and explorer page; returns each table's asset
    metadata and the checks' results (as AssetCheckResult keyword arguments), for the results
    asset and for the launch job, which reports the same materializations in its own run."""
    # Loaded here: pandas, the charts and the report cost every definitions load otherwise.
    from bench_pipeline.results.mini_chart import mini_pareto_markdown
    from bench_pipeline.runs.derived import compute_derived, result_verdicts, store_derived
    from bench_pipeline.runs.report import write_report
    from bench_pipeline.runs.start import resolve_run
    from bench_pipeline.runs.status import mark_finished_if_complete

    warehouse = paths.warehouse
    run = resolve_run(warehouse, run_id)
    derived = compute_derived(
        warehouse,
        run.run_id,
        baseline_run_id=baseline_run_id,
        chart_dir=warehouse.root / layout.CHARTS,
    )
    store_derived(warehouse, derived)
    warehouse.refresh_views()
    explorer = write_report(warehouse, run.run_id, derived)
    mark_finished_if_complete(warehouse, run.run_id, by="dagster")
    tables = derived.tables
    common = {
        "run_id": run.run_id,
        "suite": run.suite,
        "baseline_run_id": derived.baseline_run_id or "none",
        # The explorer page (open the path in a browser: a file link does not open from the UI).
        "explorer": dg.MetadataValue.path(str(explorer)),
    }
    materializations: list[tuple[str, dict]] = []
    for name in DERIVED_TABLES:
        frame = tables[name]
        metadata: dict = {}
        if name == "pareto_frontier":
            # First, and under the UI's 1,000-character inline limit: shown without a click.
            metadata["frontier_chart"] = dg.MetadataValue.md(mini_pareto_markdown(frame))
        columns = INLINE_COLUMNS[name]
        if name == "config_table":
            columns = (
                columns[:3] + [c for c in frame.columns if c.startswith("score_")] + columns[3:]
            )
        metadata.update(common)
        metadata["rows"] = len(frame)
        metadata["table"] = table_value(frame, columns)
        metadata.update(schema_metadata(table_schema(frame), len(frame)))
        if name == "pareto_frontier" and derived.chart_path is not None:
            svg = derived.chart_path.read_bytes()
            metadata["chart"] = dg.MetadataValue.md(
                f"![Pareto frontier](data:image/svg+xml;base64,{base64.b64encode(svg).decode()})"
            )
            metadata["chart_path"] = dg.MetadataValue.path(str(derived.chart_path))
            metadata["frontier"] = dg.MetadataValue.md(
                _md_table(
                    frame,
                    ["config_id", "avg_cost_usd", "overall", "on_frontier", "excluded_reason"],
                )
            )
        if name == "recommendations":
            metadata["recommendations"] = dg.MetadataValue.json(derived.recommendations)
        materializations.append((name, metadata))

    integrity, coverage, tolerance = result_verdicts(warehouse, derived)
    regressed = verdicts.regressed_rows(tables["regressions"])
    checks = [
        {
            "check_name": integrity.name,
            "asset_key": dg.AssetKey("config_table"),
            "passed": integrity.passed,
            "metadata": integrity.details,
        },
        {
            "check_name": coverage.name,
            "asset_key": dg.AssetKey("config_table"),
            "passed": coverage.passed,
            "severity": dg.AssetCheckSeverity.WARN,
            "metadata": coverage.details,
        },
        {
            "check_name": tolerance.name,
            "asset_key": dg.AssetKey("regressions"),
            "passed": tolerance.passed,
            "metadata": {
                "baseline_run_id": tolerance.details["baseline_run_id"],
                "regressions": dg.MetadataValue.md(
                    _md_table(
                        regressed, ["config_id", "metric", "baseline", "current", "tolerance"]
                    )
                ),
            },
        },
    ]
    return materializations, checks
