"""Paired comparison of a candidate config against a baseline.

The baseline is another config of the same run or the same config id in another run. Trials
pair by (task_id, repetition); only pairs present on both sides count.

`paired_trials(trials, scores, candidate, baseline, *, candidate_run_id=None,
baseline_run_id=None, per_trial=None)` -> one row per pair: `task_id`, `repetition`,
`holdout`, `candidate_trial_id`, `baseline_trial_id`, `candidate_outcome`,
`baseline_outcome`, `candidate_pass`, `baseline_pass` (nullable booleans: primary scorer == 1),
`candidate_overall`, `baseline_overall`,
`candidate_cost_usd`, `baseline_cost_usd`, `candidate_duration_seconds`,
`baseline_duration_seconds`, `excluded` (null | "infrastructure": either outcome is
invalidated/workspace_error or either primary score is inconclusive | "unscored": either primary
score is error/missing/not_scored).

`paired_comparison(...)` (same arguments) -> dict with `candidate_config`,
`candidate_run_id`, `baseline_config`, `baseline_run_id`, `primary_scorer`, `pairs_matched`
(all pairs), `pairs` (counted: not holdout, not excluded) = `both_pass` + `candidate_only` +
`baseline_only` + `neither`; `infra_excluded`, `unscored_excluded` (over all pairs, holdout
included); `holdout_pairs`, `holdout_both_pass`, `holdout_candidate_only`,
`holdout_baseline_only`, `holdout_neither` (holdout pairs not excluded); `unpaired_candidate`,
`unpaired_baseline` (trials without a partner); `tasks` (unique tasks among counted pairs),
`candidate_tasks_all_pass`, `baseline_tasks_all_pass` (tasks whose every counted repetition
passed on that side); `sign_wins`, `sign_losses`, `sign_ties`, `sign_test_p` (two-sided exact
sign test over unique tasks: per task the sign of candidate passes minus baseline passes;
ties dropped; p = min(1, 2 * P(Bin(n, .5) <= min(wins, losses)))); `cost_pairs`,
`cost_delta_mean_usd` (mean candidate - baseline cost over counted pairs where both succeeded
and both costs are known), `duration_pairs`, `duration_delta_mean_seconds` (same, both
durations known); `candidate_spend_usd`, `baseline_spend_usd` (all counted trials, failed
ones included; null when any cost is unknown), `candidate_cost_per_accepted_usd`,
`baseline_cost_per_accepted_usd` (spend / passing trials; null when spend unknown or no pass);
then the paired effect sizes of `effects.paired_effects` over the counted pairs: `overall_delta`
and `pass_rate_delta` with 95% cluster-bootstrap intervals, the sign-flip p of the overall
difference, McNemar's exact p, and intervals of the cost and duration deltas.

`compare_all(trials, scores, baseline_config=None, *, per_trial=None)` -> one row per other
config of ONE run, columns as the dict above; the baseline defaults to the is_baseline config,
else the first config in trial order.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pandas as pd

from bench_pipeline.formats.vocabulary import INFRA_OUTCOMES, OUTCOME_SUCCEEDED, SCORE_INCONCLUSIVE

from ._common import first_rows, first_value, is_value, nan_to_none, single_run, str_codes
from .effects import (
    PairedInputs,
    binom_half_two_sided,
    effects_of_sums,
    paired_effects,
    paired_sums,
)
from .scores import trial_overall

SIDE_COLUMNS = [
    "trial_id",
    "outcome",
    "passed",
    "primary_status",
    "overall",
    "cost_usd",
    "duration_seconds",
]


def sign_test_p(wins: int, losses: int) -> float:
    """Two-sided exact sign test: min(1, 2 * P(Bin(n, 1/2) <= min(wins, losses)))."""
    n = wins + losses
    if n == 0:
        return 1.0
    # (summed from the largest term down, in floats: the exact sum of binomial coefficients
    # costs O(n^2) in big integers, 45 s for the 7 comparisons of a 25,000-task run)
    return binom_half_two_sided(min(wins, losses), n)


def _side(pt: pd.DataFrame, config_id: str, run_id: str | None, role: str) -> pd.DataFrame:
    mask = (pt["config_id"] == config_id).to_numpy(dtype=bool)
    if run_id is not None:
        mask = mask & (pt["run_id"] == run_id).to_numpy(dtype=bool)
    sub = pt.loc[mask]
    runs = pd.unique(sub["run_id"].to_numpy())
    if len(runs) > 1:
        raise ValueError(
            f"{role} config {config_id!r} appears in {len(runs)} runs; pass {role}_run_id"
        )
    if len(sub) == 0:
        raise ValueError(
            f"{role} config {config_id!r} has no trials" + (f" in run {run_id!r}" if run_id else "")
        )
    return sub


def paired_trials(
    trials: pd.DataFrame,
    scores: pd.DataFrame,
    candidate: str,
    baseline: str,
    *,
    candidate_run_id: str | None = None,
    baseline_run_id: str | None = None,
    per_trial: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """One row per (task_id, repetition) present on both sides (see module doc)."""
    pt = per_trial if per_trial is not None else trial_overall(trials, scores)
    return _pairs(pt, candidate, baseline, candidate_run_id, baseline_run_id)[0]


def _pairs(pt, candidate, baseline, candidate_run_id, baseline_run_id, with_ids=True):
    cand = _side(pt, candidate, candidate_run_id, "candidate")
    base = _side(pt, baseline, baseline_run_id, "baseline")

    tasks = pt["task_id"]
    if not isinstance(tasks.dtype, pd.CategoricalDtype):
        tasks = tasks.astype("category")
    task_names = tasks.cat.categories

    def frame(sub: pd.DataFrame, prefix: str) -> pd.DataFrame:
        out = pd.DataFrame(
            {
                "_task": tasks.loc[sub.index].cat.codes.to_numpy(),
                "repetition": sub["repetition"].to_numpy(),
                f"{prefix}_holdout": sub["holdout"].fillna(False).astype(bool).to_numpy()
                if "holdout" in sub
                else False,
            }
        )
        for col in SIDE_COLUMNS:
            if col == "trial_id" and not with_ids:
                continue
            values = sub[col] if col in sub else pd.Series(np.nan, index=sub.index)
            name = {"trial_id": "trial_id", "passed": "pass"}.get(col, col)
            out[f"{prefix}_{name}"] = values.array
        return out

    c, b = frame(cand, "candidate"), frame(base, "baseline")
    pairs = c.merge(b, on=["_task", "repetition"], how="inner")
    pairs["holdout"] = pairs.pop("candidate_holdout") | pairs.pop("baseline_holdout")
    infra = (
        pairs["candidate_outcome"].isin(list(INFRA_OUTCOMES)).to_numpy(dtype=bool)
        | pairs["baseline_outcome"].isin(list(INFRA_OUTCOMES)).to_numpy(dtype=bool)
        | (pairs["candidate_primary_status"] == SCORE_INCONCLUSIVE)
        .fillna(False)
        .to_numpy(dtype=bool)
        | (pairs["baseline_primary_status"] == SCORE_INCONCLUSIVE)
        .fillna(False)
        .to_numpy(dtype=bool)
    )
    unscored = (pairs["candidate_pass"].isna() | pairs["baseline_pass"].isna()).to_numpy(dtype=bool)
    pairs["excluded"] = pd.Categorical.from_codes(
        np.where(infra, 0, np.where(unscored, 1, -1)), categories=["infrastructure", "unscored"]
    )
    pairs = pairs.sort_values(["_task", "repetition"]).reset_index(drop=True)
    if with_ids:
        pairs["task_id"] = np.asarray(task_names, dtype=object)[pairs["_task"].to_numpy()]
        pairs["excluded"] = pairs["excluded"].astype(object).where(pairs["excluded"].notna(), None)
        for col in ("candidate_outcome", "baseline_outcome"):
            pairs[col] = pairs[col].astype(object)
    cols = [
        "task_id",
        "repetition",
        "holdout",
        "candidate_trial_id",
        "baseline_trial_id",
        "candidate_outcome",
        "baseline_outcome",
        "candidate_pass",
        "baseline_pass",
        "candidate_overall",
        "baseline_overall",
        "candidate_cost_usd",
        "baseline_cost_usd",
        "candidate_duration_seconds",
        "baseline_duration_seconds",
        "excluded",
    ]
    meta = {
        "candidate_run_id": str(first_value(cand["run_id"])),
        "baseline_run_id": str(first_value(base["run_id"])),
        "unpaired_candidate": len(c) - len(pairs),
        "unpaired_baseline": len(b) - len(pairs),
        "primary_scorer": nan_to_none(first_value(cand["primary_scorer"])),
    }
    if not with_ids:
        cols = ["_task", *cols[1:]]
    return pairs[[c for c in cols if c in pairs.columns]], meta


def _counts(cp: np.ndarray, bp: np.ndarray, prefix: str = "") -> dict[str, int]:
    return {
        f"{prefix}both_pass": int((cp & bp).sum()),
        f"{prefix}candidate_only": int((cp & ~bp).sum()),
        f"{prefix}baseline_only": int((~cp & bp).sum()),
        f"{prefix}neither": int((~cp & ~bp).sum()),
    }


def _spend(cost: pd.Series, passes: int) -> tuple[float | None, float | None]:
    if len(cost) == 0 or cost.isna().any():
        return None, None
    total = float(cost.sum())
    return total, (total / passes if passes else None)


def paired_comparison(
    trials: pd.DataFrame,
    scores: pd.DataFrame,
    candidate: str,
    baseline: str,
    *,
    candidate_run_id: str | None = None,
    baseline_run_id: str | None = None,
    per_trial: pd.DataFrame | None = None,
) -> dict:
    """Paired counts, sign test and deltas of candidate vs baseline (see module doc)."""
    pt = per_trial if per_trial is not None else trial_overall(trials, scores)
    pairs, meta = _pairs(pt, candidate, baseline, candidate_run_id, baseline_run_id, with_ids=False)
    return summarize_pairs(pairs, candidate, baseline, meta)


def summarize_pairs(pairs: pd.DataFrame, candidate: str, baseline: str, meta: dict) -> dict:
    """The summary dict of paired_comparison from a paired_trials frame."""
    kept = pairs.loc[pairs["excluded"].isna().to_numpy()]
    hold_mask = kept["holdout"].astype(bool).to_numpy()
    main = kept.loc[~hold_mask]
    hold = kept.loc[hold_mask]
    cp = main["candidate_pass"].to_numpy(dtype=bool)
    bp = main["baseline_pass"].to_numpy(dtype=bool)
    hcp = hold["candidate_pass"].to_numpy(dtype=bool)
    hbp = hold["baseline_pass"].to_numpy(dtype=bool)
    per_task = (
        pd.DataFrame(
            {
                "task": main["_task" if "_task" in main else "task_id"].to_numpy(),
                "c": cp.astype(int),
                "b": bp.astype(int),
            }
        )
        .groupby("task", observed=True)
        .agg(c=("c", "sum"), b=("b", "sum"), n=("c", "size"))
    )
    diff = per_task["c"] - per_task["b"]
    wins, losses = int((diff > 0).sum()), int((diff < 0).sum())
    both_ok = (main["candidate_outcome"] == OUTCOME_SUCCEEDED).to_numpy(dtype=bool) & (
        main["baseline_outcome"] == OUTCOME_SUCCEEDED
    ).to_numpy(dtype=bool)
    cost_ok = (
        both_ok
        & (main["candidate_cost_usd"].notna() & main["baseline_cost_usd"].notna()).to_numpy()
    )
    dur_ok = (
        both_ok
        & (
            main["candidate_duration_seconds"].notna() & main["baseline_duration_seconds"].notna()
        ).to_numpy()
    )
    cost_delta = main.loc[cost_ok, "candidate_cost_usd"] - main.loc[cost_ok, "baseline_cost_usd"]
    dur_delta = (
        main.loc[dur_ok, "candidate_duration_seconds"]
        - main.loc[dur_ok, "baseline_duration_seconds"]
    )
    c_spend, c_per = _spend(main["candidate_cost_usd"].astype(float), int(cp.sum()))
    b_spend, b_per = _spend(main["baseline_cost_usd"].astype(float), int(bp.sum()))
    excluded = pairs["excluded"]
    task_of = main["_task" if "_task" in main else "task_id"].to_numpy()
    effect_fields = paired_effects(
        task_of,
        main["candidate_overall"].to_numpy(dtype=float, na_value=np.nan),
        main["baseline_overall"].to_numpy(dtype=float, na_value=np.nan),
        cp,
        bp,
        task_of[cost_ok],
        cost_delta.to_numpy(dtype=float),
        task_of[dur_ok],
        dur_delta.to_numpy(dtype=float),
    )
    return {
        "candidate_config": candidate,
        "candidate_run_id": meta["candidate_run_id"],
        "baseline_config": baseline,
        "baseline_run_id": meta["baseline_run_id"],
        "primary_scorer": meta["primary_scorer"],
        "pairs_matched": len(pairs),
        "pairs": len(main),
        **_counts(cp, bp),
        "infra_excluded": int((excluded == "infrastructure").sum()),
        "unscored_excluded": int((excluded == "unscored").sum()),
        "holdout_pairs": len(hold),
        **_counts(hcp, hbp, "holdout_"),
        "unpaired_candidate": meta["unpaired_candidate"],
        "unpaired_baseline": meta["unpaired_baseline"],
        "tasks": len(per_task),
        "candidate_tasks_all_pass": int((per_task["c"] == per_task["n"]).sum()),
        "baseline_tasks_all_pass": int((per_task["b"] == per_task["n"]).sum()),
        **_sign_and_cost(
            wins,
            losses,
            diff,
            cost_ok,
            cost_delta,
            dur_ok,
            dur_delta,
            (c_spend, b_spend, c_per, b_per),
        ),
        **effect_fields,
    }


def _sign_and_cost(
    wins: int,
    losses: int,
    diff: np.ndarray,
    cost_ok: np.ndarray,
    cost_delta: np.ndarray,
    dur_ok: np.ndarray,
    dur_delta: np.ndarray,
    spend: tuple[object, object, object, object],
) -> dict:
    """The sign test, cost/duration deltas and spend fields shared by both comparison paths."""
    c_spend, b_spend, c_per, b_per = spend
    return {
        "sign_wins": wins,
        "sign_losses": losses,
        "sign_ties": int((diff == 0).sum()),
        "sign_test_p": sign_test_p(wins, losses),
        "cost_pairs": int(cost_ok.sum()),
        "cost_delta_mean_usd": float(cost_delta.mean()) if len(cost_delta) else None,
        "duration_pairs": int(dur_ok.sum()),
        "duration_delta_mean_seconds": float(dur_delta.mean()) if len(dur_delta) else None,
        "candidate_spend_usd": c_spend,
        "baseline_spend_usd": b_spend,
        "candidate_cost_per_accepted_usd": c_per,
        "baseline_cost_per_accepted_usd": b_per,
    }


def compare_all(
    trials: pd.DataFrame,
    scores: pd.DataFrame,
    baseline_config: str | None = None,
    *,
    per_trial: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Every other config of one run against the baseline config, one row each."""
    pt = per_trial if per_trial is not None else trial_overall(trials, scores)
    single_run(pt, "compare_all")
    configs = [str(c) for c in pd.unique(pt["config_id"])]  # (a categorical: on its codes)
    if baseline_config is None:
        # the first is_baseline trial's config (its row only: not a copy of every such row)
        flags = (
            pt["is_baseline"].to_numpy(dtype=bool, na_value=False)
            if "is_baseline" in pt
            else np.zeros(len(pt), dtype=bool)
        )
        first = np.flatnonzero(flags)[:1]
        baseline_config = (
            str(pt["config_id"].iloc[int(first[0])])
            if len(first)
            else (configs[0] if configs else None)
        )
    others = [cfg for cfg in configs if cfg != baseline_config]
    if not others:
        return pd.DataFrame([])
    fast = _FastPairs(pt)
    # each comparison's pairs reduced to per-task sums as soon as it is counted (seven
    # comparisons' pairs of a million trials held at once were ~50 MiB of the peak)
    found = []
    for cfg in others:
        parts = fast.counted(cfg, str(baseline_config))
        found.append(None if parts is None else (parts[0], paired_sums(parts[1])))
        del parts
    # (the effects of every comparison at once: those over as many tasks share their
    # resamples, which at thousands of tasks are most of the work)
    effects = iter(effects_of_sums([parts[1] for parts in found if parts is not None]))
    rows = [
        {**parts[0], **next(effects)}
        if parts is not None
        else paired_comparison(trials, scores, cfg, str(baseline_config), per_trial=pt)
        for cfg, parts in zip(others, found, strict=True)
    ]
    return pd.DataFrame(rows)


# the most (config, key) slots _FastPairs holds at once (int32 each: 32 MiB; a million trials
# of 8 configs take 1M)
_SLOTS_LIMIT = 2**23
# per-trial flags of _FastPairs, packed in one byte: two gathers per pair instead of ten
_BAD, _HAS_PASS, _PASSED, _HOLDOUT, _SUCC = 1, 2, 4, 8, 16


_NO_TRIAL = 32  # the flags of a (task, repetition) a config has no trial for
_PAIR_CODES = 1 << 12  # a pair's code: the candidate's flags | the baseline's << 6


class _PairClasses(NamedTuple):
    """What a pair's code says, one boolean per code (see `_FastPairs.counted`)."""

    matched: np.ndarray  # both configs have a trial there
    infra: np.ndarray  # excluded: an infrastructure outcome or an inconclusive primary
    unscored: np.ndarray  # excluded: a side without a primary score
    main: np.ndarray  # counted, not holdout
    hold: np.ndarray  # counted, holdout
    cp: np.ndarray  # the candidate passed
    bp: np.ndarray  # the baseline passed
    both_succeeded: np.ndarray


def _pair_classes() -> _PairClasses:
    code = np.arange(_PAIR_CODES)
    fc, fb = code & 63, code >> 6
    matched = ((fc | fb) & _NO_TRIAL) == 0
    infra = matched & (((fc | fb) & _BAD) > 0)
    unscored = matched & ~infra & (((fc & fb) & _HAS_PASS) == 0)
    kept = matched & ~infra & ~unscored
    holdout = ((fc | fb) & _HOLDOUT) > 0
    return _PairClasses(
        matched,
        infra,
        unscored,
        kept & ~holdout,
        kept & holdout,
        (fc & _PASSED) > 0,
        (fb & _PASSED) > 0,
        ((fc & fb) & _SUCC) > 0,
    )


class _ByKey(NamedTuple):
    """One config's trials laid out by (task, repetition) code: their flags, so that pairing
    two configs is elementwise, and their rows, so that what a comparison reads of the pairs
    it counts (task, cost, duration, score) is gathered for those pairs only."""

    flags: np.ndarray  # uint16: the trial's flags, _NO_TRIAL where none
    rows: np.ndarray  # the trial's row (-1 where none)
    trials: int
    first: int  # the trial at the smallest code


_PAIR = _pair_classes()


class _FastPairs:
    """compare_all on integer codes: per-trial flags are computed once (packed in a byte),
    every config's trials are placed in a table by (task, repetition) code, so a pair is the
    same slot of two configs' tables (in key order, as a sort-merge would give them), and
    per-task signs come from bincount. Falls back (returns None) when a side repeats a
    (task, repetition), where the generic merge defines the pairs."""

    def __init__(self, pt: pd.DataFrame) -> None:
        self.pt = pt
        self._table: np.ndarray | None = None  # every config's slots (_make_slots)
        self._bad = np.zeros(0, dtype=bool)
        self._one: dict[str, np.ndarray | None] = {}
        self._keyed: dict[str, _ByKey | None] = {}
        self._made = False
        self.first_row = np.zeros(0, dtype=np.int64)
        # int32 codes (not int64): a million trials' arrays are a good part of the peak RSS
        cfg, cfg_u = str_codes(pt["config_id"])
        self.cfg = cfg.astype(np.int32)
        self.cfg_index = {str(c): i for i, c in enumerate(cfg_u)}
        task, task_u = str_codes(pt["task_id"])
        self.task = task.astype(np.int32)
        self.n_tasks = len(task_u)
        del cfg, task
        rep_codes, rep_u = _repetition_codes(pt["repetition"])
        span = len(rep_u) + 1
        wide = (len(task_u) + 1) * span >= 2**31
        # task * span + repetition, in place on one array of the key's width (no int64 copy
        # of a million codes where int32 holds them); -1 where either part is null
        key = self.task.astype(np.int64 if wide else np.int32)
        key *= span
        np.add(key, rep_codes, out=key, casting="unsafe")  # (in range: checked by `wide`)
        missing = (self.task < 0) | (rep_codes < 0)
        if missing.any():
            key[missing] = -1
        self.key = key
        self.n_keys = (len(task_u) + 1) * span
        del rep_codes, missing
        out_codes, out_u = str_codes(pt["outcome"])
        # each outcome's flags looked up once, then gathered per trial (-1, a null: none)
        by_outcome = np.array(
            [
                (_BAD if u in INFRA_OUTCOMES else 0) | (_SUCC if u == OUTCOME_SUCCEEDED else 0)
                for u in out_u
            ]
            + [0],
            dtype=np.uint8,
        )
        flags = by_outcome[out_codes]
        del out_codes
        passed = pt["passed"].to_numpy(dtype=float, na_value=np.nan)
        # (a bool array viewed as 0/1 bytes, times its flag's bit: no int64 temporaries)
        _set_flag(
            flags,
            is_value(pt["primary_status"], SCORE_INCONCLUSIVE),
            _BAD,
        )
        _set_flag(flags, ~np.isnan(passed), _HAS_PASS)
        _set_flag(flags, passed == 1.0, _PASSED)
        if "holdout" in pt:
            _set_flag(flags, pt["holdout"].to_numpy(dtype=bool, na_value=False), _HOLDOUT)
        self.flags = flags
        del passed
        self.cost = (
            pt["cost_usd"].to_numpy(dtype=float, na_value=np.nan)
            if "cost_usd" in pt
            else np.full(len(pt), np.nan)
        )
        self.overall = (
            pt["overall"].to_numpy(dtype=float, na_value=np.nan)
            if "overall" in pt
            else np.full(len(pt), np.nan)
        )
        self.dur = (
            pt["duration_seconds"].to_numpy(dtype=float, na_value=np.nan)
            if "duration_seconds" in pt
            else np.full(len(pt), np.nan)
        )

    def _slot(self, config: str) -> np.ndarray | None:
        """The config's trial row at every (task, repetition) code (-1: none); None when one
        of its trials has no code or two share one."""
        if not self._made:
            self._make_slots()
            self._made = True
        i = self.cfg_index[config]
        if self._table is not None:
            return None if self._bad[i] else self._table[i]
        if config not in self._one:  # (the baseline's table serves every comparison)
            self._one = {config: self._make_slot(config)}
        return self._one[config]

    def _make_slot(self, config: str) -> np.ndarray | None:
        """One config's slots (when a table of every config's would be too big)."""
        rows = np.flatnonzero(self.cfg == self.cfg_index[config])
        keys = self.key[rows]
        if len(keys) and keys.min() < 0:
            return None
        slot = np.full(self.n_keys, -1, dtype=np.int32 if len(self.pt) < 2**31 else np.int64)
        slot[keys] = rows
        return slot if np.array_equal(slot[keys], rows) else None

    def _make_slots(self) -> None:
        """Every config's slots in one pass over the trials (a row per config code)."""
        n, n_cfg = len(self.pt), len(self.cfg_index)
        if self.n_keys > 2 * n + 1024:  # sparse (task, repetition) codes: their ranks
            known = self.key >= 0
            ranks = np.unique(self.key[known], return_inverse=True)[1].reshape(-1)
            self.key[known] = ranks
            self.n_keys = int(ranks.max()) + 1 if len(ranks) else 1
        if n_cfg * self.n_keys > _SLOTS_LIMIT:
            self.first_row = first_rows(self.cfg.astype(np.int64), n_cfg)
            return  # (then _slot makes one config's at a time)
        table = np.full((n_cfg, self.n_keys), -1, dtype=np.int32 if n < 2**31 else np.int64)
        has = (self.cfg >= 0) & (self.key >= 0)
        every = bool(has.all())
        rows = np.arange(n) if every else np.flatnonzero(has)
        cfg = self.cfg if every else self.cfg[rows]
        # each row's slot as one flat position (computed once, not per indexing of the table)
        at = cfg.astype(np.int64) * self.n_keys
        at += self.key if every else self.key[rows]
        flat = table.reshape(-1)  # (a view: writes land in `table`)
        flat[at] = rows
        # a config with a trial without a key, or two trials on one key (a later row took the
        # slot), has no table: the generic merge defines its pairs
        bad = np.bincount(self.cfg[(self.cfg >= 0) & (self.key < 0)], minlength=n_cfg) > 0
        lost = flat[at] != rows
        if lost.any():
            bad |= np.bincount(cfg[lost], minlength=n_cfg) > 0
        self._table, self._bad = table, bad
        # a config's first row is its smallest slot (every row of it has one, unless bad)
        first = np.where(table >= 0, table, n).min(axis=1, initial=n)
        slow = np.flatnonzero(bad)  # (those may have rows without a slot)
        if len(slow):
            exact = first_rows(self.cfg.astype(np.int64), n_cfg)
            first[slow] = exact[slow]
        self.first_row = np.where(first < n, first, -1)

    def _by_key(self, config: str, keep: bool = False) -> _ByKey | None:
        """`config`'s trials by key (None: no slots, the generic route); `keep`: kept for
        the next call (the baseline's serve every comparison)."""
        if config in self._keyed:
            return self._keyed[config]
        slot = self._slot(config)
        if slot is None:
            return None
        have = slot >= 0
        rows = slot[have]
        flags = np.full(len(slot), _NO_TRIAL, dtype=np.uint16)
        flags[have] = self.flags[rows]
        keyed = _ByKey(flags, slot, len(rows), int(rows[0]) if len(rows) else -1)
        if keep:
            self._keyed = {config: keyed}
        return keyed

    def counted(self, candidate: str, baseline: str) -> tuple[dict, PairedInputs] | None:
        """A paired comparison's counted fields, and what its effect fields are computed from
        (`effects.paired_sums`, then `effects_of_sums` for all comparisons at once); None when
        the pair must take the general route (a config without trials, or whose trials repeat
        a key)."""
        if candidate not in self.cfg_index or baseline not in self.cfg_index:
            return None
        cand, base = self._by_key(candidate), self._by_key(baseline, keep=True)
        if cand is None or base is None or cand.trials == 0 or base.trials == 0:
            return None
        n_c, n_b = cand.trials, base.trials
        # a pair's two flag bytes as one code: its class (no pair, excluded, holdout, who
        # passed) is a lookup, and the counts of every class one histogram
        code = cand.flags | (base.flags << 6)
        hist = np.bincount(code, minlength=_PAIR_CODES)
        main = _PAIR.main[code]
        mcode = code[main]
        cp, bp = _PAIR.cp[mcode], _PAIR.bp[mcode]
        matched = int(hist[_PAIR.matched].sum())

        def n(mask: np.ndarray) -> int:
            return int(hist[mask].sum())

        infra_n, unscored_n = n(_PAIR.infra), n(_PAIR.unscored)
        main_counts = {
            "both_pass": n(_PAIR.main & _PAIR.cp & _PAIR.bp),
            "candidate_only": n(_PAIR.main & _PAIR.cp & ~_PAIR.bp),
            "baseline_only": n(_PAIR.main & ~_PAIR.cp & _PAIR.bp),
            "neither": n(_PAIR.main & ~_PAIR.cp & ~_PAIR.bp),
        }
        hold_counts = {
            "holdout_both_pass": n(_PAIR.hold & _PAIR.cp & _PAIR.bp),
            "holdout_candidate_only": n(_PAIR.hold & _PAIR.cp & ~_PAIR.bp),
            "holdout_baseline_only": n(_PAIR.hold & ~_PAIR.cp & _PAIR.bp),
            "holdout_neither": n(_PAIR.hold & ~_PAIR.cp & ~_PAIR.bp),
        }
        # the counted pairs' trial rows: both sides have a trial there
        c_rows, b_rows = cand.rows[main], base.rows[main]
        task = self.task[c_rows].astype(np.int64)
        # per task: pairs, candidate passes, baseline passes, from one count of
        # (task, candidate passed, baseline passed)
        per = np.bincount(task * 4 + (cp * 2 + bp), minlength=4 * self.n_tasks).reshape(-1, 4)
        n_t = per.sum(axis=1)
        c_t = (per[:, 2] + per[:, 3]).astype(float)
        b_t = (per[:, 1] + per[:, 3]).astype(float)
        seen = n_t > 0
        diff = (c_t - b_t)[seen]
        wins, losses = int((diff > 0).sum()), int((diff < 0).sum())
        both_ok = _PAIR.both_succeeded[mcode]
        c_cost, b_cost = self.cost[c_rows], self.cost[b_rows]
        c_dur, b_dur = self.dur[c_rows], self.dur[b_rows]
        cost_ok = both_ok & ~np.isnan(c_cost) & ~np.isnan(b_cost)
        dur_ok = both_ok & ~np.isnan(c_dur) & ~np.isnan(b_dur)
        cost_delta = c_cost[cost_ok] - b_cost[cost_ok]
        dur_delta = c_dur[dur_ok] - b_dur[dur_ok]
        c_spend, c_per = _spend_of(c_cost, main_counts["both_pass"] + main_counts["candidate_only"])
        b_spend, b_per = _spend_of(b_cost, main_counts["both_pass"] + main_counts["baseline_only"])
        pt = self.pt
        # (the rows a sort by key would have put first; the first row of the config)
        c_first_key, b_first_key = cand.first, base.first
        c_first_row = int(self.first_row[self.cfg_index[candidate]])
        return {
            "candidate_config": candidate,
            "candidate_run_id": str(pt["run_id"].iloc[c_first_key]),
            "baseline_config": baseline,
            "baseline_run_id": str(pt["run_id"].iloc[b_first_key]),
            "primary_scorer": nan_to_none(pt["primary_scorer"].iloc[c_first_row]),
            "pairs_matched": matched,
            "pairs": len(mcode),
            **main_counts,
            "infra_excluded": infra_n,
            "unscored_excluded": unscored_n,
            "holdout_pairs": n(_PAIR.hold),
            **hold_counts,
            "unpaired_candidate": n_c - matched,
            "unpaired_baseline": n_b - matched,
            "tasks": int(seen.sum()),
            "candidate_tasks_all_pass": int((c_t[seen] == n_t[seen]).sum()),
            "baseline_tasks_all_pass": int((b_t[seen] == n_t[seen]).sum()),
            **_sign_and_cost(
                wins,
                losses,
                diff,
                cost_ok,
                cost_delta,
                dur_ok,
                dur_delta,
                (c_spend, b_spend, c_per, b_per),
            ),
        }, PairedInputs(
            task,
            self.overall[c_rows],
            self.overall[b_rows],
            cp,
            bp,
            task[cost_ok],
            cost_delta,
            task[dur_ok],
            dur_delta,
        )


def _set_flag(flags: np.ndarray, where: np.ndarray, bit: int) -> None:
    """`flags |= bit` where `where` holds (uint8 flags, a bool mask of the same length)."""
    flags |= where.view(np.uint8) * np.uint8(bit)


def _repetition_codes(values: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(a code per trial, -1 when null; the distinct values): integers in a compact range
    by their offset from the smallest (no hash table), anything else factorized."""
    if isinstance(values.dtype, np.dtype) and values.dtype.kind in "iu" and len(values):
        v = values.to_numpy()
        lo, hi = int(v.min()), int(v.max())
        if hi - lo <= 8 * len(v) + 1024:
            return (v - lo).astype(np.int64), np.arange(lo, hi + 1)
    codes, uniques = pd.factorize(values, use_na_sentinel=True)
    return codes, np.asarray(uniques)


def _spend_of(cost: np.ndarray, passes: int) -> tuple[float | None, float | None]:
    """`_spend` of a float array (no Series made)."""
    if len(cost) == 0 or np.isnan(cost).any():
        return None, None
    total = float(cost.sum())
    return total, (total / passes if passes else None)
