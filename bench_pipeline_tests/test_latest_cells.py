"""LatestCells keeps the latest score row per (trial, scorer) as batches come: whatever the
row order (a trial's scores written together, in the same scorer order, or any order), the
winners are the rows a plain reading picks: the newest time, ties to the row read last."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest

from bench_pipeline.results.scores import LatestCells

TEXT = pa.dictionary(pa.int32(), pa.string())
SCORERS = ("tests", "judge", "lint")


def _rows(trials: list[int], seed: int, times: range) -> list[dict]:
    """A score row per trial and scorer, trial by trial, the scorers always in one order (as
    a run writes them). Times come from a short range, so that many (trial, scorer) pairs
    tie; groups and weights vary, some null, so the catalog's pick of the newest shows."""
    rng = np.random.default_rng(seed)
    rows = []
    for trial in trials:
        for scorer in SCORERS:
            rows.append(
                {
                    "trial": trial,
                    "scorer": scorer,
                    "time": int(rng.choice(times)),
                    "value": float(rng.random()),
                    "status": str(rng.choice(["scored", "error", "inconclusive"])),
                    "group": None if rng.random() < 0.2 else f"{scorer}-g{rng.integers(3)}",
                    "weight": (
                        math.nan
                        if scorer == "lint" and rng.random() < 0.3
                        else (1.0 if scorer != "judge" else float(rng.integers(1, 3)))
                    ),
                    "cost": math.nan if scorer == "lint" else float(rng.random()),
                }
            )
    return rows


def _batch(rows: list[dict]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict(
        {
            "run_id": pa.array(["run"] * len(rows)).cast(TEXT),
            "scorer": pa.array([r["scorer"] for r in rows]).cast(TEXT),
            "scorer_group": pa.array([r["group"] for r in rows], pa.string()).cast(TEXT),
            "weight": pa.array([r["weight"] for r in rows], pa.float64(), from_pandas=True),
            "status": pa.array([r["status"] for r in rows]).cast(TEXT),
            "value": pa.array([r["value"] for r in rows], pa.float64()),
            "cost_usd": pa.array([r["cost"] for r in rows], pa.float64(), from_pandas=True),
            "scored_at": pa.array([r["time"] for r in rows], pa.int64()).cast(
                pa.timestamp("us", tz="UTC")
            ),
        }
    )


def _read(n_trials: int, batches: list[list[dict]]) -> tuple[dict, list[dict]]:
    cells = LatestCells(n_trials, "run", sum(len(b) for b in batches))
    for rows in batches:
        assert cells.add(_batch(rows), np.array([r["trial"] for r in rows], dtype=np.int32))
    catalog = cells.finish().to_dict("records")
    return {scorer: cells.columns(scorer) for scorer in cells.scorers()}, catalog


def _expected(n_trials: int, batches: list[list[dict]]) -> tuple[dict, list[dict]]:
    """The plain reading: every row in read order, the newest time winning, ties to the
    later row; the catalog's group and weight are those of the newest winner that has one."""
    from bench_pipeline.results.scores import STATUS_CODE

    read = [row for rows in batches for row in rows]
    win: dict[tuple[int, str], tuple[int, int]] = {}
    for pos, row in enumerate(read):
        key = (row["trial"], row["scorer"])
        if key not in win or (row["time"], pos) >= win[key]:
            win[key] = (row["time"], pos)
    found, catalog = {}, []
    for scorer in dict.fromkeys(r["scorer"] for r in read):
        value = np.full(n_trials, np.nan)
        status = np.full(n_trials, -99, dtype=np.int64)
        cost = np.full(n_trials, np.nan)
        winners = []
        for trial in range(n_trials):
            if (trial, scorer) not in win:
                continue
            t, pos = win[(trial, scorer)]
            row = read[pos]
            value[trial], cost[trial] = row["value"], row["cost"]
            status[trial] = STATUS_CODE[row["status"]]
            winners.append((t, pos, row))
        found[scorer] = (value, status, cost)
        winners.sort(key=lambda w: (w[0], w[1]))
        with_group = [w[2] for w in winners if w[2]["group"] is not None]
        with_weight = [w[2] for w in winners if not math.isnan(w[2]["weight"])]
        catalog.append(
            {
                "scorer": scorer,
                "run_id": "run",
                "scorer_group": with_group[-1]["group"] if with_group else None,
                "weight": with_weight[-1]["weight"] if with_weight else math.nan,
            }
        )
    return found, catalog


def _same(n_trials: int, batches: list[list[dict]]) -> None:
    found, catalog = _read(n_trials, batches)
    want, want_catalog = _expected(n_trials, batches)
    assert set(found) == set(want)
    for scorer, (value, status, cost) in want.items():
        got_value, got_status, got_cost = found[scorer]
        np.testing.assert_array_equal(got_value, value, err_msg=scorer)
        seen = status != -99
        np.testing.assert_array_equal(got_status[seen], status[seen], err_msg=scorer)
        if got_cost is None:
            assert np.isnan(cost).all(), scorer
        else:
            np.testing.assert_array_equal(got_cost, cost, err_msg=scorer)
    by_scorer = {row["scorer"]: row for row in want_catalog}
    for row in catalog:
        expected = by_scorer[row["scorer"]]
        assert row["scorer_group"] == expected["scorer_group"], row["scorer"]
        assert row["weight"] == expected["weight"] or (
            math.isnan(row["weight"]) and math.isnan(expected["weight"])
        ), row["scorer"]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_in_the_written_order_keep_the_rows_a_plain_reading_keeps(seed: int) -> None:
    """Trials in order, a trial's scorers together in one order: the first scores, then a
    rescore of every trial whose rows are newer, older or tied (some winners replaced, some
    not), split across batches that cut a trial's rows apart."""
    n = 60
    first = _rows(list(range(n)), seed, range(10, 20))
    again = _rows(list(range(n)), seed + 100, range(12, 22))
    rows = first + again
    _same(n, [rows[:100], rows[100:181], rows[181:]])


@pytest.mark.parametrize("seed", [0, 1])
def test_trials_out_of_order_or_with_gaps_keep_the_same_rows(seed: int) -> None:
    """The scorers repeat in one order but the trials are every other one, or backwards, or
    swapped, or a trial appears twice in one batch."""
    n = 40
    gaps = _rows(list(range(0, n, 2)), seed, range(10, 15))
    backwards = _rows(list(range(n - 1, -1, -1)), seed + 1, range(10, 15))
    twice = _rows([3, 4, 3, 5], seed + 2, range(10, 15))
    # (as many trials as rows, from the first to the last, yet not consecutive)
    swapped = _rows([0, 2, 1, 3], seed + 3, range(10, 15))
    repeated = _rows([0, 1, 0, 3], seed + 4, range(10, 15))
    _same(n, [gaps, backwards, twice, swapped, repeated])


def test_any_row_order_keeps_the_same_rows() -> None:
    """The same rows shuffled (no scorer order, no trial order), in uneven batches."""
    n = 50
    rows = _rows(list(range(n)), 7, range(10, 20)) + _rows(list(range(n)), 8, range(10, 20))
    order = np.random.default_rng(3).permutation(len(rows))
    shuffled = [rows[i] for i in order]
    _same(n, [shuffled[:7], shuffled[7:130], shuffled[130:]])


def test_one_scorer_and_a_batch_of_one_row() -> None:
    rows = [r for r in _rows(list(range(10)), 5, range(10, 12)) if r["scorer"] == "judge"]
    _same(10, [rows[:1], rows[1:]])
