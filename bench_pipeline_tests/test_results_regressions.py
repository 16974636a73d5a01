"""Regression detection against the pinned baseline's config table."""

from __future__ import annotations

import pandas as pd
import pytest

from bench_pipeline.results import detect_regressions


def tbl(overall, cost=1.0, coverage=1.0, run="r"):
    return pd.DataFrame(
        {
            "run_id": [run],
            "suite": ["s"],
            "config_id": ["A"],
            "overall": [overall],
            "avg_cost_usd": [cost],
            "cost_coverage": [coverage],
        }
    )


def row(out, metric):
    return out.set_index("metric").loc[metric]


def test_overall_drop_beyond_tolerance():
    out = detect_regressions(tbl(0.7, run="cur"), tbl(0.8, run="base"), {"overall": 0.05})
    r = row(out, "overall")
    assert bool(r["regressed"]) and r["baseline"] == 0.8 and r["current"] == 0.7
    assert (r["suite"], r["run_id"], r["baseline_run_id"], r["tolerance"]) == (
        "s",
        "cur",
        "base",
        0.05,
    )
    assert not bool(row(detect_regressions(tbl(0.78), tbl(0.8)), "overall")["regressed"])
    # exactly at the tolerance is not a regression
    assert not bool(row(detect_regressions(tbl(0.75), tbl(0.8)), "overall")["regressed"])


def test_cost_rise_relative_and_only_with_full_coverage():
    assert bool(
        row(detect_regressions(tbl(0.8, cost=1.3), tbl(0.8, cost=1.0)), "cost")["regressed"]
    )
    assert not bool(
        row(detect_regressions(tbl(0.8, cost=1.2), tbl(0.8, cost=1.0)), "cost")["regressed"]
    )
    r = row(detect_regressions(tbl(0.8, cost=5.0, coverage=0.9), tbl(0.8, cost=1.0)), "cost")
    assert not bool(r["regressed"]) and "coverage" in r["note"]
    out = detect_regressions(
        tbl(0.8, cost=1.3),
        tbl(0.8, cost=1.0),
        {"cost": 0.5},
        suite="x",
        run_id="1",
        baseline_run_id="0",
    )
    assert not bool(row(out, "cost")["regressed"]) and row(out, "cost")[
        "tolerance"
    ] == pytest.approx(0.5)
    assert list(out.columns[:9]) == [
        "suite",
        "run_id",
        "baseline_run_id",
        "config_id",
        "metric",
        "baseline",
        "current",
        "tolerance",
        "regressed",
    ]
