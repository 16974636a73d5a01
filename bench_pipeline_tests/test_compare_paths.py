"""compare_all's fast path (every config's trials placed by (task, repetition) code) gives what
the general route gives (`paired_comparison`: a merge on task and repetition) for every shape
of keys: dense, sparse (repetition numbers spread out: the codes are ranked), a table of every
config's slots too big to make (one config's at a time), and a config whose trials repeat a
(task, repetition) (that config takes the general route)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bench_pipeline.results import compare
from bench_pipeline.results.compare import compare_all, paired_comparison
from bench_pipeline.results.scores import trial_overall
from bench_pipeline_tests.perf_scripts import perf_analysis


def _per_trial(tasks: int = 30, reps: int = 3) -> pd.DataFrame:
    trials, scores = perf_analysis().generate(tasks, 3, reps, seed=5)
    return trial_overall(trials, scores)


def _general(pt: pd.DataFrame) -> pd.DataFrame:
    configs = [str(c) for c in pd.unique(pt["config_id"])]
    base = str(pt.loc[pt["is_baseline"].astype(bool), "config_id"].iloc[0])
    rows = [paired_comparison(pt, pt, c, base, per_trial=pt) for c in configs if c != base]
    return pd.DataFrame(rows)


def _same(a: pd.DataFrame, b: pd.DataFrame) -> None:
    assert list(a.columns) == list(b.columns) and len(a) == len(b)
    for col in a.columns:
        for x, y in zip(a[col].tolist(), b[col].tolist(), strict=True):
            if isinstance(x, float) and isinstance(y, float):
                assert (math.isnan(x) and math.isnan(y)) or abs(x - y) <= 1e-9, col
            else:
                assert x == y, (col, x, y)


def _sparse(pt: pd.DataFrame) -> pd.DataFrame:
    """Repetition numbers that differ by task: far more (task, repetition) codes than trials."""
    task = pt["task_id"].astype(str).str.slice(5).astype(int)
    return pt.assign(repetition=(pt["repetition"] + 1000 * task).astype(np.int64))


def _repeated(pt: pd.DataFrame) -> pd.DataFrame:
    """cfg-2's second repetition renumbered as its first: two trials on one key."""
    rep = pt["repetition"].where(~((pt["config_id"] == "cfg-2") & (pt["repetition"] == 2)), 1)
    return pt.assign(repetition=rep)


@pytest.mark.parametrize("shape", ["dense", "sparse", "repeated"])
@pytest.mark.parametrize("one_at_a_time", [False, True])
def test_fast_pairs_equal_the_general_route(
    shape: str, one_at_a_time: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    pt = {"dense": lambda p: p, "sparse": _sparse, "repeated": _repeated}[shape](_per_trial())
    if one_at_a_time:  # as when every config's table would be too big to hold
        monkeypatch.setattr(compare, "_SLOTS_LIMIT", 0)
    fast = compare._FastPairs(pt)
    got = compare_all(pt, pt, per_trial=pt)
    _same(got, _general(pt))
    assert len(got) == 2 and (got["pairs_matched"] > 0).all()
    assert fast.counted("cfg-1", "cfg-0") is not None
    assert (fast._table is None) == one_at_a_time
    if shape == "sparse" and not one_at_a_time:
        assert fast.n_keys <= len(pt)  # ranked, not (tasks + 1) x (repetitions + 1)
    if shape == "repeated":
        assert fast.counted("cfg-2", "cfg-0") is None  # the general route's to pair
