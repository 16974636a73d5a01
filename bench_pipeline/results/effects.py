"""Paired effect sizes with intervals and p-values, clustered by task.

Repetitions of one task are correlated (a hard task is hard for every repetition and every
config), so every interval and test here treats the task as the unit that varies:

- `bootstrap_ci(tasks, values)`: percentile interval of the mean of `values` (one per pair,
  e.g. candidate - baseline overall) from a cluster bootstrap: each of `n_boot` resamples
  draws the tasks with replacement (`numpy.random.default_rng(seed).integers(0, G, (n_boot,
  G))`, deterministic for a seed) and takes the mean over all pairs of the drawn tasks.
- `sign_flip_p(tasks, diffs)`: two-sided paired randomization test of "no difference": under
  the null the two configs' labels are exchangeable within a task, so the per-task sums of the
  differences flip sign independently. Exact (all 2^G sign vectors) for G <= 16 tasks, else a
  seeded Monte Carlo estimate ((1 + hits) / (1 + draws), which keeps it valid). With G tasks the
  smallest attainable p is 2 / 2^G: two tasks can never be significant at 5%, which is the honest
  answer a bootstrap p-value would not give.
- `mcnemar_p(b, c)`: McNemar's exact test for pass/fail pairs, b = candidate-only passes,
  c = baseline-only passes: two-sided binomial test of b out of b + c at 1/2 (what SciPy's
  `binomtest` gives, summed here without importing SciPy). It treats pairs as independent; the
  sign test over tasks is its clustered twin.

`paired_effects(...)` -> the fields a paired comparison carries (all null when there are no
pairs; intervals null with fewer than two tasks): `overall_pairs`, `overall_delta` (mean of
candidate - baseline overall over pairs both scored), `overall_delta_ci_low/high`,
`overall_delta_p` (sign-flip), `pass_rate_delta`, `pass_rate_delta_ci_low/high`, `mcnemar_p`,
`cost_delta_ci_low/high_usd`, `duration_delta_ci_low/high_seconds` (over the pairs the cost and
duration deltas use).
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import NamedTuple

import numpy as np

ALPHA = 0.05
N_BOOT = 2000
SEED = 0
EXACT_MAX_TASKS = 16
N_FLIPS = 20000


class Effect(NamedTuple):
    n: int  # pairs
    tasks: int
    delta: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None


def task_sums(tasks: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-task sum and count of the non-null `values` (tasks: any hashable labels or codes)."""
    values = np.asarray(values, dtype=float)
    keep = ~np.isnan(values)
    tasks = np.asarray(tasks)
    if not keep.all():  # (usually every value is known: no copies)
        tasks, values = tasks[keep], values[keep]
    if (
        tasks.dtype.kind in "iu"
        and len(tasks)
        and tasks.min() >= 0
        and tasks.max() <= 8 * len(tasks) + 1024
    ):
        # integer task codes: bincount, then drop the absent codes (the same sums in the same
        # order as np.unique's ranks, without the sort)
        n_codes = np.bincount(tasks)
        present = n_codes > 0
        sums = np.bincount(tasks, weights=values)[present]
        return sums, n_codes[present].astype(float)
    _, codes = np.unique(tasks, return_inverse=True)
    codes = codes.reshape(-1)
    sums = np.bincount(codes, weights=values)
    counts = np.bincount(codes).astype(float)
    return sums, counts


# Few entries: one per task count of the comparisons in hand (a long-lived process, such as
# `bench serve` or the explorer, must not keep a matrix per suite it ever compared).
@lru_cache(maxsize=2)
def _draw_counts(g: int, n_boot: int, seed: int) -> np.ndarray:
    """How many times each of the g tasks is drawn in each bootstrap resample: the same for
    every comparison with g tasks (same seed)."""
    idx = np.random.default_rng(seed).integers(0, g, size=(n_boot, g))
    flat = (idx + g * np.arange(n_boot)[:, None]).ravel()
    counts = np.bincount(flat, minlength=n_boot * g).reshape(n_boot, g).astype(float)
    counts.setflags(write=False)
    return counts


@lru_cache(maxsize=2)
def _flips(g: int, n_flips: int, seed: int) -> np.ndarray:
    """The sign-flip test's random flips (as 0/1 floats), the same for every test of g tasks."""
    neg = (np.random.default_rng(seed).random((n_flips, g)) < 0.5).astype(float)
    neg.setflags(write=False)
    return neg


def bootstrap_from_sums(
    sums: np.ndarray,
    counts: np.ndarray,
    *,
    level: float = 0.95,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> tuple[float | None, float | None]:
    g = len(sums)
    if g < 2:
        return None, None
    draws = _draw_counts(g, n_boot, seed)
    # (how often each task is drawn, times its sums: the resampled totals as a product,
    # equal to summing the drawn tasks' sums but for rounding, without gathering them)
    means = (draws @ sums) / (draws @ counts)
    tail = (1 - level) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def bootstrap_ci(
    tasks: np.ndarray,
    values: np.ndarray,
    *,
    level: float = 0.95,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> tuple[float | None, float | None]:
    """Cluster-bootstrap percentile interval of the mean of `values` (see module doc)."""
    sums, counts = task_sums(tasks, values)
    return bootstrap_from_sums(sums, counts, level=level, n_boot=n_boot, seed=seed)


@lru_cache(maxsize=EXACT_MAX_TASKS + 1)
def _all_signs(g: int) -> np.ndarray:
    bits = (np.arange(2**g)[:, None] >> np.arange(g)[None, :]) & 1
    return 1.0 - 2.0 * bits


def sign_flip_from_sums(sums: np.ndarray, *, n_flips: int = N_FLIPS, seed: int = SEED) -> float:
    g = len(sums)
    if g == 0:
        return 1.0
    observed = abs(float(sums.sum()))
    # Relative tolerance: a flipped sum equal to the observed one must count as "as extreme".
    tol = 1e-9 * max(1.0, float(np.abs(sums).sum()))
    if g <= EXACT_MAX_TASKS:
        flipped = np.abs(_all_signs(g) @ sums)
        return float(np.mean(flipped >= observed - tol))
    # Flipping the tasks in `neg` turns the total S into S - 2 * sum(neg * sums).
    flipped = np.abs(float(sums.sum()) - 2.0 * (_flips(g, n_flips, seed) @ sums))
    hits = int((flipped >= observed - tol).sum())
    return (1 + hits) / (1 + n_flips)


def sign_flip_p(
    tasks: np.ndarray, diffs: np.ndarray, *, n_flips: int = N_FLIPS, seed: int = SEED
) -> float:
    """Two-sided paired sign-flip randomization p-value over tasks (see module doc)."""
    sums, _ = task_sums(tasks, diffs)
    return sign_flip_from_sums(sums, n_flips=n_flips, seed=seed)


def mcnemar_p(candidate_only: int, baseline_only: int) -> float:
    """McNemar's exact test: two-sided binomial p of b in b + c discordant pairs at 1/2."""
    n = int(candidate_only) + int(baseline_only)
    if n == 0:
        return 1.0
    return binom_half_two_sided(int(candidate_only), n)


def binom_half_two_sided(k: int, n: int) -> float:
    """Two-sided exact binomial p-value of k successes in n at probability 1/2, as SciPy's
    `binomtest(k, n, 0.5).pvalue` (the distribution is symmetric: twice the smaller tail,
    capped at 1). The tail is summed from its largest term C(n, m) / 2^n (from lgamma) down by
    the ratio i / (n - i + 1) until the terms no longer change the sum: no SciPy import (1+ s),
    agreement with it to < 1e-9 up to n = 10^6."""
    m = min(k, n - k)
    if 2 * m == n:
        return 1.0
    log_top = math.lgamma(n + 1) - math.lgamma(m + 1) - math.lgamma(n - m + 1) - n * math.log(2)
    term, total, i = 1.0, 0.0, m
    while i >= 0:
        total += term
        if term < 1e-17 * total:
            break
        term *= i / (n - i + 1)
        i -= 1
    return min(1.0, 2.0 * math.exp(log_top) * total)


def effect(
    tasks: np.ndarray,
    diffs: np.ndarray,
    *,
    level: float = 0.95,
    n_boot: int = N_BOOT,
    seed: int = SEED,
    with_p: bool = True,
) -> Effect:
    """Mean paired difference, its cluster-bootstrap interval and sign-flip p over tasks."""
    sums, counts = task_sums(tasks, diffs)
    n = int(counts.sum())
    if n == 0:
        return Effect(0, 0, None, None, None, None)
    low, high = bootstrap_from_sums(sums, counts, level=level, n_boot=n_boot, seed=seed)
    p = sign_flip_from_sums(sums, seed=seed) if with_p else None
    return Effect(n, len(sums), float(sums.sum() / n), low, high, p)


def _none_if_nan(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


def paired_effects(
    tasks: np.ndarray,
    candidate_overall: np.ndarray,
    baseline_overall: np.ndarray,
    candidate_pass: np.ndarray,
    baseline_pass: np.ndarray,
    cost_tasks: np.ndarray,
    cost_delta: np.ndarray,
    duration_tasks: np.ndarray,
    duration_delta: np.ndarray,
) -> dict[str, float | int | None]:
    """The effect-size fields of a paired comparison (see module doc). `tasks` labels the
    counted pairs; candidate/baseline_pass are booleans of those pairs."""
    tasks = np.asarray(tasks)
    diff = np.asarray(candidate_overall, dtype=float) - np.asarray(baseline_overall, dtype=float)
    overall = effect(tasks, diff)
    cp = np.asarray(candidate_pass, dtype=bool)
    bp = np.asarray(baseline_pass, dtype=bool)
    pass_eff = effect(tasks, cp.astype(float) - bp.astype(float), with_p=False)
    cost = effect(np.asarray(cost_tasks), np.asarray(cost_delta, dtype=float), with_p=False)
    dur = effect(np.asarray(duration_tasks), np.asarray(duration_delta, dtype=float), with_p=False)
    return {
        "overall_pairs": overall.n,
        "overall_delta": overall.delta,
        "overall_delta_ci_low": overall.ci_low,
        "overall_delta_ci_high": overall.ci_high,
        "overall_delta_p": overall.p_value,
        "pass_rate_delta": pass_eff.delta,
        "pass_rate_delta_ci_low": pass_eff.ci_low,
        "pass_rate_delta_ci_high": pass_eff.ci_high,
        "mcnemar_p": mcnemar_p(int((cp & ~bp).sum()), int((~cp & bp).sum())) if len(cp) else None,
        "cost_delta_ci_low_usd": _none_if_nan(cost.ci_low),
        "cost_delta_ci_high_usd": _none_if_nan(cost.ci_high),
        "duration_delta_ci_low_seconds": _none_if_nan(dur.ci_low),
        "duration_delta_ci_high_seconds": _none_if_nan(dur.ci_high),
    }
