"""Paired effect sizes and the adaptive stopping rule on fixed synthetic trial tables.

Every expected figure is computed here independently of bench_pipeline: McNemar's p by hand from
counted discordant pairs (SciPy's binomtest and the binomial sum), the bootstrap by a loop over
resamples that rebuilds each resampled table pair by pair, the sign-flip p with SciPy's
permutation_test on the per-task sums.
"""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from bench_pipeline.formats.model import STOP_CI_WIDTH, RepetitionPlan
from bench_pipeline.results import compare_all, effects, paired_comparison
from bench_pipeline.results.adaptive import MAX_ROUNDS, SEPARATED, decide_round, look_alpha
from bench_pipeline.results.effects import N_BOOT, SEED, bootstrap_ci, mcnemar_p, sign_flip_p

TASKS = [f"t{i:02d}" for i in range(1, 11)]


def tables(plan: dict[tuple[str, int], tuple[float, float]]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(task, rep) -> (candidate checks, baseline checks): trials and scores of one run."""
    trials, scores = [], []
    for (task, rep), pair in plan.items():
        for cfg, value, cost, dur in (("cand", pair[0], 0.5, 30.0), ("base", pair[1], 0.2, 10.0)):
            tid = f"{task}/{cfg}/{rep}"
            # Costs vary by task and rep so the cost interval is not degenerate.
            cost = cost + 0.01 * int(task[1:]) * rep
            trials.append(
                {
                    "run_id": "r1",
                    "trial_id": tid,
                    "task_id": task,
                    "config_id": cfg,
                    "repetition": rep,
                    "tags": [],
                    "holdout": False,
                    "is_baseline": cfg == "base",
                    "outcome": "succeeded",
                    "cost_usd": cost if cfg == "cand" else 0.2,
                    "duration_seconds": dur + rep,
                }
            )
            scores.append(
                {
                    "run_id": "r1",
                    "trial_id": tid,
                    "task_id": task,
                    "config_id": cfg,
                    "repetition": rep,
                    "scorer": "checks",
                    "scorer_group": "checks",
                    "weight": 1.0,
                    "status": "scored",
                    "value": float(value),
                    "cost_usd": None,
                    "scored_at": pd.Timestamp("2025-01-01", tz="UTC"),
                }
            )
    return pd.DataFrame(trials), pd.DataFrame(scores)


def mixed_plan() -> dict[tuple[str, int], tuple[float, float]]:
    """3 reps x 10 tasks with partial scores, wins, losses and ties."""
    rng = np.random.default_rng(7)
    plan = {}
    for i, task in enumerate(TASKS):
        for rep in (1, 2, 3):
            c = float(rng.random() < 0.4 + 0.05 * i)
            b = float(rng.random() < 0.5)
            if i == 3 and rep == 2:
                c = 0.5  # a partial score: overall differs from pass
            plan[(task, rep)] = (c, b)
    return plan


def brute_bootstrap(rows: list[tuple[str, float]], seed: int, n_boot: int, level: float):
    """Resample tasks with the same generator calls, rebuild each table row by row."""
    tasks = sorted({t for t, _ in rows})
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(tasks), size=(n_boot, len(tasks)))
    means = []
    for draw in draws:
        picked = []
        for k in draw:
            picked += [v for t, v in rows if t == tasks[k]]
        means.append(sum(picked) / len(picked))
    tail = (1 - level) / 2
    return tuple(np.quantile(means, [tail, 1 - tail]))


def test_effects_match_independent_computation() -> None:
    plan = mixed_plan()
    trials, scores = tables(plan)
    fast = compare_all(trials, scores).iloc[0].to_dict()
    slow = paired_comparison(trials, scores, "cand", "base")
    # The generic merge path and the vectorized path agree on every effect field.
    for key in ("overall_delta", "overall_delta_ci_low", "overall_delta_p", "mcnemar_p"):
        assert fast[key] == pytest.approx(slow[key]), key

    # Overall difference: mean over pairs, interval from a brute-force cluster bootstrap.
    diffs = [(task, c - b) for (task, _), (c, b) in plan.items()]
    assert slow["overall_pairs"] == 30
    assert slow["overall_delta"] == pytest.approx(sum(d for _, d in diffs) / 30)
    low, high = brute_bootstrap(diffs, SEED, N_BOOT, 0.95)
    assert (slow["overall_delta_ci_low"], slow["overall_delta_ci_high"]) == pytest.approx(
        (low, high)
    )
    assert low < slow["overall_delta"] < high

    # Pass rate: pass = checks == 1 (the partial 0.5 is a fail).
    passes = [(task, float(c == 1) - float(b == 1)) for (task, _), (c, b) in plan.items()]
    p_low, p_high = brute_bootstrap(passes, SEED, N_BOOT, 0.95)
    assert slow["pass_rate_delta"] == pytest.approx(sum(d for _, d in passes) / 30)
    assert (slow["pass_rate_delta_ci_low"], slow["pass_rate_delta_ci_high"]) == pytest.approx(
        (p_low, p_high)
    )

    # McNemar's exact test from the discordant pairs counted by hand.
    b = sum(1 for c, base in plan.values() if c == 1 and base != 1)
    c = sum(1 for cand, base in plan.values() if cand != 1 and base == 1)
    assert (slow["candidate_only"], slow["baseline_only"]) == (b, c)
    by_scipy = stats.binomtest(b, b + c, 0.5).pvalue
    by_sum = min(1.0, 2 * sum(math.comb(b + c, k) for k in range(min(b, c) + 1)) / 2 ** (b + c))
    assert slow["mcnemar_p"] == pytest.approx(by_scipy) == pytest.approx(by_sum)

    # Sign-flip p over tasks = SciPy's exact paired permutation test on per-task sums.
    sums = {t: 0.0 for t in TASKS}
    for t, d in diffs:
        sums[t] += d
    x = np.array([sums[t] for t in TASKS])
    perm = stats.permutation_test(
        (x, np.zeros_like(x)),
        lambda a, z, axis: np.sum(a - z, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=np.inf,
        alternative="two-sided",
    )
    assert slow["overall_delta_p"] == pytest.approx(perm.pvalue)

    # Cost: every pair succeeded with a known cost; its interval is a bootstrap too.
    cost_rows = [
        (t, (0.5 + 0.01 * int(t[1:]) * rep) - 0.2)
        for (t, rep) in plan  # candidate - baseline
    ]
    c_low, c_high = brute_bootstrap(cost_rows, SEED, N_BOOT, 0.95)
    assert (slow["cost_delta_ci_low_usd"], slow["cost_delta_ci_high_usd"]) == pytest.approx(
        (c_low, c_high)
    )
    assert slow["cost_delta_ci_low_usd"] <= slow["cost_delta_mean_usd"]
    assert slow["cost_delta_mean_usd"] <= slow["cost_delta_ci_high_usd"]


def test_small_building_blocks() -> None:
    assert mcnemar_p(0, 0) == 1.0
    assert mcnemar_p(6, 0) == pytest.approx(2 / 64)
    # One task can never be significant; all-equal drops on G tasks give 2 / 2^G.
    assert sign_flip_p(np.array(["a", "a"]), np.array([-1.0, -1.0])) == 1.0
    assert sign_flip_p(np.array(list("abcdef")), -np.ones(6)) == pytest.approx(2 / 64)
    # The same seed gives the same interval; fewer than two tasks give none.
    t, v = np.array(list("aabbcc")), np.array([0.1, 0.3, -0.2, 0.0, 0.5, 0.4])
    assert bootstrap_ci(t, v) == bootstrap_ci(t, v)
    assert bootstrap_ci(np.array(["a", "a"]), np.array([1.0, 0.0])) == (None, None)


def per_trial(values: dict[str, dict[tuple[str, int], float]]) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {"config_id": cfg, "task_id": t, "repetition": r, "overall": v}
            for cfg, cells in values.items()
            for (t, r), v in cells.items()
        ]
    )


PLAN = RepetitionPlan(min=2, max=10)


def test_better_on_nine_of_ten_tasks_is_separated() -> None:
    better = {(t, r): 1.0 if i < 9 else 0.5 for i, t in enumerate(TASKS) for r in (1, 2)}
    worse = {(t, r): 0.0 if i < 9 else 0.5 for i, t in enumerate(TASKS) for r in (1, 2)}
    d = decide_round(per_trial({"worse": worse, "better": better}), 2, PLAN)
    assert (d.leader, d.runner_up) == ("better", "worse")
    assert d.separated and d.stop and d.reason == SEPARATED
    assert d.p_value == pytest.approx(2 / 2**9)  # the tied task drops out of the sign flips
    assert d.alpha_look == pytest.approx(0.05 / 9) and d.ci_low > 0
    assert "stopped after 2 rounds (separated)" in d.summary()


def test_better_on_five_of_ten_with_noise_is_not_separated() -> None:
    rng = np.random.default_rng(3)
    a = {(t, r): float(rng.random() < 0.5) for t in TASKS for r in (1, 2)}
    b = {}
    for i, t in enumerate(TASKS):
        for r in (1, 2):
            # Five tasks better for b, the other five noise around a's values.
            b[(t, r)] = 1.0 if i < 5 else float(rng.random() < 0.5)
    d = decide_round(per_trial({"a": a, "b": b}), 2, PLAN)
    assert not d.separated and not d.stop and d.reason == "continue"
    assert d.p_value > d.alpha_look
    # At max rounds the run stops and says so.
    last = decide_round(per_trial({"a": a, "b": b}), 10, PLAN)
    assert last.stop and last.reason == MAX_ROUNDS and "not separated" in last.summary()


def test_ci_width_rule_and_levels() -> None:
    plan = RepetitionPlan(min=2, max=4, stop=STOP_CI_WIDTH, ci_width=0.5)
    same = {(t, r): 1.0 for t in TASKS for r in (1, 2)}
    d = decide_round(per_trial({"a": same, "b": dict(same)}), 2, plan)
    assert d.stop and d.reason == "ci_width reached" and d.max_ci_width == 0.0
    assert look_alpha(RepetitionPlan(min=2, max=10), configs=3) == pytest.approx(0.05 / 18)


def test_false_separation_rate_under_identical_configs() -> None:
    """200 simulated launches of two identical noisy configs (10 tasks, per-task pass rates
    drawn at random, rounds 2..10): the rule may separate them at most 5% of the time; with a
    binomial sampling margin of 2 standard errors (sqrt(.05 * .95 / 200) ~ 1.5%) the bound is
    8/200 + 6 launches = 14."""
    rng = np.random.default_rng(2026)
    false_separations, rounds = 0, []
    for _ in range(200):
        p = rng.uniform(0, 1, len(TASKS))
        draws = rng.random((2, len(TASKS), PLAN.max)) < p[None, :, None]
        frame = pd.DataFrame(
            [
                {"config_id": cfg, "task_id": t, "repetition": r + 1, "overall": float(v)}
                for ci, cfg in enumerate(("a", "b"))
                for ti, t in enumerate(TASKS)
                for r, v in enumerate(draws[ci, ti])
            ]
        )
        for r in range(PLAN.min, PLAN.max + 1):
            d = decide_round(frame[frame["repetition"] <= r], r, PLAN)
            if d.stop:
                break
        false_separations += d.separated
        rounds.append(d.rounds)
    rate = false_separations / 200
    assert rate <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / 200)
    # Identical configs run to the end: the rule does not stop on noise.
    assert np.mean(rounds) > 9


def test_sign_flip_monte_carlo_beyond_sixteen_tasks() -> None:
    rng = np.random.default_rng(11)
    x = rng.normal(0.15, 0.5, 24)  # per-task sums of 24 tasks: the seeded Monte Carlo path
    ours = sign_flip_p(np.arange(24), x)
    theirs = stats.permutation_test(
        (x, np.zeros_like(x)),
        lambda a, z, axis: np.sum(a - z, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=200_000,
        rng=np.random.default_rng(0),
    ).pvalue
    assert ours == pytest.approx(theirs, abs=0.01)
    assert ours == sign_flip_p(np.arange(24), x)  # seeded: deterministic


def blocked_brute_bootstrap(
    sums: np.ndarray, counts: np.ndarray, rows_per_block: int, n_boot: int
) -> tuple[float, float]:
    """The documented block draw, by hand: each block of resamples drawn by one call of the
    seeded generator, each resample's mean taken task by task."""
    g = len(sums)
    rng = np.random.default_rng(SEED)
    draws = np.vstack(
        [
            rng.integers(0, g, size=(min(rows_per_block, n_boot - start), g))
            for start in range(0, n_boot, rows_per_block)
        ]
    )
    means = [sums[d].sum() / counts[d].sum() for d in draws]
    return tuple(np.quantile(means, [0.025, 0.975]))


def flips_by_hand(sums: np.ndarray, n_flips: int) -> float:
    """The documented flips past MATRIX_ENTRIES, drawn in one call: each row of flips is the
    bits (least significant first) of its whole 32-bit words of the seeded generator's bytes."""
    g = len(sums)
    width = 4 * ((g + 31) // 32)
    data = np.frombuffer(np.random.default_rng(SEED).bytes(n_flips * width), dtype=np.uint8)
    bits = np.unpackbits(data.reshape(n_flips, width), axis=1, bitorder="little")[:, :g]
    total = float(sums.sum())
    floor = abs(total) - 1e-9 * max(1.0, float(np.abs(sums).sum()))
    hits = sum(abs(total - 2.0 * float(sums[row.astype(bool)].sum())) >= floor for row in bits)
    return (1 + hits) / (1 + n_flips)


def test_thousands_of_tasks_resample_in_blocks_of_bounded_memory(monkeypatch) -> None:
    # A run of thousands of tasks: the resampling matrices would be resamples x tasks
    # (9.5 GiB at 25,000 tasks). Past MATRIX_ENTRIES they are drawn a block at a time.
    rng = np.random.default_rng(5)
    g = 300
    sums = [rng.normal(0.1 * k, 1.0, g) for k in range(3)]
    counts = [rng.integers(1, 4, g).astype(float) for _ in range(3)]
    sums[2][:5] = 0.0  # (a few tasks without a difference: ties in the flips)
    one_call = effects.sign_flip_ps(sums, n_flips=4000)
    monkeypatch.setattr(effects, "MATRIX_ENTRIES", 7 * g + 5)  # blocks of 7 rows
    # The sign flips in blocks are the documented bit draws computed by hand, whatever the
    # block's size, each test alone as all three together, and agree with the one-call
    # flips (doubles below 0.5) to the Monte Carlo error of 4,000 draws.
    blocked = effects.sign_flip_ps(sums, n_flips=4000)
    assert blocked == [flips_by_hand(s, 4000) for s in sums]
    assert [effects.sign_flip_ps([s], n_flips=4000)[0] for s in sums] == blocked
    monkeypatch.setattr(effects, "MATRIX_ENTRIES", 13 * g)  # blocks of 13 rows
    assert effects.sign_flip_ps(sums, n_flips=4000) == blocked
    assert blocked == pytest.approx(one_call, abs=0.03)
    assert blocked[0] > 0.05 > blocked[2]  # (the data say so: a test that can tell)
    monkeypatch.setattr(effects, "MATRIX_ENTRIES", 7 * g + 5)
    # The bootstrap in blocks is the block draw (documented) computed by hand, and each
    # interval alone as all three together.
    intervals = effects.bootstrap_intervals(list(zip(sums, counts, strict=True)), n_boot=500)
    for s, c, interval in zip(sums, counts, intervals, strict=True):
        assert interval == pytest.approx(blocked_brute_bootstrap(s, c, 7, 500), rel=1e-9)
        # (to rounding: a product with three columns sums in another order than with one)
        assert effects.bootstrap_from_sums(s, c, n_boot=500) == pytest.approx(interval, rel=1e-12)


@pytest.mark.parametrize(
    ("route", "bound_mib"),
    # resampled: one call would hold 2,000 x 20,000 draws and 20,000 x 20,000 flips (> 3 GiB);
    # in blocks the peak is a few blocks of MATRIX_ENTRIES (32 MiB each). In closed form (the
    # route past ASYMPTOTIC_TASKS) there is no matrix at all: less than one block.
    [("resampled in blocks", 256), ("closed form", 16)],
)
def test_paired_effects_of_thousands_of_tasks_stay_within_bounded_memory(
    monkeypatch, route: str, bound_mib: int
) -> None:
    if route == "resampled in blocks":
        monkeypatch.setattr(effects, "ASYMPTOTIC_TASKS", 10**9)
    rng = np.random.default_rng(9)
    g = 20_000
    tasks = np.repeat(np.arange(g), 2)
    cand, base = rng.random(2 * g), rng.random(2 * g)
    tracemalloc.start()
    try:
        fields = effects.paired_effects(
            tasks, cand, base, cand > 0.5, base > 0.5, tasks, cand - base, tasks, base
        )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < bound_mib * 2**20, f"peak {peak / 2**20:.0f} MiB"
    assert fields["overall_pairs"] == 2 * g
    assert fields["overall_delta_ci_low"] < fields["overall_delta"]
    assert fields["overall_delta"] < fields["overall_delta_ci_high"]
    assert 0 < fields["overall_delta_p"] <= 1


def closed_form_by_hand(sums: np.ndarray, counts: np.ndarray, level: float = 0.95):
    """The documented closed form of the bootstrap interval, term by term, with SciPy's normal
    quantiles: the resampled ratio linearised, its skewness in the Cornish-Fisher term."""
    n = float(sum(counts))
    ratio = float(sum(sums)) / n
    d = [float(s) - ratio * float(c) for s, c in zip(sums, counts, strict=True)]
    var = sum(x * x for x in d)
    skew = sum(x**3 for x in d) / var**1.5
    se = math.sqrt(var) / n
    ends = []
    for q in ((1 - level) / 2, (1 + level) / 2):
        z = stats.norm.ppf(q)
        ends.append(ratio + se * (z + skew * (z * z - 1) / 6))
    return tuple(ends), se


def sign_flip_normal_by_hand(sums: np.ndarray, span: float) -> float:
    """P(|Z| >= (|S| - span) / sqrt(sum s^2)), with SciPy's normal tail."""
    x = max(abs(float(sum(sums))) - span, 0.0) / math.sqrt(float(sum(s * s for s in sums)))
    return float(2 * stats.norm.sf(x))


def test_past_a_thousand_tasks_the_closed_form_stands_in_for_the_resampling(monkeypatch) -> None:
    # Per-task sums of pass/fail differences (lattice span 1), half points (0.5) and skewed
    # costs (no lattice): the shapes a paired comparison's intervals and test see.
    rng = np.random.default_rng(21)
    g = effects.ASYMPTOTIC_TASKS
    counts = rng.integers(1, 6, g).astype(float)
    reps = counts.astype(int)
    data = {
        "pass/fail": (np.array([rng.integers(-k, k + 1) for k in reps], dtype=float), 1.0),
        "half points": (np.array([rng.integers(-2 * k, 2 * k + 1) for k in reps]) / 2, 0.5),
        "costs": (counts * rng.lognormal(0.0, 0.8, g) - 1.6 * counts, 0.0),
    }
    jobs = [(sums, counts) for sums, _ in data.values()]
    closed = effects.bootstrap_intervals(jobs)
    closed_p = effects.sign_flip_ps([sums for sums, _ in jobs])
    monkeypatch.setattr(effects, "ASYMPTOTIC_TASKS", 10**9)
    resampled = effects.bootstrap_intervals(jobs)
    drawn_p = effects.sign_flip_ps([sums for sums, _ in jobs])
    for (name, (sums, span)), ci, boot, p, p_drawn in zip(
        data.items(), closed, resampled, closed_p, drawn_p, strict=True
    ):
        expected, se = closed_form_by_hand(sums, counts)
        assert ci == pytest.approx(expected, rel=1e-12), name
        assert effects.lattice_span(sums) == span, name
        assert p == pytest.approx(sign_flip_normal_by_hand(sums, span), rel=1e-9), name
        # within the resampling's own Monte Carlo error: 2,000 resamples of other seeds move
        # these endpoints by up to ~0.25 standard errors, 20,000 flips a p-value by ~0.005
        assert abs(ci[0] - boot[0]) < 0.3 * se and abs(ci[1] - boot[1]) < 0.3 * se, name
        assert p == pytest.approx(p_drawn, abs=0.01), name
    # (the costs are skewed: their interval is not the symmetric one, as the bootstrap's is not)
    ratio = jobs[2][0].sum() / counts.sum()
    assert (closed[2][1] - ratio) > 1.02 * (ratio - closed[2][0])
    assert (resampled[2][1] - ratio) > 1.02 * (ratio - resampled[2][0])


def test_a_few_dominant_tasks_are_still_resampled(monkeypatch) -> None:
    # One task carries most of the variance: neither normal approximation holds, so the
    # interval and the test are the resampled ones, exactly.
    rng = np.random.default_rng(4)
    g = effects.ASYMPTOTIC_TASKS
    counts = np.full(g, 2.0)
    sums = rng.normal(0.0, 0.1, g)
    sums[7] = 40.0
    assert effects.closed_form_interval(sums, counts) is None
    assert effects.closed_form_sign_flip_p(sums) is None
    closed = effects.bootstrap_intervals([(sums, counts), (rng.normal(0, 1, g), counts)])
    closed_p = effects.sign_flip_ps([sums])
    monkeypatch.setattr(effects, "ASYMPTOTIC_TASKS", 10**9)
    assert closed[0] == effects.bootstrap_intervals([(sums, counts)])[0]
    assert closed_p == effects.sign_flip_ps([sums])
    # no difference anywhere: the interval is the point and the test finds nothing
    assert effects.closed_form_interval(np.zeros(g), counts) == (0.0, 0.0)
    assert effects.closed_form_sign_flip_p(np.zeros(g)) == 1.0


def test_lattice_span_of_per_task_sums() -> None:
    assert effects.lattice_span(np.array([2.0, -4.0, 6.0, 0.0])) == 2.0
    assert effects.lattice_span(np.array([1.5, -0.5, 3.0])) == 0.5
    assert effects.lattice_span(np.array([0.1 + 0.2, 0.6, -0.9])) == pytest.approx(0.3)
    assert effects.lattice_span(np.array([math.pi, 1.0])) == 0.0
    assert effects.lattice_span(np.zeros(3)) == 0.0
