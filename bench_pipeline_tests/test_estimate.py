"""`bench estimate` and `bench run --max-cost`: trial count, cost cap, forecast from past runs."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from bench_pipeline_tests.conftest import run_bench

AGENT = """
import json, sys
json.dump({"input_tokens": 2000, "output_tokens": 500, "model": "claude-haiku-4-5"}, open(sys.argv[1], "w"))
"""
COST = (2000 * 1.0 + 500 * 5.0) / 1e6  # per trial at the factory's haiku prices


def _launch(factory: Path) -> Path:
    script = factory / "agents" / "priced.py"
    script.write_text(textwrap.dedent(AGENT))
    (factory / "agents" / "priced.yaml").write_text(
        f"kind: command\ncommand: [python, '{script}', '{{usage_file}}']\nmodel: claude-haiku-4-5\nbudget_usd: 0.75\nmax_iterations: 1\n"
    )
    launch = factory / "launches" / "priced.yaml"
    launch.write_text(
        "kind: BenchmarkLaunch\nsuite: invoices\nconfigs:\n  - {id: priced, agent: priced}\n  - {id: noop, agent: noop}\n"
        "tasks: [amount-precision, pagination]\nrepetitions: 2\nscorers: [checks]\n"
    )
    return launch


def test_estimate_cap_and_forecast_from_past_runs(factory: Path, bench_home: Path) -> None:
    launch = _launch(factory)
    code, out, err = run_bench("estimate", str(launch), "--json", home=bench_home)
    assert code == 0, err
    est = json.loads(out)
    assert est["trials"] == 2 * 2 * 2
    per = {c["config_id"]: c for c in est["per_config"]}
    assert (
        per["priced"]["cost_cap_usd"] == pytest.approx(0.75 * 4)
        and per["noop"]["cost_cap_usd"] == 0.0
    )
    assert est["cost_cap_usd"] == pytest.approx(3.0)
    assert per["priced"]["forecast_usd"] is None  # no past run yet: unknown, not zero

    # --max-cost below the cap is refused before anything runs; --yes overrides.
    code, _, err = run_bench("run", str(launch), "--max-cost", "1", home=bench_home)
    assert code == 2 and "$3.00" in err and "--yes" in err
    assert not (bench_home / "warehouse").exists() or not list(
        (bench_home / "warehouse").rglob("trials/**/*.parquet")
    )
    code, _, err = run_bench("run", str(launch), "--max-cost", "1", "--yes", home=bench_home)
    assert code == 0, err

    code, out, _ = run_bench("estimate", str(launch), "--json", home=bench_home)
    per = {c["config_id"]: c for c in json.loads(out)["per_config"]}
    # Two tasks x two repetitions at the past mean cost per task.
    assert per["priced"]["forecast_usd"] == pytest.approx(COST * 2 * 2)
