"""The code location loads from workspace.yaml and defines the SPEC's assets, checks and jobs."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import yaml

ROOT = Path(__file__).resolve().parents[1]


def test_workspace_yaml_points_at_the_definitions() -> None:
    workspace = yaml.safe_load((ROOT / "workspace.yaml").read_text())
    (entry,) = workspace["load_from"]
    assert entry["python_module"]["module_name"] == "bench_pipeline.definitions"


def test_definitions_hold_the_assets_partitions_and_checks() -> None:
    from bench_pipeline.defs.definitions import defs

    repo = defs.get_repository_def()
    keys = {k.to_user_string() for k in repo.asset_graph.get_all_asset_keys()}
    assert {
        "task_set",
        "trials",
        "scores",
        "config_table",
        "task_grid",
        "recommendations",
        "pareto_frontier",
        "config_table_by_tag",
        "paired_comparison",
        "regressions",
    } <= keys
    trials = repo.asset_graph.get(dg.AssetKey("trials"))
    assert isinstance(trials.partitions_def, dg.MultiPartitionsDefinition)
    dims = {d.name: d.partitions_def for d in trials.partitions_def.partitions_defs}
    assert isinstance(dims["config"], dg.DynamicPartitionsDefinition)
    assert isinstance(dims["rep"], dg.StaticPartitionsDefinition)
    assert repo.asset_graph.get(dg.AssetKey("scores")).partitions_def == trials.partitions_def
    checks = {k.name for k in repo.asset_graph.asset_check_keys}
    assert {"grader_integrity", "cost_coverage", "regression_tolerance"} <= checks
