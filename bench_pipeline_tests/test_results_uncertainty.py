"""Clustered CIs, naive CIs and pass@k / pass^k against computations written out by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from bench_pipeline.results import (
    clustered_ci_by,
    clustered_mean_ci,
    naive_mean_ci,
    pass_at_k,
    pass_hat_k,
    pass_k_by,
)

Z = 1.959963984540054


def by_hand_clustered(values, clusters):
    n = len(values)
    mean = sum(values) / n
    sums = {}
    for v, g in zip(values, clusters, strict=True):
        sums[g] = sums.get(g, 0.0) + (v - mean)
    big_g = len(sums)
    total = 0.0
    for s in sums.values():
        total += s * s
    se = math.sqrt(big_g / (big_g - 1) * total) / n
    return mean, se


def by_hand_naive(values):
    n = len(values)
    mean = sum(values) / n
    var = 0.0
    for v in values:
        var += (v - mean) ** 2
    var /= n - 1
    return mean, math.sqrt(var / n)


def test_clustered_wider_than_naive_when_repetitions_agree():
    # 5 tasks x 3 repetitions; every repetition of a task has the same outcome
    per_task = {"a": 1, "b": 0, "c": 1, "d": 0, "e": 1}
    values, clusters = [], []
    for task, v in per_task.items():
        for _ in range(3):
            values.append(float(v))
            clusters.append(task)
    mean, se = by_hand_clustered(values, clusters)
    got = clustered_mean_ci(values, clusters)
    assert got.mean == pytest.approx(0.6)
    assert got.se == pytest.approx(se)
    assert got.ci_low == pytest.approx(max(0.0, mean - Z * se))
    assert got.ci_high == pytest.approx(min(1.0, mean + Z * se))
    assert (got.n, got.clusters) == (15, 5)
    n_mean, n_se = by_hand_naive(values)
    naive = naive_mean_ci(values)
    assert naive.se == pytest.approx(n_se)
    assert got.se > naive.se
    assert got.ci_high - got.ci_low > naive.ci_high - naive.ci_low


def test_clustered_by_groups_and_unclipped_values():
    values = [0.2, 0.4, 0.9, 0.7, 0.1, 0.3, 0.5]
    clusters = ["x", "x", "y", "y", "z", "z", "z"]
    frame = pd.DataFrame(
        {"cfg": ["A"] * 7 + ["B"] * 2, "task": clusters + ["x", "y"], "v": values + [1.0, None]}
    )
    out = clustered_ci_by(frame, "v", "task", ["cfg"]).set_index("cfg")
    mean, se = by_hand_clustered(values, clusters)
    assert out.loc["A", "mean"] == pytest.approx(mean)
    assert out.loc["A", "se"] == pytest.approx(se)
    assert out.loc["A", "ci_low"] == pytest.approx(mean - Z * se)
    # B: one value (null dropped), one cluster: the clustered SE is undefined
    assert out.loc["B", "n"] == 1 and math.isnan(out.loc["B", "se"])


def test_pass_at_k_by_hand():
    # n = 5 samples, c = 2 passes, k = 2
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_hat_k(5, 2, 2) == pytest.approx(1 / 10)  # C(2,2)/C(5,2)
    assert pass_at_k(2, 1, 2) == 1.0 and pass_hat_k(2, 1, 2) == 0.0
    assert pass_at_k(3, 0, 2) == 0.0
    assert math.isnan(pass_at_k(1, 1, 2))  # fewer samples than k


def test_pass_k_averaged_over_tasks():
    frame = pd.DataFrame(
        {
            "cfg": ["A"] * 8,
            "task": ["t1"] * 5 + ["t2"] * 3,
            "passed": [1, 1, 0, 0, 0] + [1, 1, 1],
        }
    )
    out = pass_k_by(frame, "passed", "task", ["cfg"], k=2).iloc[0]
    # t1: n=5 c=2 -> pass@2 0.7, pass^2 0.1; t2: n=3 c=3 -> 1, 1
    assert out["pass_at_k"] == pytest.approx((0.7 + 1.0) / 2)
    assert out["pass_hat_k"] == pytest.approx((0.1 + 1.0) / 2)
    assert out["pass_k_tasks"] == 2 and out["k"] == 2


@pytest.mark.parametrize("reps", [4, 5000])  # (few repetitions: bins; very many: the sort)
def test_pass_k_from_cells_equals_the_per_task_computation(reps: int) -> None:
    # the config table's vectorised pass@k / pass^k from per-(config, task) counts, against
    # pass_k_by's groupby over the trials themselves
    from bench_pipeline.results.uncertainty import cells_pass_k

    rng = np.random.default_rng(3)
    rows = []
    for config in range(3):
        for task in range(40):
            n = int(rng.integers(0, 4)) if reps < 10 else int(rng.integers(reps - 3, reps + 1))
            for _ in range(n):
                rows.append({"cfg": config, "task": task, "passed": float(rng.random() < 0.6)})
    frame = pd.DataFrame(rows)
    k = 2
    expected = pass_k_by(frame, "passed", "task", ["cfg"], k).set_index("cfg")
    cells = frame.groupby(["cfg", "task"])["passed"].agg(["count", "sum"]).reset_index()
    tasks, at_k, hat_k = cells_pass_k(
        cells["cfg"].to_numpy(),
        cells["count"].to_numpy(dtype=float),
        cells["sum"].to_numpy(dtype=float),
        3,
        k,
    )
    assert list(tasks) == list(expected["pass_k_tasks"])
    assert list(at_k) == pytest.approx(list(expected["pass_at_k"]), rel=1e-12)
    assert list(hat_k) == pytest.approx(list(expected["pass_hat_k"]), rel=1e-12)
