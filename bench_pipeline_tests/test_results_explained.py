"""No recommendation goes to a config that scored 0 (what `bench run` and `bench results` say
beside the config table is tested below it)."""

from __future__ import annotations

import pandas as pd
import pytest

from bench_pipeline.results.recommend import recommend


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
