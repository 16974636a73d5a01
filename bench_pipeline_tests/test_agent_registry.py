"""A new agent kind is one file: this one. It registers itself, the factory loader accepts
`kind: patch-from-reference` because the registry knows it, and a trial runs with it end to end
through `bench run` (Dagster, warehouse, checks) with no edit anywhere else."""

from __future__ import annotations

import json
from pathlib import Path

from bench_pipeline.agents.base import (
    COMPLETED,
    Agent,
    AgentRequest,
    AgentResult,
    Usage,
    register_agent,
)
from bench_pipeline.formats.registry import AGENT_KINDS
from bench_pipeline.workspace.repo import apply_patch

from .conftest import run_bench


@register_agent
class PatchFromReference(Agent):
    """Writes the task's reference patch into the workspace, the way a perfect coder would."""

    kind = "patch-from-reference"
    offline = True

    def run(self, request: AgentRequest) -> AgentResult:
        assert request.workspace is not None
        apply_patch(
            request.workspace, (request.inputs_dir / request.task.reference_patch).read_text()
        )
        request.transcript.write("patched", file=request.task.reference_patch)
        return AgentResult(COMPLETED, Usage.free())


def test_a_registered_kind_is_known_to_the_loader_and_runs_a_trial(
    factory: Path, bench_home: Path
) -> None:
    assert "patch-from-reference" in AGENT_KINDS.names()
    assert AGENT_KINDS.trait("patch-from-reference", "offline") is True
    (factory / "agents" / "plugin.yaml").write_text(
        "kind: patch-from-reference\nmax_iterations: 1\n"
    )
    launch = factory / "launches" / "plugin.yaml"
    launch.write_text(
        "kind: BenchmarkLaunch\nsuite: invoices\nconfigs:\n  - {id: plugin, agent: plugin}\n"
        "tasks: [amount-precision]\nrepetitions: 1\nscorers: [checks]\n"
    )
    code, out, err = run_bench("estimate", str(launch), "--json", home=bench_home)
    assert code == 0, err
    # `offline` comes from the class: the estimate caps it at $0 without naming the kind anywhere.
    assert json.loads(out)["per_config"][0]["cost_cap_usd"] == 0.0

    code, out, err = run_bench("run", str(launch), "--json", "--quiet", home=bench_home)
    assert code == 0, err
    table = {r["config_id"]: r for r in json.loads(out)["config_table"]}
    assert table["plugin"]["overall"] == 1.0


def test_an_unregistered_kind_is_refused_with_the_registered_ones_listed(
    factory: Path, bench_home: Path
) -> None:
    (factory / "agents" / "plugin.yaml").write_text("kind: patch-from-referenc\n")
    launch = factory / "launches" / "plugin.yaml"
    launch.write_text(
        "kind: BenchmarkLaunch\nsuite: invoices\nconfigs:\n  - {id: plugin, agent: plugin}\n"
    )
    code, _, err = run_bench("validate", str(launch), home=bench_home)
    assert code == 2
    assert "kind" in err and "did you mean 'patch-from-reference'" in err
