"""What `bench run` and `bench results` say beside the config table: why cells were not scored,
each config's verdict against the pinned baseline (and `--fail-on-regression`), and that no
recommendation goes to a config that scored 0."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from bench_pipeline.results.recommend import recommend
from bench_pipeline.results.unscored import unscored_cells
from bench_pipeline_tests.conftest import ROOT, run_bench

TASKS = [
    "amount-precision",
    "atomic-save",
    "currency-code",
    "due-date-order",
    "pagination",
    "partial-payment",
    "tax-rounding",
]

# A command agent that makes the task's reference change (found by its prompt): the good
# night. It reports a known cost, so that the cost side is compared too.
FIXER = """
import json, os, pathlib, subprocess, sys
prompt = sys.stdin.read()
here = pathlib.Path(__file__).parent
patch = json.loads((here / "patches.json").read_text())[prompt]
subprocess.run(["git", "apply", "-"], input=patch, text=True, check=True)
pathlib.Path(os.environ["BENCH_USAGE_FILE"]).write_text(json.dumps({"cost_usd": 0.01}))
"""
# The bad night: the same config answers without changing anything, at the same cost.
QUITTER = """
import json, os, pathlib, sys
sys.stdin.read()
pathlib.Path(os.environ["BENCH_USAGE_FILE"]).write_text(json.dumps({"cost_usd": 0.01}))
"""


def _agents(factory: Path, tmp_path: Path) -> None:
    tools = tmp_path / "agent-tools"
    tools.mkdir()
    tasks = factory / "benchmarks" / "invoices"
    patches = {}
    for task_id in TASKS:
        task = yaml.safe_load((tasks / "tasks" / f"{task_id}.yaml").read_text())
        patches[task["prompt"]] = (tasks / "references" / f"{task_id}.patch").read_text()
    (tools / "patches.json").write_text(json.dumps(patches))
    for name, script in (("fixer", FIXER), ("quitter", QUITTER)):
        (tools / f"{name}.py").write_text(script)
        (factory / "agents" / f"{name}.yaml").write_text(
            f"kind: command\ncommand: [python, {tools / name}.py]\nmounts: [{tools}]\n"
            "max_iterations: 1\n"
        )


def _launch(factory: Path, name: str, agent: str) -> Path:
    launch = factory / "launches" / f"{name}.yaml"
    launch.write_text(
        "kind: BenchmarkLaunch\nsuite: invoices\n"
        f"configs:\n  - {{id: x, agent: {agent}}}\n"
        f"tasks: {json.dumps(TASKS)}\nrepetitions: 1\nscorers: [checks]\n"
    )
    return launch


def test_a_run_says_why_cells_were_not_scored_and_how_it_compares_with_the_baseline(
    factory: Path, bench_home: Path, tmp_path: Path
) -> None:
    _agents(factory, tmp_path)
    # One check of one task names a tool the machine lacks: a fault of the task, not the agent.
    task = factory / "benchmarks" / "invoices" / "tasks" / "pagination.yaml"
    text = task.read_text()
    task.write_text(text.replace("command: [python,", "command: [no-such-grader-tool,", 1))

    # Night 1: the fixer passes every task but pagination, which its broken check leaves unscored.
    code, out, err = run_bench("run", str(_launch(factory, "good", "fixer")), home=bench_home)
    assert code == 0, err
    night1 = out.split("Run ", 1)[1].split()[0]
    block = out.split("Not scored (never counted against the agent):\n", 1)[1]
    lines = block.split("\n\n", 1)[0].splitlines()
    assert lines[0] == "  x · checks: 1 of 7 (1 inconclusive)"
    assert lines[1].startswith("    e.g. pagination/x/1 (inconclusive): inconclusive (grader fault")
    assert "no-such-grader-tool" in lines[1]
    assert "Against baseline" not in out  # nothing pinned yet
    shown = [line for line in _readme_example() if line.startswith("    e.g. pagination/x/1")]
    assert shown == [lines[1]]  # (the README shows this very run's text)
    assert "best quality    x  (overall=1" in out

    # The same in JSON: every reason, and the count is the config table's gap.
    code, out, err = run_bench("results", night1, "--json", home=bench_home)
    assert code == 0, err
    payload = json.loads(out)
    row = payload["config_table"][0]
    (cell,) = payload["unscored"]
    assert (cell["config_id"], cell["scorer"], cell["status"]) == ("x", "checks", "inconclusive")
    assert cell["trials"] == row["of_checks"] - row["scored_checks"] == 1
    assert cell["example_trial_id"] == "pagination/x/1"
    assert payload["regressions"] == []
    # A regression gate that compared nothing does not pass: no baseline is pinned yet.
    code, out, err = run_bench("results", night1, "--fail-on-regression", home=bench_home)
    assert code == 1
    assert "--fail-on-regression: nothing compared: suite invoices has no pinned baseline" in err

    code, out, err = run_bench("baseline", "set", "invoices", night1, home=bench_home)
    assert code == 0, err
    # (the baseline itself has nothing to regress from)
    code, out, err = run_bench("results", night1, "--fail-on-regression", home=bench_home)
    assert code == 0, err

    # Night 2: the same config now changes nothing. Six tasks scored on both nights dropped
    # from 1 to 0: significant (p = 2/2^6) and beyond the tolerance -> a regression; with
    # --fail-on-regression the run exits 1, and says why.
    bad = _launch(factory, "bad", "quitter")
    code, out, err = run_bench("run", str(bad), "--fail-on-regression", home=bench_home)
    assert code == 1, err
    assert f"1 regression(s) against baseline {night1}" in err
    night2 = out.split("Run ", 1)[1].split()[0]
    against = out.split(f"Against baseline {night1}:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert against == [
        "  x · overall 1.000 -> 0.000: REGRESSION (tolerance 0.05; change -1.000 over 6 tasks "
        "(95% CI -1.000 to -1.000), p = 0.0312)",
        "  x · cost $0.0100 -> $0.0100: within tolerance (tolerance +25%)",
    ]
    readme = _readme_example()
    assert readme[readme.index("  x · checks: 1 of 7 (1 inconclusive)") + 3].startswith(
        "Against baseline "
    )
    assert readme[-2:] == against
    # Failing every task is no recommendation, however cheap.
    assert "best quality    none qualifies: no candidate scored above 0 (x)" in out
    assert "lowest cost     none qualifies: no candidate scored above 0 (x)" in out

    # `results` says the same and exits the same; without the flag a regression is not an error.
    code, out, err = run_bench("results", night2, "--fail-on-regression", home=bench_home)
    assert code == 1 and "REGRESSION" in out
    code, out, err = run_bench("results", night2, "--json", home=bench_home)
    assert code == 0, err
    overall = [r for r in json.loads(out)["regressions"] if r["metric"] == "overall"]
    assert overall[0]["verdict"] == "regression" and overall[0]["regressed"] is True
    # Against no baseline, nothing to fail on.
    code, out, err = run_bench(
        "results", night2, "--baseline", "none", "--fail-on-regression", home=bench_home
    )
    assert code == 0, err
    assert "Against baseline" not in out

    # Pinning another baseline makes the stored tables stale: night 2 is now the baseline
    # (nothing against itself), and night 1 is compared with it.
    code, out, err = run_bench("baseline", "set", "invoices", night2, home=bench_home)
    assert code == 0, err
    code, out, err = run_bench("results", night2, "--fail-on-regression", home=bench_home)
    assert code == 0 and "Against baseline" not in out, out + err
    code, out, err = run_bench("results", night1, home=bench_home)
    assert f"Against baseline {night2}:\n  x · overall 0.000 -> 1.000: within tolerance" in out

    # A task set changed since the pin: not compared, and the gate says so instead of passing.
    task.write_text(task.read_text().replace("tags: [api]", "tags: [api, changed]", 1))
    code, out, err = run_bench("run", str(bad), "--fail-on-regression", home=bench_home)
    assert code == 1
    assert f"--fail-on-regression: nothing compared: baseline {night2} ran task-set revision" in err


def _readme_example() -> list[str]:
    """The README's example of these blocks, line by line."""
    readme = (ROOT / "README.md").read_text()
    start = readme.index("```text\nNot scored (never counted against the agent):")
    return readme[start:].split("\n```", 1)[0].splitlines()[1:]


def _scores(rows: list[tuple[str, str, str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "run_id": "r",
                "trial_id": trial,
                "config_id": trial.split("/")[1],
                "scorer": scorer,
                "status": status,
                "reason": reason,
                "scored_at": pd.Timestamp(at, tz="UTC"),
            }
            for trial, scorer, status, reason, at in rows
        ]
    )


def test_a_cell_counts_as_unscored_by_its_latest_row_only() -> None:
    cells = unscored_cells(
        _scores(
            [
                # a grader fault that a rescore scored later: not listed
                ("t1/a/1", "checks", "inconclusive", "grader fault", "2026-01-01"),
                ("t1/a/1", "checks", "scored", "all passed", "2026-01-02"),
                # scored first, then a judge that abstained on the rescore: listed, by that reason
                ("t2/a/1", "llm_judge", "scored", "fine", "2026-01-01"),
                ("t2/a/1", "llm_judge", "error", "unparseable answer", "2026-01-02"),
                ("t3/a/1", "llm_judge", "error", "unparseable answer", "2026-01-01"),
                ("t4/a/1", "llm_judge", "inconclusive", "judge abstained", "2026-01-01"),
                ("t1/b/1", "checks", "not_scored", None, "2026-01-01"),
                ("t2/b/1", "checks", "scored", "all passed", "2026-01-01"),
            ]
        )
    )
    assert cells.to_dict("records") == [
        {
            "config_id": "a",
            "scorer": "llm_judge",
            "status": "error",
            "reason": "unparseable answer",
            "trials": 2,
            "example_trial_id": "t2/a/1",
        },
        {
            "config_id": "a",
            "scorer": "llm_judge",
            "status": "inconclusive",
            "reason": "judge abstained",
            "trials": 1,
            "example_trial_id": "t4/a/1",
        },
        {
            "config_id": "b",
            "scorer": "checks",
            "status": "not_scored",
            "reason": "",
            "trials": 1,
            "example_trial_id": "t1/b/1",
        },
    ]
    assert unscored_cells(_scores([("t1/a/1", "checks", "scored", "ok", "2026-01-01")])).empty


def test_trials_with_no_score_row_are_listed_as_missing_to_fill_the_gap() -> None:
    from bench_pipeline.results.unscored import with_missing

    cells = unscored_cells(
        _scores([("t1/a/1", "checks", "inconclusive", "grader fault", "2026-01-01")])
    )
    table = pd.DataFrame(
        {
            "config_id": ["a", "b"],
            "scored_checks": [5, 8],
            "of_checks": [8, 8],  # a: 1 inconclusive listed, 2 with no row at all
            # a group of criteria counts its own way: its criteria's rows say what is missing
            "scored_llm_judge": [6, 8],
            "of_llm_judge": [8, 8],
            "scored_llm_judge:correctness": [8, 7],
            "of_llm_judge:correctness": [8, 8],
        }
    )
    rows = with_missing(cells, table)[["config_id", "scorer", "status", "trials"]]
    assert rows.values.tolist() == [
        ["a", "checks", "missing", 2],
        ["a", "checks", "inconclusive", 1],
        ["b", "llm_judge:correctness", "missing", 1],
    ]


def _table(rows: list[dict]) -> pd.DataFrame:
    base = {"cost_coverage": 1.0, "is_control": False, "overall_ci_low": 0.0}
    return pd.DataFrame([{**base, "overall_ci_high": r["overall"], **r} for r in rows])


@pytest.mark.parametrize("cheap_score", [0.0, float("nan")])
def test_no_pick_goes_to_a_config_that_scored_0_or_has_no_score(cheap_score: float) -> None:
    table = _table(
        [
            {"config_id": "cheap", "overall": cheap_score, "avg_cost_usd": 0.01},
            {"config_id": "works", "overall": 0.5, "avg_cost_usd": 0.20},
        ]
    )
    recs = recommend(table)
    picks = {
        kind: recs[kind]["config_id"] for kind in ("best_quality", "most_efficient", "lowest_cost")
    }
    assert picks == dict.fromkeys(picks, "works")
    # (the best's interval still overlaps a runner-up that scored 0: it may be noise)
    assert recs["overlap"] is (cheap_score == 0.0)

    nothing = recommend(_table([{"config_id": "cheap", "overall": 0.0, "avg_cost_usd": 0.01}]))
    assert [nothing[k] for k in ("best_quality", "most_efficient", "lowest_cost")] == [None] * 3
    assert set(nothing["reasons"].values()) == {"no candidate scored above 0 (cheap)"}
