"""Performance check of the results tables on one million synthetic trials.

Generates 50 tasks x 8 configs x 2,500 repetitions = 1,000,000 trial rows and, for five
scorers (checks, ci and three judge criteria), ~5,000,000 score rows plus 2 % rescore rows
(older rows superseded by newer ones), all with numpy vectorized ops. Then times every derived
table of `bench_pipeline.results` and prints time per table, total time and peak memory.

    .venv/bin/python perf/analysis.py [--tasks 50 --configs 8 --reps 2500]
"""

from __future__ import annotations

import argparse
import resource
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench_pipeline import results as R  # noqa: E402

SCORERS = [
    ("checks", "checks", 1.0),
    ("ci", "ci", 1.0),
    ("llm_judge:correctness", "llm_judge", 0.6),
    ("llm_judge:efficiency", "llm_judge", 0.4),
    ("llm_judge:verbosity", "llm_judge", 0.0),
]
TAG_CHOICES = [[], ["api"], ["db"], ["api", "security"], ["concurrency", "db"], ["ui"]]
OUTCOMES = np.array(
    ["succeeded", "agent_error", "budget_exceeded", "invalidated", "workspace_error"], dtype=object
)
STATUSES = np.array(["scored", "error", "inconclusive", "not_scored", "missing"], dtype=object)


def _cat(codes: np.ndarray, names: list[str]) -> pd.Categorical:
    return pd.Categorical.from_codes(codes, categories=names)


def generate(
    n_tasks: int = 50, n_configs: int = 8, reps: int = 2500, seed: int = 7, run_id: str = "run-perf"
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Synthetic TRIALS and SCORES frames (the columns the results package reads).

    String columns of TRIALS are pandas `str` (as read from Parquet); the low-cardinality
    string columns of SCORES are categoricals (as read from dictionary-encoded Parquet) and
    its trial_id is an arrow-backed string column: no Python object per row anywhere.
    """
    rng = np.random.default_rng(seed)
    n = n_tasks * n_configs * reps
    task_idx = np.repeat(np.arange(n_tasks), n_configs * reps)
    config_idx = np.tile(np.repeat(np.arange(n_configs), reps), n_tasks)
    rep = np.tile(np.arange(1, reps + 1), n_tasks * n_configs).astype(np.int32)
    task_names = [f"task-{i:03d}" for i in range(n_tasks)]
    config_names = [f"cfg-{i}" for i in range(n_configs)]
    trial_arr = pc.binary_join_element_wise(
        pa.array(task_names).take(pa.array(task_idx)),
        pa.array(config_names).take(pa.array(config_idx)),
        pa.array(rep).cast(pa.string()),
        "/",
    )
    task_tags = [TAG_CHOICES[i % len(TAG_CHOICES)] for i in range(n_tasks)]
    tags_arr = pa.array(task_tags, type=pa.list_(pa.string())).take(pa.array(task_idx))

    outcome_i = rng.choice(len(OUTCOMES), size=n, p=[0.9, 0.05, 0.03, 0.01, 0.01])
    skill = 0.45 + 0.05 * config_idx + rng.normal(0, 0.1, n_tasks)[task_idx]
    cost = (0.05 + 0.04 * config_idx) * rng.lognormal(0, 0.3, n)
    unknown = (config_idx == n_configs - 1) & (rng.random(n) < 0.1)
    cost[unknown] = np.nan
    trials = pa.table({"trial_id": trial_arr}).to_pandas()
    trials.insert(0, "run_id", pd.Series(_cat(np.zeros(n, dtype=np.int8), [run_id])).astype("str"))
    strs = {
        "suite": "perf",
        "task_set_revision": "rev-1",
        "difficulty": "medium",
        "agent": "coder",
        "agent_kind": "anthropic",
        "effort": "medium",
    }
    for col, value in strs.items():
        trials[col] = pd.Series(_cat(np.zeros(n, dtype=np.int8), [value])).astype("str")
    trials["task_id"] = pd.Series(_cat(task_idx, task_names)).astype("str")
    trials["config_id"] = pd.Series(_cat(config_idx, config_names)).astype("str")
    trials["repetition"] = rep
    trials["tags"] = pd.Series(tags_arr.to_numpy(zero_copy_only=False), dtype=object)
    trials["holdout"] = (task_idx % 10) == 9
    trials["model"] = pd.Series(_cat(config_idx, [f"model-{c}" for c in config_names])).astype(
        "str"
    )
    trials["is_baseline"] = config_idx == 0
    trials["outcome"] = pd.Series(_cat(outcome_i, list(OUTCOMES))).astype("str")
    trials["iterations"] = rng.integers(1, 4, n).astype(np.int32)
    trials["cost_usd"] = cost
    trials["cost_unknown_reason"] = pd.Series(
        _cat(np.where(unknown, 0, -1), ["agent reported no usage"])
    ).astype("str")
    trials["duration_seconds"] = rng.gamma(4.0, 30.0, n) * (1 + 0.1 * config_idx)
    trials["attempt_no"] = np.ones(n, dtype=np.int32)

    n_s = len(SCORERS)
    t_rows = np.repeat(np.arange(n, dtype=np.int64), n_s)
    s_idx = np.tile(np.arange(n_s, dtype=np.int8), n)
    p_pass = np.clip(skill, 0.02, 0.98)[t_rows]
    value = (rng.random(n * n_s) < p_pass).astype(float)
    judge = s_idx >= 2
    value[judge] = np.round(np.clip(p_pass[judge] + rng.normal(0, 0.15, judge.sum()), 0, 1), 2)
    del p_pass
    failed = np.isin(outcome_i, [1, 2])[t_rows]
    value[failed] = 0.0
    status_i = rng.choice(len(STATUSES), size=n * n_s, p=[0.95, 0.01, 0.02, 0.01, 0.01])
    status_i[failed] = 0
    value[status_i != 0] = np.nan
    # 2 % of score rows were rescored a day later: the newer row supersedes the older one.
    redo = np.flatnonzero(rng.random(n * n_s) < 0.02)
    rows = np.concatenate([np.arange(n * n_s), redo])
    seconds = rng.integers(0, 3600, n * n_s)
    scored_at = np.concatenate([seconds, seconds[redo] + 86400])
    s_all = s_idx[rows]
    st = np.concatenate([status_i, np.zeros(len(redo), dtype=status_i.dtype)])
    val = np.concatenate([value, np.where(judge[redo], 0.5, 1.0)])
    tr = t_rows[rows]
    t0 = pd.Timestamp("2025-01-01", tz="UTC")
    scores = pa.table({"trial_id": trial_arr.take(pa.array(tr))}).to_pandas()
    scores.insert(
        0, "run_id", pd.Categorical.from_codes(np.zeros(len(tr), dtype=np.int8), [run_id])
    )
    scores["task_id"] = _cat(task_idx[tr], task_names)
    scores["config_id"] = _cat(config_idx[tr], config_names)
    scores["repetition"] = rep[tr]
    scores["scorer"] = _cat(s_all, [s[0] for s in SCORERS])
    group_names = list(dict.fromkeys(s[1] for s in SCORERS))
    group_of = np.array([group_names.index(s[1]) for s in SCORERS], dtype=np.int8)
    scores["scorer_group"] = _cat(group_of[s_all], group_names)
    scores["weight"] = np.array([s[2] for s in SCORERS])[s_all]
    scores["status"] = _cat(st.astype(np.int8), list(STATUSES))
    scores["value"] = val
    scores["cost_usd"] = np.where(s_all >= 2, 0.002, np.nan)
    scores["rescore_id"] = _cat(
        np.concatenate([np.zeros(n * n_s, dtype=np.int8), np.ones(len(redo), dtype=np.int8)]),
        ["initial", "rescore-1"],
    )
    scores["scored_at"] = t0 + pd.to_timedelta(scored_at, unit="s")
    return trials, scores


def _peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _status_mib(field: str) -> float | None:
    """VmRSS / VmHWM from /proc (Linux); None elsewhere."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def _reset_peak() -> bool:
    """Reset the kernel's peak-RSS mark (VmHWM) to the current RSS, so the peak of the derived
    tables is measured apart from the generation. Linux only."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _timed(label: str, fn: Callable[[], object], timings: list[tuple[str, float]]) -> object:
    start = time.perf_counter()
    out = fn()
    timings.append((label, time.perf_counter() - start))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=50)
    parser.add_argument("--configs", type=int, default=8)
    parser.add_argument("--reps", type=int, default=2500)
    args = parser.parse_args(argv)

    start = time.perf_counter()
    trials, scores = generate(args.tasks, args.configs, args.reps)
    gen_s = time.perf_counter() - start
    print(f"generated {len(trials):,} trials and {len(scores):,} score rows in {gen_s:.2f} s")
    mib = (trials.memory_usage(deep=True).sum() + scores.memory_usage(deep=True).sum()) / 2**20
    print(f"input frames: {mib:,.0f} MiB; peak RSS after generation {_peak_mib():,.0f} MiB")

    import gc

    gc.collect()
    rss_before = _status_mib("VmRSS")
    peak_reset = _reset_peak()
    timings: list[tuple[str, float]] = []
    pt = _timed(
        "per-trial results (trial_overall)", lambda: R.trial_overall(trials, scores), timings
    )
    table = _timed(
        "config table (+CIs, pass@k)", lambda: R.config_table(trials, scores, per_trial=pt), timings
    )
    grid = _timed(
        "task x config grid", lambda: R.task_config_grid(trials, scores, per_trial=pt), timings
    )
    _timed("recommendations", lambda: R.recommend(table), timings)
    frontier = _timed("pareto frontier", lambda: R.pareto_frontier(table), timings)
    by_tag = _timed(
        "by tag (table)", lambda: R.config_table_by_tag(trials, scores, per_trial=pt), timings
    )
    _timed("by tag (recommendations)", lambda: R.recommendations_by_tag(by_tag), timings)
    comparison = _timed(
        "paired comparison (7 configs vs baseline)",
        lambda: R.compare_all(trials, scores, per_trial=pt),
        timings,
    )
    _timed("regressions", lambda: R.detect_regressions(table, table), timings)
    derived = sum(t for _, t in timings)
    chart = _timed("pareto chart (SVG)", lambda: R.pareto_chart_svg(frontier), timings)
    _timed(
        "HTML report",
        lambda: R.render_report_html(
            {"run_id": "run-perf", "suite": "perf"},
            table,
            grid,
            R.recommend(table),
            frontier,
            chart,
            by_tag=by_tag,
            comparison=comparison,
        ),
        timings,
    )
    extra: list[tuple[str, float]] = []
    latest = _timed("latest_scores (helper, 5.1M rows in)", lambda: R.latest_scores(scores), extra)

    width = max(len(label) for label, _ in timings + extra)
    for label, seconds in timings:
        print(f"  {label:<{width}}  {seconds:7.3f} s")
    print(f"  {'TOTAL derived tables (per-trial .. regressions)':<{width}}  {derived:7.3f} s")
    print(f"  {'TOTAL incl. chart and report':<{width}}  {sum(t for _, t in timings):7.3f} s")
    for label, seconds in extra:
        print(f"  {label:<{width}}  {seconds:7.3f} s  ({len(latest):,} rows kept)")
    print(f"peak memory (ru_maxrss, whole process): {_peak_mib():,.0f} MiB")
    hwm = _status_mib("VmHWM")
    if peak_reset and hwm is not None and rss_before is not None:
        print(
            f"derived tables: RSS before {rss_before:,.0f} MiB (the input frames), peak during "
            f"{hwm:,.0f} MiB, increase {hwm - rss_before:,.0f} MiB"
        )
    print(
        table[
            ["config_id", "trials", "overall", "pass_rate", "avg_cost_usd", "cost_coverage"]
        ].to_string(index=False)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
