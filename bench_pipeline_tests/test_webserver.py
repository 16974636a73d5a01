"""The code location loads in a real dagster-webserver and its asset graph has every asset."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench_pipeline_tests.processes import wait_until_group_gone
from bench_pipeline_tests.servers import graphql, start_webserver, stopping, wait_for_code_location

pytestmark = pytest.mark.slow

EXPECTED_ASSETS = {
    "task_set": "tasks",
    "trials": "trials",
    "scores": "trials",
    "config_table": "results",
    "task_grid": "results",
    "recommendations": "results",
    "pareto_frontier": "results",
    "config_table_by_tag": "results",
    "recommendations_by_tag": "results",
    "paired_comparison": "results",
    "regressions": "results",
}
EXPECTED_CHECKS = {
    "config_table": {"grader_integrity", "cost_coverage"},
    "regressions": {"regression_tolerance"},
}

# Dagster 1.13's schema: the global asset graph is `assetNodes`; checks hang off each node.
ASSET_GRAPH_QUERY = """
{
  assetNodes {
    assetKey { path }
    groupName
    jobNames
    assetChecksOrError { __typename ... on AssetChecks { checks { name } } }
  }
}
"""


def test_webserver_serves_the_asset_graph(bench_home: Path, tmp_path: Path) -> None:
    dagster_home = bench_home / "dagster_home"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    server = start_webserver(
        dagster_home=dagster_home, bench_home=bench_home, log_dir=tmp_path / "logs"
    )
    with stopping(server):
        wait_for_code_location(server)
        nodes = graphql(server.url, ASSET_GRAPH_QUERY)["assetNodes"]
        pgid = server.pgid

    by_key = {"/".join(n["assetKey"]["path"]): n for n in nodes}
    missing = set(EXPECTED_ASSETS) - set(by_key)
    assert not missing, f"assets missing from the webserver's graph: {sorted(missing)}"
    for key, group in EXPECTED_ASSETS.items():
        assert by_key[key]["groupName"] == group, (key, by_key[key]["groupName"])
    assert "bench_partition_job" in by_key["trials"]["jobNames"]
    assert "bench_results_job" in by_key["pareto_frontier"]["jobNames"]
    for key, checks in EXPECTED_CHECKS.items():
        found = {c["name"] for c in by_key[key]["assetChecksOrError"]["checks"]}
        assert checks <= found, (key, found)

    # The whole process group (webserver and its code server) is gone.
    assert wait_until_group_gone(pgid), f"processes of group {pgid} survived the stop"
