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

Memory is bounded whatever the task count: a resampling matrix (resamples x tasks) of at
most `MATRIX_ENTRIES` entries is drawn in one call and kept for the next interval of as many
tasks; a bigger one (a run of thousands of tasks) is drawn a block of resamples at a time, each
block applied at once to every interval and test of that task count (`bootstrap_intervals`,
`sign_flip_ps`). Those sign flips are bits of the seeded generator's random bytes (a fair coin
each, as a double below 0.5 is, at a 64th of the draws: `_flip_blocks`), whatever the block
size; the bootstrap's task draws come from the same seeded generator a block at a time, which
is not the one-call stream (numpy buffers bounded integers within a call). Either way a result
over more tasks than `MATRIX_ENTRIES / N_FLIPS` (flips) or `MATRIX_ENTRIES / N_BOOT`
(bootstrap) is as deterministic as below it, but not the one-call draws.

Past `ASYMPTOTIC_TASKS` tasks both are computed in closed form, not by resampling (at 25,000
tasks x 8 configs the resampling took 4.7 s of a paired comparison whose other work takes
0.1 s), where the data let the closed form stand for them:

- the interval is the one the bootstrap estimates: the resampled mean r* = sum(w s) / sum(w c)
  (w: how often each task is drawn) linearised around r = sum(s) / sum(c), i.e. the sum over
  tasks of w_g d_g / sum(c) with d_g = s_g - r c_g, whose resampling variance is
  sum(d^2) / sum(c)^2 and skewness gamma = sum(d^3) / sum(d^2)^1.5; its quantiles by the
  Cornish-Fisher expansion, q(a) = r + se (z_a + gamma (z_a^2 - 1) / 6). Measured against
  2,000 resamples from 100 to 5,000 tasks (binary, half-point and lognormal data), the endpoints
  differ from the resampled ones by no more than two bootstraps of other seeds differ from
  each other (about 0.05-0.2 standard errors);
- the sign-flip p is the normal approximation of the randomization distribution, which is
  exactly symmetric with variance sum(s^2): p = P(|Z| >= (|S| - h) / sqrt(sum(s^2))), h the
  lattice span of the per-task sums when they are multiples of one (a continuity correction:
  the flipped totals lie 2h apart), 0 otherwise. Measured against 20,000 flips it is within
  their Monte Carlo error (about 0.005 at p = 0.5).

Neither holds when a few tasks carry most of the variance; then the resampling runs as below:
the closed form is used only while sum(d^4) / sum(d^2)^2 <= `MAX_TASK_SHARE_4` (1/G for
equal tasks; 1 for one task) and, for an interval, |gamma| <= `MAX_SKEW`.

`paired_effects(...)` -> the fields a paired comparison carries (all null when there are no
pairs; intervals null with fewer than two tasks): `overall_pairs`, `overall_delta` (mean of
candidate - baseline overall over pairs both scored), `overall_delta_ci_low/high`,
`overall_delta_p` (sign-flip), `pass_rate_delta`, `pass_rate_delta_ci_low/high`, `mcnemar_p`,
`cost_delta_ci_low/high_usd`, `duration_delta_ci_low/high_seconds` (over the pairs the cost and
duration deltas use).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from functools import lru_cache
from statistics import NormalDist
from typing import NamedTuple

import numpy as np

ALPHA = 0.05
N_BOOT = 2000
SEED = 0
EXACT_MAX_TASKS = 16
N_FLIPS = 20000
# The most entries of a resampling matrix held at once (float64: 32 MiB). At 25,000 tasks the
# sign flips alone were 20,000 x 25,000 doubles (4 GiB) and a run's comparisons peaked at 9.5 GiB.
MATRIX_ENTRIES = 2**22
# From this many tasks on, intervals and sign-flip tests are computed in closed form (module
# doc): at 1,000 tasks the resampling costs ~0.2 s a run, and the closed form is within the
# resampling's own Monte Carlo error from a few hundred tasks on.
ASYMPTOTIC_TASKS = 1000
# The closed form stands for the resampling only where no few tasks dominate (module doc).
MAX_TASK_SHARE_4 = 0.05
MAX_SKEW = 0.5


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
    return bootstrap_intervals([(sums, counts)], level=level, n_boot=n_boot, seed=seed)[0]


def bootstrap_intervals(
    jobs: Sequence[tuple[np.ndarray, np.ndarray]],
    *,
    level: float = 0.95,
    n_boot: int = N_BOOT,
    seed: int = SEED,
) -> list[tuple[float | None, float | None]]:
    """`bootstrap_from_sums` of each (per-task sums, per-task counts): the intervals over the
    same number of tasks share their resamples, drawn once (see module doc)."""
    out: list[tuple[float | None, float | None]] = [(None, None)] * len(jobs)
    tail = (1 - level) / 2
    for g, members in _by_task_count(len(sums) for sums, _ in jobs).items():
        if g < 2:
            continue
        if g >= ASYMPTOTIC_TASKS:
            members = _closed_forms(
                members, out, lambda i: closed_form_interval(*jobs[i], level=level)
            )
            if not members:
                continue
        sums = np.column_stack([jobs[i][0] for i in members])
        counts = np.column_stack([jobs[i][1] for i in members])
        means = np.empty((n_boot, len(members)))
        # (how often each task is drawn, times its sums: the resampled totals as a product,
        # equal to summing the drawn tasks' sums but for rounding, without gathering them)
        for start, block in _count_blocks(g, n_boot, seed):
            means[start : start + len(block)] = (block @ sums) / (block @ counts)
        low, high = np.quantile(means, [tail, 1 - tail], axis=0)
        for j, i in enumerate(members):
            out[i] = (float(low[j]), float(high[j]))
    return out


def _closed_forms(
    members: list[int], out: list, closed: Callable[[int], object | None]
) -> list[int]:
    """`out[i] = closed(i)` for the members whose closed form stands; the others (None: a few
    tasks dominate), which must be resampled."""
    resampled = []
    for i in members:
        value = closed(i)
        if value is None:
            resampled.append(i)
        else:
            out[i] = value
    return resampled


def _few_tasks_dominate(squares: np.ndarray, total: float) -> bool:
    """Whether a few tasks carry most of the variance: sum(x^4) / sum(x^2)^2 above
    MAX_TASK_SHARE_4, given the squares x^2 and their sum."""
    return float((squares * squares).sum()) / (total * total) > MAX_TASK_SHARE_4


def closed_form_interval(
    sums: np.ndarray, counts: np.ndarray, *, level: float = 0.95
) -> tuple[float, float] | None:
    """The cluster bootstrap's percentile interval of sum(sums) / sum(counts) in closed form
    (module doc), or None where a few tasks dominate and the resampling must run."""
    sums = np.asarray(sums, dtype=float)
    counts = np.asarray(counts, dtype=float)
    n = float(counts.sum())
    ratio = float(sums.sum()) / n
    d = sums - ratio * counts
    d2 = d * d
    var = float(d2.sum())
    if var == 0.0:  # every task at the same ratio: every resample gives it
        return ratio, ratio
    if _few_tasks_dominate(d2, var):
        return None
    skew = float((d2 * d).sum()) / var**1.5
    if abs(skew) > MAX_SKEW:
        return None
    se = math.sqrt(var) / n
    tail = (1 - level) / 2
    low, high = (NormalDist().inv_cdf(q) for q in (tail, 1 - tail))
    return (
        ratio + se * (low + skew * (low * low - 1) / 6),
        ratio + se * (high + skew * (high * high - 1) / 6),
    )


def closed_form_sign_flip_p(sums: np.ndarray) -> float | None:
    """The sign-flip test's p-value by the normal approximation of its randomization
    distribution, with a continuity correction for lattice sums (module doc); None where a few
    tasks dominate and the flips must be drawn."""
    sums = np.asarray(sums, dtype=float)
    s2 = sums * sums
    var = float(s2.sum())
    if var == 0.0:  # every flip gives the observed total (0): p = 1, as the flips count it
        return 1.0
    if _few_tasks_dominate(s2, var):
        return None
    x = max(abs(float(sums.sum())) - lattice_span(sums), 0.0) / math.sqrt(var)
    return min(1.0, math.erfc(x / math.sqrt(2.0)))


def lattice_span(values: np.ndarray, max_denominator: int = 100) -> float:
    """The largest h of which every value is an integer multiple (1e-9 relative), for spans
    1/k with k <= max_denominator (per-task sums of pass/fail or half-point scores: 1, 0.5);
    0.0 when there is none (continuous values, e.g. a judge's weighted scores)."""
    nonzero = np.abs(np.asarray(values, dtype=float))
    nonzero = nonzero[nonzero > 0]
    if len(nonzero) == 0:
        return 0.0
    tolerance = 1e-9 * max(1.0, float(nonzero.max()))
    for k in range(1, max_denominator + 1):
        scaled = nonzero * k
        whole = np.rint(scaled)
        if float(np.abs(scaled - whole).max()) <= tolerance * k:
            return float(np.gcd.reduce(whole.astype(np.int64))) / k
    return 0.0


def _by_task_count(sizes: Iterable[int]) -> dict[int, list[int]]:
    groups: dict[int, list[int]] = {}
    for i, g in enumerate(sizes):
        groups.setdefault(g, []).append(i)
    return groups


def _rows_per_block(g: int) -> int:
    return max(1, MATRIX_ENTRIES // g)


def _count_blocks(g: int, n_boot: int, seed: int) -> Iterator[tuple[int, np.ndarray]]:
    """The bootstrap's draw counts as (first row, block): `_draw_counts` in one block up to
    MATRIX_ENTRIES, else `_draw_count_blocks`."""
    if n_boot * g <= MATRIX_ENTRIES:
        yield 0, _draw_counts(g, n_boot, seed)
    else:
        yield from _draw_count_blocks(g, n_boot, seed)


def _draw_count_blocks(g: int, n_boot: int, seed: int) -> Iterator[tuple[int, np.ndarray]]:
    """`_draw_counts`' rows a block at a time (first row, block), from one seeded generator."""
    rng = np.random.default_rng(seed)
    rows = _rows_per_block(g)
    for start in range(0, n_boot, rows):
        k = min(rows, n_boot - start)
        idx = rng.integers(0, g, size=(k, g))
        idx += g * np.arange(k)[:, None]
        yield start, np.bincount(idx.ravel(), minlength=k * g).reshape(k, g).astype(float)


def _flip_matrices(g: int, n_flips: int, seed: int) -> Iterator[np.ndarray]:
    """The sign flips of g tasks: `_flips` in one matrix up to MATRIX_ENTRIES, else
    `_flip_blocks`."""
    if n_flips * g <= MATRIX_ENTRIES:
        yield _flips(g, n_flips, seed)
    else:
        yield from _flip_blocks(g, n_flips, seed)


def _flip_blocks(g: int, n_flips: int, seed: int) -> Iterator[np.ndarray]:
    """The sign flips of g tasks past MATRIX_ENTRIES (as 0/1 floats), a block of rows at a
    time: row r's flips are the bits, least significant first, of the r-th run of
    `_flip_row_bytes(g)` bytes of `default_rng(seed).bytes(n_flips * _flip_row_bytes(g))`.
    Whole rows are whole 32-bit words, so drawing them a block at a time gives those very
    bytes whatever the block's size. (A coin per bit, not per double below 0.5 as `_flips`
    draws them: at 25,000 tasks drawing 20,000 doubles a task took 4.6 s of each pass.)"""
    rng = np.random.default_rng(seed)
    rows, width = _rows_per_block(g), _flip_row_bytes(g)
    for start in range(0, n_flips, rows):
        k = min(rows, n_flips - start)
        packed = np.frombuffer(rng.bytes(k * width), dtype=np.uint8).reshape(k, width)
        yield np.unpackbits(packed, axis=1, count=g, bitorder="little").astype(float)


def _flip_row_bytes(g: int) -> int:
    """The bytes one row of g flips takes: whole 32-bit words (`Generator.bytes` draws 4
    bytes at a time and drops what a call leaves of the last)."""
    return 4 * ((g + 31) // 32)


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
    return sign_flip_ps([sums], n_flips=n_flips, seed=seed)[0]


def sign_flip_ps(
    jobs: Sequence[np.ndarray], *, n_flips: int = N_FLIPS, seed: int = SEED
) -> list[float]:
    """`sign_flip_from_sums` of each per-task sums: the tests over the same number of tasks
    share their flips, drawn once (see module doc)."""
    out = [1.0] * len(jobs)
    for g, members in _by_task_count(len(sums) for sums in jobs).items():
        if g >= ASYMPTOTIC_TASKS:
            members = _closed_forms(members, out, lambda i: closed_form_sign_flip_p(jobs[i]))
        if g == 0 or not members:
            continue
        totals = np.array([float(jobs[i].sum()) for i in members])
        # Relative tolerance: a flipped sum equal to the observed one must count as "as extreme".
        floor = np.abs(totals) - np.array(
            [1e-9 * max(1.0, float(np.abs(jobs[i]).sum())) for i in members]
        )
        if g <= EXACT_MAX_TASKS:
            for j, i in enumerate(members):
                flipped = np.abs(_all_signs(g) @ jobs[i])
                out[i] = float(np.mean(flipped >= floor[j]))
            continue
        # Flipping the tasks in `neg` turns the total S into S - 2 * sum(neg * sums).
        sums = np.column_stack([jobs[i] for i in members])
        hits = np.zeros(len(members), dtype=np.int64)
        for neg in _flip_matrices(g, n_flips, seed):
            hits += (np.abs(totals - 2.0 * (neg @ sums)) >= floor).sum(axis=0)
        for j, i in enumerate(members):
            out[i] = (1 + int(hits[j])) / (1 + n_flips)
    return out


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
    if counts.sum() == 0:
        return Effect(0, 0, None, None, None, None)
    interval = bootstrap_from_sums(sums, counts, level=level, n_boot=n_boot, seed=seed)
    p = sign_flip_from_sums(sums, seed=seed) if with_p else None
    return _effect((sums, counts), interval, p)


def _none_if_nan(x: float | None) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else x


class PairedInputs(NamedTuple):
    """What `paired_effects` takes: the counted pairs' tasks, overall scores and passes, and
    the tasks and deltas of the pairs the cost and duration deltas use."""

    tasks: np.ndarray
    candidate_overall: np.ndarray
    baseline_overall: np.ndarray
    candidate_pass: np.ndarray
    baseline_pass: np.ndarray
    cost_tasks: np.ndarray
    cost_delta: np.ndarray
    duration_tasks: np.ndarray
    duration_delta: np.ndarray


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
    return paired_effects_many(
        [
            PairedInputs(
                tasks,
                candidate_overall,
                baseline_overall,
                candidate_pass,
                baseline_pass,
                cost_tasks,
                cost_delta,
                duration_tasks,
                duration_delta,
            )
        ]
    )[0]


class PairedSums(NamedTuple):
    """A comparison reduced to what its effects need: per-task sums and counts of its overall,
    pass, cost and duration differences (in that order), and its discordant pass counts."""

    sums: tuple[tuple[np.ndarray, np.ndarray], ...]
    candidate_only: int
    baseline_only: int
    pairs: int


def paired_sums(c: PairedInputs) -> PairedSums:
    """`c` reduced to per-task sums: a comparison's pairs (a million trials' worth) need not
    be held until every comparison of a run has been counted."""
    tasks = np.asarray(c.tasks)
    diff = np.asarray(c.candidate_overall, dtype=float) - np.asarray(
        c.baseline_overall, dtype=float
    )
    cp = np.asarray(c.candidate_pass, dtype=bool)
    bp = np.asarray(c.baseline_pass, dtype=bool)
    return PairedSums(
        (
            task_sums(tasks, diff),
            task_sums(tasks, cp.astype(float) - bp.astype(float)),
            task_sums(np.asarray(c.cost_tasks), np.asarray(c.cost_delta, dtype=float)),
            task_sums(np.asarray(c.duration_tasks), np.asarray(c.duration_delta, dtype=float)),
        ),
        int((cp & ~bp).sum()),
        int((~cp & bp).sum()),
        len(cp),
    )


def paired_effects_many(comparisons: Sequence[PairedInputs]) -> list[dict[str, float | int | None]]:
    """`paired_effects` of several comparisons, their intervals and tests over the same number
    of tasks drawn together (a run's comparisons against one baseline usually share their
    tasks: one pass over the resamples serves them all)."""
    return effects_of_sums([paired_sums(c) for c in comparisons])


def effects_of_sums(reduced: Sequence[PairedSums]) -> list[dict[str, float | int | None]]:
    """`paired_effects_many` of comparisons already reduced by `paired_sums`."""
    sums = [part for r in reduced for part in r.sums]
    passes = [(r.candidate_only, r.baseline_only, r.pairs) for r in reduced]
    # (an interval only where there are pairs: `effect` gives none without)
    known = [i for i, (_, counts) in enumerate(sums) if counts.sum() > 0]
    intervals: list[tuple[float | None, float | None]] = [(None, None)] * len(sums)
    for i, ci in zip(known, bootstrap_intervals([sums[i] for i in known]), strict=True):
        intervals[i] = ci
    tested = [i for i in range(0, len(sums), 4) if sums[i][1].sum() > 0]
    p_values = dict(zip(tested, sign_flip_ps([sums[i][0] for i in tested]), strict=True))
    out = []
    for k, (candidate_only, baseline_only, n_pass) in enumerate(passes):
        overall, pass_eff, cost, dur = (
            _effect(sums[4 * k + j], intervals[4 * k + j], p_values.get(4 * k + j))
            for j in range(4)
        )
        out.append(
            {
                "overall_pairs": overall.n,
                "overall_delta": overall.delta,
                "overall_delta_ci_low": overall.ci_low,
                "overall_delta_ci_high": overall.ci_high,
                "overall_delta_p": overall.p_value,
                "pass_rate_delta": pass_eff.delta,
                "pass_rate_delta_ci_low": pass_eff.ci_low,
                "pass_rate_delta_ci_high": pass_eff.ci_high,
                "mcnemar_p": mcnemar_p(int(candidate_only), int(baseline_only)) if n_pass else None,
                "cost_delta_ci_low_usd": _none_if_nan(cost.ci_low),
                "cost_delta_ci_high_usd": _none_if_nan(cost.ci_high),
                "duration_delta_ci_low_seconds": _none_if_nan(dur.ci_low),
                "duration_delta_ci_high_seconds": _none_if_nan(dur.ci_high),
            }
        )
    return out


def _effect(
    sums: tuple[np.ndarray, np.ndarray],
    interval: tuple[float | None, float | None],
    p_value: float | None,
) -> Effect:
    """An `Effect` from its parts (its interval and p-value computed apart, for several
    effects at once by `paired_effects_many`)."""
    total, counts = sums
    n = int(counts.sum())
    if n == 0:
        return Effect(0, 0, None, None, None, None)
    return Effect(n, len(total), float(total.sum() / n), interval[0], interval[1], p_value)
