"""Config table, grid, recommendations, by-tag and report on a small hand-worked fixture.

Run r1, tasks T1 [api], T2 [] (untagged), T3 [api, db]; configs A, B, C; 2 repetitions.
Scorers: checks (primary) and a judge with criteria correctness (weight 0.75), style (0.25)
and verbosity (0: reported, not counted). Every expected number below is worked out by hand.

checks        T1      T2      T3        judge (all trials)  corr  style  verb
  A          1, 1    1, 0    0, 0         A                0.8   0.4    1.0
  B          1, err  1, 1    1, inc       B                0.6   1.0    0.0
  C          0, 0    1, 1    1, 0         C                1.0   0.0    0.5

cost: A 0.10 each; B 0.20 known on 4 trials, unknown ("no usage reported") on T3; C 0.05 each.
A T1 rep 1 checks was first scored 0 and later rescored 1 (the newer row wins).
"""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from bench_pipeline.results import (
    config_table,
    config_table_by_tag,
    grid_pivot,
    latest_scores,
    pareto_frontier,
    recommend,
    recommendations_by_tag,
    render_report_html,
    task_config_grid,
    trial_overall,
)

T0 = pd.Timestamp("2025-03-01 10:00", tz="UTC")
TAGS = {"T1": ["api"], "T2": [], "T3": ["api", "db"]}
CHECKS = {
    "A": {"T1": [1, 1], "T2": [1, 0], "T3": [0, 0]},
    "B": {"T1": [1, "error"], "T2": [1, 1], "T3": [1, "inconclusive"]},
    "C": {"T1": [0, 0], "T2": [1, 1], "T3": [1, 0]},
}
JUDGE = {"A": (0.8, 0.4, 1.0), "B": (0.6, 1.0, 0.0), "C": (1.0, 0.0, 0.5)}
CRITERIA = [("correctness", 0.75), ("style", 0.25), ("verbosity", 0.0)]


def make_run() -> tuple[pd.DataFrame, pd.DataFrame]:
    trials, scores = [], []
    for cfg in "ABC":
        for task in ("T1", "T2", "T3"):
            for rep in (1, 2):
                tid = f"{task}/{cfg}/{rep}"
                cost = {"A": 0.10, "B": 0.20, "C": 0.05}[cfg]
                unknown = cfg == "B" and task == "T3"
                trials.append(
                    {
                        "run_id": "r1",
                        "suite": "demo",
                        "trial_id": tid,
                        "task_id": task,
                        "config_id": cfg,
                        "repetition": rep,
                        "tags": TAGS[task],
                        "holdout": False,
                        "is_baseline": cfg == "A",
                        "model": f"m-{cfg}",
                        "outcome": "succeeded",
                        "iterations": 1 if cfg != "C" else 2,
                        "cost_usd": None if unknown else cost,
                        "cost_unknown_reason": "no usage reported" if unknown else None,
                        "duration_seconds": {"A": 10.0, "B": 20.0, "C": 30.0}[cfg],
                        "attempt_no": 1,
                    }
                )
                common = {
                    "run_id": "r1",
                    "trial_id": tid,
                    "task_id": task,
                    "config_id": cfg,
                    "repetition": rep,
                }
                check = CHECKS[cfg][task][rep - 1]
                status = check if isinstance(check, str) else "scored"
                scores.append(
                    common
                    | {
                        "scorer": "checks",
                        "scorer_group": "checks",
                        "weight": 1.0,
                        "status": status,
                        "value": float(check) if status == "scored" else None,
                        "cost_usd": None,
                        "scored_at": T0,
                    }
                )
                for (name, weight), value in zip(CRITERIA, JUDGE[cfg], strict=True):
                    scores.append(
                        common
                        | {
                            "scorer": f"llm_judge:{name}",
                            "scorer_group": "llm_judge",
                            "weight": weight,
                            "status": "scored",
                            "value": value,
                            "cost_usd": 0.001,
                            "scored_at": T0,
                        }
                    )
    # the older score of A T1 rep 1 (0), superseded by the row above (1) written later
    old = dict(scores[0]) | {"value": 0.0, "scored_at": T0 - pd.Timedelta(hours=1)}
    assert old["trial_id"] == "T1/A/1" and old["scorer"] == "checks"
    scores.append(old)
    return pd.DataFrame(trials), pd.DataFrame(scores)


@pytest.fixture(scope="module")
def run():
    trials, scores = make_run()
    per_trial = trial_overall(trials, scores)
    table = config_table(trials, scores, per_trial=per_trial).set_index("config_id")
    return trials, scores, per_trial, table


def test_latest_scores_keeps_newest_row():
    _, scores = make_run()
    latest = latest_scores(scores)
    assert len(scores) == 18 * 4 + 1 and len(latest) == 18 * 4
    row = latest[(latest["trial_id"] == "T1/A/1") & (latest["scorer"] == "checks")]
    assert row["value"].tolist() == [1.0]


def test_overall_scored_of_and_pass_rate(run):
    _, _, _, t = run
    # judge group = weight-weighted mean of criteria means; verbosity (weight 0) not counted
    judge = {
        "A": 0.75 * 0.8 + 0.25 * 0.4,
        "B": 0.75 * 0.6 + 0.25 * 1.0,
        "C": 0.75 * 1.0 + 0.25 * 0.0,
    }
    checks = {"A": 3 / 6, "B": 4 / 4, "C": 3 / 6}
    for cfg in "ABC":
        assert t.loc[cfg, "score_llm_judge"] == pytest.approx(judge[cfg])
        assert t.loc[cfg, "score_checks"] == pytest.approx(checks[cfg])
        assert t.loc[cfg, "overall"] == pytest.approx((judge[cfg] + checks[cfg]) / 2)
    assert t.loc["A", "overall"] == pytest.approx(0.6)
    assert t.loc["B", "overall"] == pytest.approx(0.85)
    assert t.loc["C", "overall"] == pytest.approx(0.625)
    # verbosity is reported (its own mean) but not counted
    assert t.loc["A", "score_llm_judge:verbosity"] == pytest.approx(1.0)
    # error and inconclusive rows: out of the mean, visible as scored/of
    assert (t.loc["B", "scored_checks"], t.loc["B", "of_checks"]) == (4, 6)
    assert (t.loc["A", "scored_checks"], t.loc["A", "of_checks"]) == (6, 6)
    assert t.loc["B", "scored_llm_judge:style"] == 6
    # pass rate: primary = checks; denominator = trials whose checks are scored
    assert t.loc["A", "pass_rate"] == pytest.approx(0.5)
    assert t.loc["B", "pass_rate"] == pytest.approx(1.0) and t.loc["B", "primary_scored"] == 4
    assert t.loc["C", "pass_rate"] == pytest.approx(0.5)
    assert (t["primary_scorer"] == "checks").all()
    assert t.loc["A", "trials"] == 6 and t.loc["A", "trials_succeeded"] == 6
    assert t.loc["C", "avg_iterations"] == pytest.approx(2.0)
    assert t.loc["A", "scorer_cost_usd"] == pytest.approx(6 * 3 * 0.001)
    assert bool(t.loc["A", "is_baseline"]) and not bool(t.loc["B", "is_baseline"])


def test_cost_unknown_is_not_zero(run):
    _, _, _, t = run
    assert t.loc["A", "avg_cost_usd"] == pytest.approx(0.10)
    assert t.loc["A", "cost_coverage"] == pytest.approx(1.0)
    assert t.loc["B", "avg_cost_usd"] == pytest.approx(0.20)  # not (4*0.2 + 2*0)/6
    assert t.loc["B", "cost_coverage"] == pytest.approx(4 / 6)
    assert t.loc["B", "cost_unknown"] == "no usage reported: 2"
    assert t.loc["A", "cost_unknown"] is None
    assert t.loc["C", "avg_duration_seconds"] == pytest.approx(30.0)


def test_pass_at_k_in_table(run):
    _, _, _, t = run
    # k = 2 repetitions. A: T1 2/2 -> (1, 1), T2 1/2 -> (1, 0), T3 0/2 -> (0, 0)
    assert t.loc["A", "k"] == 2
    assert t.loc["A", "pass_at_k"] == pytest.approx(2 / 3)
    assert t.loc["A", "pass_hat_k"] == pytest.approx(1 / 3)
    # B: T1 and T3 have one scored repetition (< k) and are left out; T2 2/2
    assert t.loc["B", "pass_k_tasks"] == 1
    assert t.loc["B", "pass_at_k"] == pytest.approx(1.0)


def test_pass_rate_ci_clustered_by_task(run):
    _, _, _, t = run
    # A pass indicators per task: T1 [1,1], T2 [1,0], T3 [0,0]; mean 0.5, G = 3, n = 6
    resid = [(1 - 0.5) + (1 - 0.5), (1 - 0.5) + (0 - 0.5), (0 - 0.5) + (0 - 0.5)]
    se = math.sqrt(3 / 2 * sum(r * r for r in resid)) / 6
    assert t.loc["A", "pass_rate_ci_low"] == pytest.approx(max(0.0, 0.5 - 1.959963984540054 * se))
    assert t.loc["A", "pass_rate_ci_high"] == pytest.approx(min(1.0, 0.5 + 1.959963984540054 * se))
    assert t.loc["A", "overall_ci_low"] < 0.6 < t.loc["A", "overall_ci_high"]


def test_baseline_deltas():
    trials, scores = make_run()
    base = config_table(trials, scores)
    better = scores.copy()
    better.loc[better["scorer"] == "llm_judge:correctness", "value"] = 1.0
    cur = config_table(trials, better, baseline_table=base).set_index("config_id")
    # A judge 0.7 -> 0.85: overall +0.075; pass rate unchanged; cost delta only with full coverage
    assert cur.loc["A", "delta_overall"] == pytest.approx(0.075)
    assert cur.loc["A", "delta_pass_rate"] == pytest.approx(0.0)
    assert cur.loc["A", "delta_avg_cost_usd"] == pytest.approx(0.0)
    assert pd.isna(cur.loc["B", "delta_avg_cost_usd"])


def test_grid(run):
    trials, scores, per_trial, _ = run
    grid = task_config_grid(trials, scores, per_trial=per_trial)
    assert len(grid) == 9
    cell = grid.set_index(["task_id", "config_id"]).loc[("T1", "B")]
    assert (cell["reps"], cell["reps_scored"], cell["reps_passed"]) == (2, 1, 1)
    # rep 1: (checks 1 + judge 0.7) / 2 = 0.85; rep 2: checks error -> judge only 0.7
    assert cell["overall"] == pytest.approx((0.85 + 0.7) / 2)
    assert cell["score_checks"] == pytest.approx(1.0)
    assert cell["trial_ids"] == ["T1/B/1", "T1/B/2"]
    # one Arrow column of lists, cut from the trial ids' own strings: no Python string per trial
    assert isinstance(grid["trial_ids"].dtype, pd.ArrowDtype)
    wide = grid_pivot(grid, "passed")
    assert wide.loc["T2", "A"] == "1/2" and wide.loc["T3", "B"] == "1/2"
    assert list(wide.columns) == ["A", "B", "C"]


def test_recommendations(run):
    _, _, _, t = run
    rec = recommend(t.reset_index())
    assert rec["best_quality"]["config_id"] == "B"
    # full cost coverage only: A 0.6/0.10 = 6, C 0.625/0.05 = 12.5 (B has unknown cost)
    assert rec["most_efficient"]["config_id"] == "C"
    assert rec["most_efficient"]["overall_per_usd"] == pytest.approx(12.5)
    assert rec["lowest_cost"]["config_id"] == "C"
    assert rec["comparable"] is False  # B has 4/6 checks scored, A and C 6/6
    assert "checks" in rec["comparable_note"]
    assert rec["excluded_from_cost"] == ["B"]


def test_by_tag(run):
    trials, scores, per_trial, _ = run
    bt = config_table_by_tag(trials, scores, per_trial=per_trial).set_index(["tag", "config_id"])
    assert sorted(set(bt.index.get_level_values("tag"))) == ["-", "api", "db"]
    # T3 has two tags: it counts in api and in db
    assert bt.loc[("api", "A"), "trials"] == 4
    assert bt.loc[("db", "A"), "trials"] == 2
    assert bt.loc[("-", "A"), "trials"] == 2
    assert bt.loc[("api", "A"), "score_checks"] == pytest.approx(0.5)  # T1 1,1 T3 0,0
    assert bt.loc[("db", "A"), "overall"] == pytest.approx((0.0 + 0.7) / 2)
    assert bt.loc[("-", "A"), "pass_rate"] == pytest.approx(0.5)
    assert (bt.loc[("api", "B"), "scored_checks"], bt.loc[("api", "B"), "of_checks"]) == (2, 4)
    recs = recommendations_by_tag(bt.reset_index()).set_index(["tag", "recommendation"])
    # db (T3 only): A (0 + 0.7)/2 = 0.35, B (1 + 0.7)/2 = 0.85 (inconclusive rep out), C 0.625
    assert bt.loc[("db", "B"), "overall"] == pytest.approx(0.85)
    assert recs.loc[("db", "best_quality"), "config_id"] == "B"
    assert recs.loc[("-", "best_quality"), "comparable"]  # T2: every check scored


def test_report_is_self_contained(run):
    """The explorer page holds its data and script inline and no URL (even from the data)."""
    trials, scores, per_trial, t = run
    table = t.reset_index()
    tables = {
        "config_table": table,
        "task_grid": task_config_grid(trials, scores, per_trial=per_trial),
        "config_table_by_tag": config_table_by_tag(trials, scores, per_trial=per_trial),
    }
    html = render_report_html(
        {"run_id": "r1", "suite": "demo", "notify": "https://hooks.example/x"},
        tables,
        recommend(table),
        trials,
        scores,
    )
    assert html.startswith("<!DOCTYPE html>")
    assert "http://" not in html and "https://" not in html and "hooks.example" in html
    assert "<link" not in html and "<script src" not in html and "@import" not in html
    embedded = html.split('<script type="application/json" id="bench-data">', 1)[1]
    data = json.loads(embedded.split("</script>", 1)[0])
    assert data["meta"]["notify"] == "https://hooks.example/x"  # ":\/\/" is "://" to JSON
    assert {r["config_id"] for r in data["config_table"]} == {"A", "B", "C"}
    assert "score_llm_judge" in data["config_table"][0]
    # the frontier of every axis pair, by pareto_frontier itself
    expected = pareto_frontier(table, x="avg_duration_seconds", y="score_checks")
    got = data["frontiers"]["avg_duration_seconds|score_checks"]
    assert [r["on_frontier"] for r in got] == expected["on_frontier"].tolist()
    # every trial with its grid state: T3/B/2 is inconclusive (grader fault), never a failure
    states = {k: v["state"] for k, v in data["trials"].items()}
    assert states["T1/A/1"] == "passed" and states["T3/A/1"] == "failed"
    assert states["T3/B/2"] == "infra" and states["T1/B/2"] == "infra"  # grader faults


def _pandas_catalog(cat: pd.DataFrame) -> pd.DataFrame:
    """The scorer catalog as commit 56c69fa finished it, in pandas: the oracle of the plain
    Python one (results.scores._catalog_records) that replaced it for speed."""
    from bench_pipeline.results._common import PRIMARY_PRIORITY, default_group, display_key

    cat = cat.astype({"run_id": object, "scorer": object, "scorer_group": object})
    missing_group = cat["scorer_group"].isna() | (cat["scorer_group"] == "")
    cat.loc[missing_group, "scorer_group"] = cat.loc[missing_group, "scorer"].map(default_group)
    cat["weight"] = cat["weight"].astype(float).fillna(1.0)
    cat["_key"] = cat["scorer"].map(display_key)
    cat = cat.sort_values(["run_id", "_key"]).drop(columns="_key").reset_index(drop=True)
    primary: dict[str, str] = {}
    for run_id, sub in cat.groupby("run_id", sort=False):
        groups = list(dict.fromkeys(sub["scorer_group"]))
        first = [g for g in PRIMARY_PRIORITY if g in groups]
        primary[run_id] = first[0] if first else sorted(groups, key=display_key)[0]
    cat["is_primary_group"] = cat["scorer_group"] == cat["run_id"].map(primary)
    return cat


@pytest.mark.parametrize(
    "rows",
    [
        [],
        # one run: checks primary, judge criteria without a group, an empty group, NaN weight
        [
            ("r1", "llm_judge:style", None, 0.25),
            ("r1", "checks", "checks", float("nan")),
            ("r1", "llm_judge:correctness", "", 0.75),
            ("r1", "rubric", "rubric", 2.0),
        ],
        # runs in any order; one without a priority group (primary: the first by display
        # order), one whose only priority group is ci, one with assert and ci
        [
            ("r2", "rubric", "rubric", 1.0),
            ("r2", "llm_judge:a", "llm_judge", 0.0),
            ("r1", "ci", "ci", 1.0),
            ("r1", "zeta", None, None),
            ("r3", "ci", "ci", 1.0),
            ("r3", "assert", "assert", float("nan")),
            ("r3", "llm_judge:b", None, 0.5),
        ],
    ],
)
def test_the_scorer_catalog_is_the_pandas_one(rows: list[tuple]) -> None:
    from bench_pipeline.results.scores import _catalog_records, _finish_catalog

    raw = pd.DataFrame(rows, columns=["run_id", "scorer", "scorer_group", "weight"])
    raw["weight"] = raw["weight"].astype(float)
    expected = _pandas_catalog(raw.copy())
    pd.testing.assert_frame_equal(_finish_catalog(raw.copy()), expected)
    assert _catalog_records(raw.copy()) == expected.to_dict("records")


def test_trial_overall_carries_the_scorer_catalog_of_its_scores(run):
    from bench_pipeline.results import scorer_catalog

    trials, scores, per_trial, _table = run
    catalog = per_trial.attrs["scorer_catalog"]
    assert catalog == scorer_catalog(latest_scores(scores)).to_dict("records")
    assert [(r["scorer"], r["scorer_group"], r["is_primary_group"]) for r in catalog] == [
        ("checks", "checks", True),
        ("llm_judge:correctness", "llm_judge", False),
        ("llm_judge:style", "llm_judge", False),
        ("llm_judge:verbosity", "llm_judge", False),
    ]


def test_task_tags_from_arrow_lists_equal_the_per_task_route() -> None:
    """config_table_by_tag takes the tags of Arrow list columns (as the warehouse reads them)
    apart with Arrow compute, and any other column after making such lists of it a task at a
    time; both must give the same: order kept, a repeat,
    a null or an empty tag dropped, `-` for a task without tags (a null list, an empty one,
    one of only empty tags, no row at all), a literal `-` merged with it."""
    import numpy as np
    import pyarrow as pa

    from bench_pipeline.results import by_tag

    tags = [
        ["db", "api", "db"],
        None,
        [],
        ["", None],
        ["ui"],
        ["-", "api"],
        ["api", "ui", "api", "zeta"],
    ]
    arrow = pd.Series(pd.array(tags, dtype=pd.ArrowDtype(pa.list_(pa.string()))))
    plain = pd.Series(tags, dtype=object)
    first = np.array([0, 1, 2, -1, 3, 4, 5, 6])  # (a task code without a row: untagged)
    got = by_tag._task_tags(pd.DataFrame({"tags": arrow}), first)
    want = by_tag._task_tags(pd.DataFrame({"tags": plain}), first)
    assert got[0] == want[0] == ["-", "api", "db", "ui", "zeta"]
    assert got[1].tolist() == want[1].tolist() == [2, 1, 1, 1, 1, 1, 2, 3]
    names = want[0]
    assert (
        [names[c] for c in got[2]]
        == [names[c] for c in want[2]]
        == [*["db", "api"], "-", "-", "-", "-", "ui", *["-", "api"], *["api", "ui", "zeta"]]
    )


@pytest.mark.parametrize("rows", [1000, 200_003])
@pytest.mark.parametrize("order", ["runs", "random"])
def test_group_sums_equal_a_bincount(rows: int, order: str) -> None:
    """GroupSums sums a long column run by run where each group's rows lie side by side (a
    plain bincount was 20x slower there); its sums must be bincount's, to rounding, NaN and
    empty groups included."""
    import numpy as np

    from bench_pipeline.results._common import GroupSums

    rng = np.random.default_rng(7)
    groups = rng.integers(0, 450, rows)
    if order == "runs":
        groups = np.sort(groups)
    weights = rng.normal(size=rows)
    weights[rng.integers(0, rows, 3)] = np.nan
    sums = GroupSums(groups, 460)
    assert (sums.starts is not None) == (rows >= GroupSums.RUNS_FROM and order == "runs")
    want = np.bincount(groups, weights=weights, minlength=460)
    got = sums(weights)
    assert got.shape == want.shape == (460,)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.allclose(got, want, rtol=1e-12, atol=1e-9, equal_nan=True)
    assert (got[450:] == 0).all()


def test_group_sums_keep_groups_of_equal_values_equal() -> None:
    """Two configs with the same results must stay tied to the last bit (recommendations and
    the Pareto frontier compare sums exactly): groups holding the same values in the same
    order get the same sums wherever they start."""
    import numpy as np

    from bench_pipeline.results._common import GroupSums

    rng = np.random.default_rng(11)
    for trial in range(50):
        values = rng.random(40_001 + trial)
        gap = rng.random(trial + 1)  # a third group before the second: every other offset
        weights = np.concatenate([values, gap, values])
        groups = np.repeat([0, 2, 1], [len(values), len(gap), len(values)])
        sums = GroupSums(groups, 3)
        assert sums.starts is not None
        got = sums(weights)
        assert got[0] == got[1], trial


@pytest.mark.parametrize(
    "values",
    [
        [7, 3, 3, 0, 7, 12],  # compact: the bincount
        [5, 2**40, 5, 3],  # sparse: the sort
        [4, -1, 4, 2],  # a negative value: the sort
        [],
    ],
)
def test_unique_inverse_is_np_unique(values: list[int]) -> None:
    import numpy as np

    from bench_pipeline.results._common import unique_inverse

    array = np.array(values, dtype=np.int64)
    got_ids, got_inverse = unique_inverse(array)
    want_ids, want_inverse = np.unique(array, return_inverse=True)
    assert got_ids.tolist() == want_ids.tolist()
    assert got_inverse.tolist() == want_inverse.tolist()


@pytest.mark.parametrize(
    ("values", "dtype"),
    [
        ([1, 2, 2, 5, 1], "int32"),  # from 1: a table from 0
        ([10**9, 10**9 + 3, 10**9], "int64"),  # far from 0: a table of the range only
        ([-3, 4, -3, 0], "int16"),  # below 0
        ([7, 7, 250], "uint8"),
        ([0, 2**40, 5], "int64"),  # sparse: a hash table
        ([3, None, 3, 4], "Int64"),  # nullable: pandas, nulls not counted
        ([], "int32"),
    ],
)
def test_n_distinct_is_nunique(values: list[int | None], dtype: str) -> None:
    import tracemalloc

    from bench_pipeline.results._common import n_distinct

    series = pd.Series(values, dtype=dtype)
    tracemalloc.start()
    try:
        assert n_distinct(series) == series.nunique()
        # (a table of the values' range, never of 0 up to a big value: 1e9 would be 1 GB)
        assert tracemalloc.get_traced_memory()[1] < 2**20
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("dtype", ["category", "str", object])
def test_is_value_is_equality_false_where_null(dtype: object) -> None:
    from bench_pipeline.results._common import is_value

    values = pd.Series(["scored", None, "error", "scored"], dtype=dtype)
    assert is_value(values, "scored").tolist() == [True, False, False, True]
    assert is_value(values, "inconclusive").tolist() == [False] * 4  # (not a category)


def test_grid_takes_repetition_numbers_past_int32(run):
    """The grid's sort keys are int32 where they fit; repetitions numbered past 2**31 (a
    frame of int64s, not the warehouse's int32) still order each cell's trial ids."""
    import numpy as np

    from bench_pipeline.results.config_table import config_cells

    trials, scores, per_trial, _ = run
    shifted = per_trial.assign(repetition=per_trial["repetition"].astype(np.int64) + 2**40)
    grid = task_config_grid(trials, scores, per_trial=shifted, cells=config_cells(shifted))
    want = task_config_grid(trials, scores, per_trial=per_trial)
    assert grid["trial_ids"].tolist() == want["trial_ids"].tolist()
    assert grid.set_index(["task_id", "config_id"]).loc[("T1", "B"), "trial_ids"] == [
        "T1/B/1",
        "T1/B/2",
    ]


def test_grid_orders_each_cells_trial_ids_whatever_the_row_order(run):
    """Each cell's ids come by repetition from rows in any order; two rows of one cell and
    repetition keep their row order; sparse repetition numbers give the same order."""
    from bench_pipeline.results.config_table import config_cells

    trials, scores, per_trial, _ = run

    def ids(frame: pd.DataFrame) -> dict[tuple[str, str], list[str]]:
        grid = task_config_grid(trials, scores, per_trial=frame, cells=config_cells(frame))
        keys = zip(grid["task_id"], grid["config_id"], strict=True)
        return dict(zip(keys, grid["trial_ids"].tolist(), strict=True))

    want = ids(per_trial)
    assert want[("T1", "B")] == ["T1/B/1", "T1/B/2"]
    shuffled = per_trial.sample(frac=1, random_state=3).reset_index(drop=True)
    assert ids(shuffled) == want
    sparse = shuffled.assign(repetition=shuffled["repetition"] * 1000)
    assert ids(sparse) == want
    twin = shuffled[shuffled["trial_id"] == "T1/B/1"].assign(trial_id="T1/B/1-twin")
    doubled = ids(pd.concat([twin, shuffled], ignore_index=True))
    assert doubled[("T1", "B")] == ["T1/B/1-twin", "T1/B/1", "T1/B/2"]
    assert {k: v for k, v in doubled.items() if k != ("T1", "B")} == {
        k: v for k, v in want.items() if k != ("T1", "B")
    }


def test_cached_cell_sums_are_aligned_views_and_read_either_byte_order() -> None:
    """ConfigCells.from_bytes hands out read-only views of the stored bytes, each array on a
    multiple of 8 bytes (numpy's fast paths want aligned data); bytes stored in the other
    byte order are converted."""
    import json

    import numpy as np

    from bench_pipeline.results.config_table import ConfigCells

    frame = pd.DataFrame({"x": [1]})
    cells = {
        "flag": np.array([True, False, True]),  # 3 bytes: the next array must be re-aligned
        "sum": np.array([0.5, np.nan, 2.0]),
        "_names": np.array(["a", "b"], dtype=object),
        "count": np.array([1, 2, 3], dtype=np.int64),
    }
    data = ConfigCells(frame, np.array([0, 2]), 2, cells).to_bytes()
    back = ConfigCells.from_bytes(frame, data)
    assert back.first.tolist() == [0, 2] and back.n_groups == 2
    for name, values in cells.items():
        got = back.cells[name]
        assert got.dtype == values.dtype, name
        assert np.array_equal(got, values, equal_nan=values.dtype.kind == "f"), name
        if values.dtype != object:
            assert got.flags.aligned and not got.flags.writeable, name

    big = np.array([1.5, -2.0], dtype=">f8")
    header = json.dumps({"n_groups": 1, "arrays": [["", ">i8", 8], ["v", ">f8", 16]]})
    other = header.encode() + b"\0" + np.array([0], dtype=">i8").tobytes() + big.tobytes()
    read = ConfigCells.from_bytes(frame, other)
    assert read.cells["v"].tolist() == [1.5, -2.0] and read.cells["v"].dtype.isnative


def test_task_tags_of_a_null_list_over_items_are_none() -> None:
    """A null list may lie over items of the flattened values (Arrow keeps its offsets):
    they are not its tags."""
    import numpy as np
    import pyarrow as pa

    from bench_pipeline.results import by_tag

    lists = pa.ListArray.from_arrays(
        pa.array([0, 1, 3, 4], pa.int32()),
        pa.array(["db", "api", "ui", "ops"]),
        mask=pa.array([False, True, False]),
    )
    assert lists.to_pylist() == [["db"], None, ["ops"]]
    column = pd.Series(pd.arrays.ArrowExtensionArray(lists))
    names, per_task, codes = by_tag._task_tags(pd.DataFrame({"tags": column}), np.arange(3))
    assert [names[c] for c in codes] == ["db", "-", "ops"] and per_task.tolist() == [1, 1, 1]
