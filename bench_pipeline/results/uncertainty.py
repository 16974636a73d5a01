"""Uncertainty of means over trials whose repetitions of one task are correlated.

Repetitions of the same task are not independent draws (a hard task fails for every config
repetition alike), so standard errors are clustered by task (CR1):

    SE = sqrt(G/(G-1) * sum_g (sum_{i in g} (y_i - ybar))^2) / n,   CI = ybar +- 1.96 * SE

clipped to [0, 1]; G = number of clusters (tasks), n = number of values. With fewer than two
clusters the clustered SE is undefined and the CI is null.

Output of `clustered_ci_by(frame, value, cluster, by)`: the `by` columns, then
`n` (values used, nulls dropped), `clusters` (G), `mean`, `se`, `ci_low`, `ci_high`.

Output of `pass_k_by(frame, passed, task, by, k)`: the `by` columns, then `k`,
`pass_k_tasks` (tasks with at least k scored repetitions, the ones averaged), `pass_at_k`
(unbiased: 1 - C(n-c, k) / C(n, k), averaged over tasks) and `pass_hat_k`
(C(c, k) / C(n, k): all k repetitions pass, averaged over tasks).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import lru_cache
from typing import NamedTuple

import numpy as np
import pandas as pd

from ._common import unique_inverse

Z95 = 1.959963984540054


class MeanCI(NamedTuple):
    mean: float
    se: float
    ci_low: float
    ci_high: float
    n: int
    clusters: int


def _clip(x: float, clip: tuple[float, float] | None) -> float:
    if clip is None or math.isnan(x):
        return x
    return min(max(x, clip[0]), clip[1])


def clustered_mean_ci(
    values: Sequence[float] | np.ndarray | pd.Series,
    clusters: Sequence[object] | np.ndarray | pd.Series,
    z: float = Z95,
    clip: tuple[float, float] | None = (0.0, 1.0),
) -> MeanCI:
    """Mean of `values` with a CR1 cluster-robust CI (clusters = task ids). Nulls are dropped."""
    frame = pd.DataFrame({"v": np.asarray(values, dtype=float), "g": np.asarray(clusters)})
    out = clustered_ci_by(frame, "v", "g", [], z=z, clip=clip)
    row = out.iloc[0]
    return MeanCI(
        float(row["mean"]),
        float(row["se"]),
        float(row["ci_low"]),
        float(row["ci_high"]),
        int(row["n"]),
        int(row["clusters"]),
    )


def naive_mean_ci(
    values: Sequence[float] | np.ndarray | pd.Series,
    z: float = Z95,
    clip: tuple[float, float] | None = (0.0, 1.0),
) -> MeanCI:
    """Mean with the textbook i.i.d. CI: SE = sd(y, ddof=1) / sqrt(n) (for comparison only)."""
    y = np.asarray(values, dtype=float)
    y = y[~np.isnan(y)]
    n = len(y)
    if n == 0:
        return MeanCI(math.nan, math.nan, math.nan, math.nan, 0, 0)
    mean = float(y.mean())
    se = float(y.std(ddof=1) / math.sqrt(n)) if n > 1 else math.nan
    return MeanCI(mean, se, _clip(mean - z * se, clip), _clip(mean + z * se, clip), n, n)


def clustered_ci_by(
    frame: pd.DataFrame,
    value: str,
    cluster: str,
    by: Sequence[str],
    z: float = Z95,
    clip: tuple[float, float] | None = (0.0, 1.0),
) -> pd.DataFrame:
    """CR1 clustered mean and CI of `value` per `by` group, vectorized (see module doc)."""
    by = list(by)
    cols = [*by, cluster, value]
    d = frame.loc[frame[value].notna(), cols]
    if not by:
        d = d.assign(_all=0)
        by_eff = ["_all"]
    else:
        by_eff = by
    if len(d) == 0:
        empty = {c: pd.Series(dtype=object) for c in by}
        empty.update({k: pd.Series(dtype=float) for k in ("n", "clusters", "mean", "se")})
        empty.update({"ci_low": pd.Series(dtype=float), "ci_high": pd.Series(dtype=float)})
        if not by:
            return pd.DataFrame(
                [
                    dict.fromkeys(["n", "clusters"], 0)
                    | dict.fromkeys(["mean", "se", "ci_low", "ci_high"], math.nan)
                ]
            )
        return pd.DataFrame(empty)
    y = d[value].astype(float)
    cell = (
        d.assign(_y=y)
        .groupby([*by_eff, cluster], observed=True, sort=False)["_y"]
        .agg(["sum", "count"])
        .reset_index()
    )
    top = (
        cell.groupby(by_eff, observed=True, sort=False)
        .agg(S=("sum", "sum"), n=("count", "sum"), clusters=("count", "size"))
        .reset_index()
    )
    top["mean"] = top["S"] / top["n"]
    cell = cell.merge(top[[*by_eff, "mean"]], on=by_eff, how="left")
    cell["r2"] = (cell["sum"] - cell["count"] * cell["mean"]) ** 2
    ss = cell.groupby(by_eff, observed=True, sort=False)["r2"].sum().rename("ss").reset_index()
    top = top.merge(ss, on=by_eff, how="left")
    g = top["clusters"].astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(g > 1, g / (g - 1), np.nan)
        top["se"] = np.sqrt(factor * top["ss"]) / top["n"]
    low = top["mean"] - z * top["se"]
    high = top["mean"] + z * top["se"]
    if clip is not None:
        low, high = low.clip(*clip), high.clip(*clip)
    top["ci_low"], top["ci_high"] = low, high
    out = top[[*by_eff, "n", "clusters", "mean", "se", "ci_low", "ci_high"]]
    if not by:
        out = out.drop(columns="_all")
    return out.reset_index(drop=True)


@lru_cache(maxsize=65536)
def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c passes: 1 - C(n-c, k) / C(n, k)."""
    if k <= 0 or n < k:
        return math.nan
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


@lru_cache(maxsize=65536)
def pass_hat_k(n: int, c: int, k: int) -> float:
    """pass^k: probability that k draws without replacement all pass: C(c, k) / C(n, k)."""
    if k <= 0 or n < k:
        return math.nan
    return math.comb(c, k) / math.comb(n, k)


def pass_k_by(
    frame: pd.DataFrame, passed: str, task: str, by: Sequence[str], k: int
) -> pd.DataFrame:
    """pass@k and pass^k per `by` group, averaged over tasks with >= k scored repetitions."""
    by = list(by)
    d = frame.loc[frame[passed].notna(), [*by, task, passed]]
    d = d.assign(_p=d[passed].astype(float))
    if not by:
        d = d.assign(_all=0)
    by_eff = by or ["_all"]
    cell = d.groupby([*by_eff, task], observed=True, sort=False)["_p"].agg(["count", "sum"])
    cell = cell.reset_index()
    triples = pd.DataFrame({"n": cell["count"].astype(int), "c": cell["sum"].round().astype(int)})
    uniq = triples.drop_duplicates()
    at = {(n, c): pass_at_k(n, c, k) for n, c in zip(uniq["n"], uniq["c"], strict=True)}
    hat = {(n, c): pass_hat_k(n, c, k) for n, c in zip(uniq["n"], uniq["c"], strict=True)}
    keys = list(zip(triples["n"], triples["c"], strict=True))
    cell["pass_at_k"] = [at[key] for key in keys]
    cell["pass_hat_k"] = [hat[key] for key in keys]
    out = (
        cell.groupby(by_eff, observed=True, sort=False)
        .agg(
            pass_k_tasks=("pass_at_k", "count"),
            pass_at_k=("pass_at_k", "mean"),
            pass_hat_k=("pass_hat_k", "mean"),
        )
        .reset_index()
    )
    out.insert(len(by_eff), "k", k)
    if not by:
        out = out.drop(columns="_all")
    return out


def cells_clustered_se(
    group: np.ndarray, sums: np.ndarray, counts: np.ndarray, n_groups: int
) -> tuple[np.ndarray, np.ndarray]:
    """(mean, CR1 SE) per group from per-(group, cluster) sums and counts (vectorized form of
    clustered_ci_by: one entry per cluster of a group; empty clusters do not count)."""
    used = counts > 0
    g, s, c = group[used], sums[used], counts[used]
    total = np.bincount(g, weights=s, minlength=n_groups)
    n = np.bincount(g, weights=c, minlength=n_groups)
    clusters = np.bincount(g, minlength=n_groups).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = np.where(n > 0, total / np.where(n > 0, n, 1), np.nan)
        ss = np.bincount(g, weights=(s - c * mean[g]) ** 2, minlength=n_groups)
        factor = np.where(clusters > 1, clusters / (clusters - 1), np.nan)
        se = np.sqrt(factor * ss) / n
    return mean, se


def cells_pass_k(
    group: np.ndarray, n_cell: np.ndarray, c_cell: np.ndarray, n_groups: int, k: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(tasks averaged, pass@k, pass^k) per group from per-(group, task) scored counts and
    passes (vectorized form of pass_k_by)."""
    used = n_cell > 0
    g = group[used]
    n = np.rint(n_cell[used]).astype(np.int64)
    c = np.rint(c_cell[used]).astype(np.int64)
    # (each distinct (scored, passed) pair computed once and spread by index: a lookup per
    # cell in Python took 0.4 s of a table at 25,000 tasks x 8 configs)
    pairs, which = _distinct_pairs(n, c)
    at = np.array([pass_at_k(int(a), int(b), k) for a, b in pairs.T], dtype=float)[which]
    hat = np.array([pass_hat_k(int(a), int(b), k) for a, b in pairs.T], dtype=float)[which]
    ok = ~np.isnan(at)
    tasks = np.bincount(g[ok], minlength=n_groups)
    with np.errstate(divide="ignore", invalid="ignore"):
        at_mean = np.bincount(g[ok], weights=at[ok], minlength=n_groups) / tasks
        hat_mean = np.bincount(g[ok], weights=hat[ok], minlength=n_groups) / tasks
    return tasks, np.where(tasks > 0, at_mean, np.nan), np.where(tasks > 0, hat_mean, np.nan)


def _distinct_pairs(n: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (n, c) pairs of counts (>= 0; 2 x P, sorted by n then c) and each element's
    pair index. Counts of repetitions are small: the pairs are `unique_inverse` of
    n * (max c + 1) + c, a bincount rather than a sort (np.unique over the stacked pairs sorted
    200,000 cells in 76 ms a call)."""
    if len(n) == 0:
        return np.zeros((2, 0), np.int64), np.zeros(0, np.int64)
    width = int(c.max()) + 1
    present, which = unique_inverse(n * width + c)
    return np.stack([present // width, present % width]), which.reshape(-1)
