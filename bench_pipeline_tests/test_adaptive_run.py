"""Adaptive repetitions end to end (`bench run` through the Dagster definitions) and power in
`bench estimate`, on the example factory.

- reference vs noop differ on every task: separated after `min` rounds, and the run has only
  those rounds' trials;
- two identical noisy agents (a `kind: command` agent that applies the reference patch with
  probability 1/2, from an RNG seeded by the trial's task, config and repetition) run to `max`
  rounds and the results say "not separated";
- `bench estimate` without past runs says what the power figure needs; with the noisy runs as
  past runs it prints the repetitions a difference needs at 80% power and their cost, matching
  a computation from the stored trials done here.
"""

from __future__ import annotations

import json
import math
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from scipy import stats

from bench_pipeline.formats.loader import load_launch
from bench_pipeline.runs.adaptive import decide, known_spend
from bench_pipeline.runs.benchmark_run import load_run
from bench_pipeline.runs.paths import BenchPaths
from bench_pipeline.runs.start import apply_overrides
from bench_pipeline_tests.conftest import run_bench

TASKS = [
    "amount-precision",
    "currency-code",
    "due-date-order",
    "pagination",
    "partial-payment",
    "tax-rounding",
    "webhook-dedup",
]

COIN = """
import hashlib, json, random, subprocess, sys
from pathlib import Path

prompt_file, usage_file, references = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
# evidence/<run>/<task>/<config>/rep<N>/prompt-attempt1.md
task, config, rep = prompt_file.parts[-4], prompt_file.parts[-3], prompt_file.parts[-2]
seed = int(hashlib.sha256(f"15|{task}|{config}|{rep}".encode()).hexdigest()[:12], 16)
if random.Random(seed).random() < 0.5:
    subprocess.run(["git", "apply", str(references / f"{task}.patch")], check=True)
json.dump({"cost_usd": 0.001, "model": "coin-model"}, open(usage_file, "w"))
"""


def launch_file(factory: Path, name: str, configs: str, repetitions: str) -> Path:
    path = factory / "launches" / f"{name}.yaml"
    path.write_text(
        f"kind: BenchmarkLaunch\nsuite: invoices\nconfigs:\n{configs}"
        f"tasks: [{', '.join(TASKS)}]\nrepetitions: {repetitions}\nscorers: [checks]\n"
    )
    return path


def adaptive_record(home: Path, run_id: str) -> dict:
    return BenchPaths.from_home(home).warehouse.read_json(f"adaptive/{run_id}.json")


def run_launch(launch: Path, home: Path) -> tuple[str, str]:
    code, out, err = run_bench("run", str(launch), "--quiet", "--json", home=home)
    assert code == 0, err
    return json.loads(out)["run"]["run_id"], out


def test_clearly_different_agents_stop_at_min(factory: Path, bench_home: Path) -> None:
    configs = "  - {id: reference, agent: reference}\n  - {id: noop, agent: noop}\n"
    launch = launch_file(factory, "clear", configs, "{min: 2, max: 4, stop: separated}")
    code, out, err = run_bench("estimate", str(launch), home=bench_home)
    assert code == 0, err
    assert "adaptive repetitions 2-4 (stop: separated): 28 to 56 trials" in out
    assert "needs past runs of suite invoices with repeated trials" in out

    run_id, _ = run_launch(launch, bench_home)
    final = adaptive_record(bench_home, run_id)["final"]
    assert (final["rounds"], final["reason"], final["separated"]) == (2, "separated", True)
    assert (final["leader"], final["runner_up"]) == ("reference", "noop")
    assert final["p_value"] == 2 / 2 ** len(TASKS)
    trials = BenchPaths.from_home(bench_home).warehouse.read("trials", run_id)
    assert sorted(set(trials["repetition"])) == [1, 2] and len(trials) == 2 * 2 * len(TASKS)
    code, out, err = run_bench("results", run_id, home=bench_home)
    assert code == 0, err
    assert "adaptive repetitions (2-4, stop: separated): stopped after 2 rounds (separated)" in out

    # `bench compare`: the paired difference with its interval and McNemar's exact test (the
    # example's holdout tasks are reported apart: 5 tasks x 2 reps counted, 10 discordant
    # pairs all one way -> p = 2 / 2^10).
    code, out, err = run_bench("compare", run_id, home=bench_home)
    assert code == 0, err
    assert "overall difference (10 pairs): +1.0000 [95% CI +1.0000, +1.0000" in out
    assert "sign-flip p = 0.0625" in out and "McNemar exact p = 0.0020" in out

    # Past runs without variation between repetitions: one repetition detects 0.05.
    code, out, err = run_bench("estimate", str(launch), home=bench_home)
    assert code == 0, err
    assert (
        "at 80% power (two-sided 0.05) over 7 tasks: 1 repetitions (14 trials), cost $0.00" in out
    )


def test_identical_noisy_agents_run_to_max_then_power(factory: Path, bench_home: Path) -> None:
    script = factory / "agents" / "coin.py"
    script.write_text(textwrap.dedent(COIN))
    refs = factory / "benchmarks" / "invoices" / "references"
    (factory / "agents" / "coin.yaml").write_text(
        f"kind: command\ncommand: ['{sys.executable}', '{script}', '{{prompt_file}}', "
        f"'{{usage_file}}', '{refs}']\nmodel: coin-model\nbudget_usd: 0.01\nmax_iterations: 1\n"
        # `process`: the coin reads the factory's reference patches and seeds itself from the
        # evidence layout of its prompt file, neither of which a sandboxed agent sees.
        "isolation: process\n"
    )
    configs = "  - {id: coin-a, agent: coin}\n  - {id: coin-b, agent: coin}\n"
    launch = launch_file(factory, "coins", configs, "{min: 2, max: 3}")
    run_id, _ = run_launch(launch, bench_home)
    record = adaptive_record(bench_home, run_id)
    assert [d["rounds"] for d in record["decisions"]] == [2, 3]
    final = record["final"]
    assert (final["rounds"], final["reason"], final["separated"]) == (3, "max repetitions", False)
    assert "not separated" in final["summary"]
    code, out, err = run_bench("results", run_id, home=bench_home)
    assert code == 0, err
    assert "stopped after 3 rounds (max repetitions)" in out and "not separated" in out

    # The cost cap, on the stored trials: a next round's worst case is the budgets over the
    # tasks (0.01 x 7 x 2 = $0.14); with $0.042 known spend a $0.15 cap stops, $1 goes on.
    warehouse = BenchPaths.from_home(bench_home).warehouse
    run = load_run(run_id, warehouse)
    assert known_spend(warehouse.read("trials", run_id)) == pytest.approx(0.001 * 42)
    for cap, stop, reason in ((0.15, True, "cost cap"), (1.0, False, "continue")):
        plan = replace(run.launch.adaptive, max=10, max_cost_usd=cap)
        decision = decide(warehouse, replace(run, launch=replace(run.launch, adaptive=plan)))
        assert (decision.stop, decision.reason, decision.rounds) == (stop, reason, 3)

    # Power from these past runs: the pooled within-task variance, computed here from the
    # stored trials' checks, and the normal-approximation formula give the repetitions.
    code, out, err = run_bench(
        "estimate", str(launch), "--detect", "0.3", "--json", home=bench_home
    )
    assert code == 0, err
    power = json.loads(out)["power"]
    scores = BenchPaths.from_home(bench_home).warehouse.read("scores", run_id)
    cells = scores.groupby(["config_id", "task_id"])["value"].agg(["var", "count"])
    within = float((cells["var"] * (cells["count"] - 1)).sum() / (cells["count"] - 1).sum())
    assert power["within_var"] == pytest.approx(within)
    between = power["between_var"]
    z = stats.norm.ppf(0.975)
    needed = next(
        r
        for r in range(1, 11)
        if stats.norm.cdf(0.3 / math.sqrt((between + 2 * within / r) / len(TASKS)) - z) >= 0.8
    )
    assert power["repetitions_needed"] == needed
    assert power["cost_usd"] == 0.001 * len(TASKS) * 2 * needed
    code, out, err = run_bench("estimate", str(launch), "--detect", "0.3", home=bench_home)
    assert (
        f"a difference of 0.3 in overall at 80% power (two-sided 0.05) over 7 tasks: {needed} repetitions"
        in out
    )

    # The default 0.05 needs more than a launch allows: it says so, and how many tasks.
    code, out, err = run_bench("estimate", str(launch), home=bench_home)
    assert "a difference of 0.05 in overall" in out and "more than 10 repetitions" in out


@pytest.mark.parametrize(
    ("plan", "field", "fix"),
    [
        ("{min: 5, max: 2}", "repetitions.max", "use max >= min"),
        ("{min: 2, max: 4, stop: sometimes}", "repetitions.stop", "separated"),
        ("{min: 2, max: 4, stop: ci_width}", "repetitions.ci_width", "positive ci_width"),
        ("{min: 2, max: 11}", "repetitions.max", "between 1 and 10"),
        ("{min: 2, maximum: 4}", "repetitions.maximum", "max"),
    ],
)
def test_bad_repetition_plans_are_one_line_exit_2(
    factory: Path, bench_home: Path, plan: str, field: str, fix: str
) -> None:
    configs = "  - {id: reference, agent: reference}\n"
    launch = launch_file(factory, "bad", configs, plan)
    code, out, err = run_bench("validate", str(launch), home=bench_home)
    assert code == 2
    line = (out + err).strip().splitlines()[-1]
    assert "launches/bad.yaml" in line and field in line and fix in line


def test_plan_forms_load(factory: Path) -> None:
    configs = "  - {id: reference, agent: reference}\n"
    plain = load_launch(launch_file(factory, "plain", configs, "3"))
    assert (plain.repetitions, plain.adaptive) == (3, None)
    width = load_launch(launch_file(factory, "width", configs, "{min: 2, max: 10, ci_width: 0.1}"))
    assert width.adaptive is not None and width.repetitions == 10
    assert (width.adaptive.stop, width.adaptive.ci_width) == ("ci_width", 0.1)
    # --repeats N asks for a fixed count: the plan goes.
    fixed = apply_overrides(width, repeats=3)
    assert (fixed.repetitions, fixed.adaptive) == (3, None)
