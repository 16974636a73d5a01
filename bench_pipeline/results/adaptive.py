"""The stopping rule of adaptive repetitions: after a round, stop or add one.

`decide_round(per_trial, rounds, plan, alpha=0.05)` looks at the trials so far (one row per
trial: `config_id`, `task_id`, `repetition`, `overall`) and returns a `RoundDecision`.

- Every scored trial counts, holdout tasks included (as in the config table's overall, which
  ranks the configs; trials without an overall, e.g. infrastructure failures, pair with
  nothing). The leader is the config with the highest mean overall, the runner-up the next. Their paired
  difference (pairs = same task and repetition, both scored) gets a sign-flip p over tasks and
  a cluster-bootstrap interval (`effects`).
- Error control across looks: **Bonferroni over the planned looks and the leader's rivals**.
  Looks happen after rounds min..max, K = max - min + 1 of them, and the leader is compared with
  C - 1 rivals chosen after seeing the data, so each look tests at
  alpha_look = alpha / (K * (C - 1)). "Separated" needs the sign-flip p <= alpha_look AND the
  (1 - alpha_look) bootstrap interval of the difference above 0. By the union bound the chance
  of ever declaring a separation between identical configs is <= alpha, whatever the
  correlation between looks (they share the earlier rounds, so the bound is conservative) and
  without the normal, independent-increments model an alpha-spending boundary (O'Brien-Fleming)
  assumes; the sign-flip test is exact for few tasks, where a bootstrap or t interval on a few
  clusters is too narrow (past 1,000 tasks both are in closed form: `effects`). The price is power: a real difference may need a round more.
- `stop: ci_width`: stop when every 95% interval of the leader's difference with a rival is
  narrower than `ci_width` (precision, not a decision: no adjustment needed).
- Otherwise stop at `max` rounds ("not separated").

The decision is pure; the round loop (and the cost cap) is `runs.adaptive`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd

from bench_pipeline.formats.model import STOP_CI_WIDTH, STOP_SEPARATED, RepetitionPlan

from .effects import ALPHA, bootstrap_from_sums, sign_flip_from_sums

CONTINUE = "continue"
SEPARATED = "separated"
CI_WIDTH = "ci_width reached"
MAX_ROUNDS = "max repetitions"
COST_CAP = "cost cap"
ONE_CONFIG = "one config"


@dataclass(frozen=True)
class RoundDecision:
    rounds: int
    stop: bool
    reason: str  # continue | separated | ci_width reached | max repetitions | cost cap
    separated: bool
    leader: str | None
    runner_up: str | None
    delta: float | None  # leader - runner-up, mean paired overall difference
    ci_low: float | None  # at the adjusted level 1 - alpha_look
    ci_high: float | None
    p_value: float | None  # sign-flip over tasks, two-sided
    alpha: float
    alpha_look: float
    max_ci_width: float | None  # widest 95% interval of leader vs a rival
    pairs: int = 0
    tasks: int = 0

    def summary(self) -> str:
        """One line for people: why it stopped (or goes on) and after how many rounds."""
        if self.leader is None or self.runner_up is None:
            cmp = "one config: nothing to separate"
        else:
            shown = "-" if self.delta is None else f"{self.delta:+.3f}"
            ci = (
                "no interval"
                if self.ci_low is None or self.ci_high is None
                else f"{1 - self.alpha_look:.2%} CI [{self.ci_low:+.3f}, {self.ci_high:+.3f}]"
            )
            p = "-" if self.p_value is None else f"{self.p_value:.4g}"
            verdict = "separated" if self.separated else "not separated"
            cmp = (
                f"{self.leader} vs {self.runner_up}: {shown} ({ci}, p = {p}, "
                f"level {self.alpha_look:.4g} per look) -> {verdict}"
            )
        head = (
            f"stopped after {self.rounds} rounds ({self.reason})"
            if self.stop
            else f"after {self.rounds} rounds: adding a round"
        )
        return f"{head}; {cmp}"

    def to_dict(self) -> dict[str, object]:
        return asdict(self) | {"summary": self.summary()}


def look_alpha(plan: RepetitionPlan, configs: int, alpha: float = ALPHA) -> float:
    """Per-look, per-comparison level: alpha / (looks planned * rivals of the leader)."""
    looks = plan.max - plan.min + 1
    return alpha / (looks * max(1, configs - 1))


def _paired_sums(cube: np.ndarray, a: int, b: int) -> tuple[np.ndarray, np.ndarray, int]:
    """Per-task sums and counts of a - b over the (task, repetition) cells both scored."""
    diff = cube[a] - cube[b]
    ok = ~np.isnan(diff)
    counts = ok.sum(axis=1).astype(float)
    sums = np.where(ok, diff, 0.0).sum(axis=1)
    used = counts > 0
    return sums[used], counts[used], int(counts.sum())


def decide_round(
    per_trial: pd.DataFrame, rounds: int, plan: RepetitionPlan, alpha: float = ALPHA
) -> RoundDecision:
    """Stop or add a round after `rounds` rounds (see module doc)."""
    cfg, configs = pd.factorize(per_trial["config_id"].astype(str))
    task, task_u = pd.factorize(per_trial["task_id"].astype(str))
    rep, rep_u = pd.factorize(per_trial["repetition"])
    values = per_trial["overall"].to_numpy(dtype=float, na_value=np.nan)
    # config x task x repetition; a missing or unscored trial stays NaN and pairs with nothing.
    cube = np.full((len(configs), len(task_u), len(rep_u)), np.nan)
    cube[cfg, task, rep] = values
    configs = [str(c) for c in configs]
    a_look = look_alpha(plan, len(configs), alpha)
    with np.errstate(invalid="ignore"):
        means = [
            float(np.nanmean(cube[i])) if np.isfinite(cube[i]).any() else -np.inf
            for i in range(len(configs))
        ]
    # Ties keep the first-seen order, so equal configs give a stable leader.
    ranked = sorted(range(len(configs)), key=lambda i: (-means[i], i))
    leader = configs[ranked[0]] if ranked else None
    runner_up = configs[ranked[1]] if len(ranked) > 1 else None
    delta = low = high = p = widest = None
    pairs = tasks = 0
    separated = False
    if len(ranked) > 1:
        sums, counts, pairs = _paired_sums(cube, ranked[0], ranked[1])
        tasks = len(sums)
        if pairs:
            delta = float(sums.sum() / pairs)
            p = sign_flip_from_sums(sums)
            low, high = bootstrap_from_sums(sums, counts, level=1 - a_look)
            separated = bool(p <= a_look and low is not None and low > 0)
        widths = []
        for rival in ranked[1:]:
            r_sums, r_counts, _ = _paired_sums(cube, ranked[0], rival)
            lo95, hi95 = bootstrap_from_sums(r_sums, r_counts, level=0.95)
            widths.append(np.inf if lo95 is None or hi95 is None else hi95 - lo95)
        widest = float(max(widths)) if widths else None
    if rounds < plan.min:
        stop, reason = False, CONTINUE
    elif runner_up is None:
        stop, reason = True, ONE_CONFIG
    elif plan.stop == STOP_SEPARATED and separated:
        stop, reason = True, SEPARATED
    elif (
        plan.stop == STOP_CI_WIDTH
        and widest is not None
        and plan.ci_width is not None
        and widest < plan.ci_width
    ):
        stop, reason = True, CI_WIDTH
    elif rounds >= plan.max:
        stop, reason = True, MAX_ROUNDS
    else:
        stop, reason = False, CONTINUE
    return RoundDecision(
        rounds=rounds,
        stop=stop,
        reason=reason,
        separated=separated,
        leader=leader,
        runner_up=runner_up,
        delta=delta,
        ci_low=low,
        ci_high=high,
        p_value=p,
        alpha=alpha,
        alpha_look=a_look,
        max_ci_width=None if widest is None or not np.isfinite(widest) else widest,
        pairs=pairs,
        tasks=tasks,
    )
