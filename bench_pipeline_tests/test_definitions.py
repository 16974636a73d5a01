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


def test_registering_a_config_another_run_just_added_is_not_an_error(tmp_path: Path) -> None:
    """Two `bench run`s of one suite starting at once: both see a config key missing, the other
    run inserts it between this run's read and its insert, and this insert hits the unique
    constraint (seen in CI as an IntegrityError failing the second run's task_set step). The
    race is made to happen every time by doing the other run's insert, through a second
    instance on the same storage, just before this run's INSERT reaches SQLite."""
    import sqlalchemy

    from bench_pipeline.defs.partitions import CONFIG_PARTITIONS_NAME, register_configs

    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:
        instance.get_dynamic_partitions(CONFIG_PARTITIONS_NAME)  # create the schema first
        other_run = dg.DagsterInstance.from_ref(instance.get_ref())
        raced: list[str] = []

        def other_run_inserts_first(conn, cursor, statement, params, context, executemany):  # noqa: ANN001
            if statement.startswith("INSERT INTO dynamic_partitions") and not raced:
                raced.append(statement)
                other_run.add_dynamic_partitions(CONFIG_PARTITIONS_NAME, ["invoices:overlap"])

        sqlalchemy.event.listen(
            sqlalchemy.engine.Engine, "before_cursor_execute", other_run_inserts_first
        )
        try:
            register_configs(instance, "invoices", ["overlap", "other"])
        finally:
            sqlalchemy.event.remove(
                sqlalchemy.engine.Engine, "before_cursor_execute", other_run_inserts_first
            )
            other_run.dispose()
        assert raced, "the other run's insert never ran: the race was not reproduced"
        assert sorted(instance.get_dynamic_partitions(CONFIG_PARTITIONS_NAME)) == [
            "invoices:other",
            "invoices:overlap",
        ]
