"""Plain-text rendering of result tables for the terminal."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from bench_pipeline.formats import display
from bench_pipeline.runs.cancel import CancelReport

_num = display.number
money = display.usd


def render_table(rows: list[dict[str, str]], columns: list[str]) -> str:
    widths = {
        c: max(len(c), *(len(r.get(c, "")) for r in rows)) if rows else len(c) for c in columns
    }
    lines = [
        "  ".join(c.ljust(widths[c]) for c in columns),
        "  ".join("-" * widths[c] for c in columns),
    ]
    lines += ["  ".join(r.get(c, "").ljust(widths[c]) for c in columns) for r in rows]
    return "\n".join(lines)


def scorer_names(table: pd.DataFrame) -> list[str]:
    return [c[len("score_") :] for c in table.columns if c.startswith("score_")]


def config_rows(table: pd.DataFrame) -> tuple[list[dict[str, str]], list[str]]:
    scorers = scorer_names(table)
    columns = [
        "config",
        "overall [95% CI]",
        *scorers,
        "pass rate [95% CI]",
        "avg cost (coverage)",
        "avg s",
        "succeeded",
        "iters",
    ]
    has_delta = "delta_overall" in table.columns and table["delta_overall"].notna().any()
    if has_delta:
        columns += ["Δ overall", "Δ cost"]
    rows = []
    for _, r in table.iterrows():
        row = {
            "config": str(r["config_id"])
            + (" (original)" if bool(r.get("is_baseline")) else "")
            + (" (control)" if bool(r.get("is_control")) else ""),
            "overall [95% CI]": f"{_num(r.get('overall'))} [{_num(r.get('overall_ci_low'), 2)}, {_num(r.get('overall_ci_high'), 2)}]",
            "pass rate [95% CI]": f"{_num(r.get('pass_rate'))} [{_num(r.get('pass_rate_ci_low'), 2)}, {_num(r.get('pass_rate_ci_high'), 2)}]",
            "avg cost (coverage)": f"{money(r.get('avg_cost_usd'))} ({_num(r.get('cost_coverage'), 2)})",
            "avg s": _num(r.get("avg_duration_seconds"), 2),
            "succeeded": f"{int(r.get('trials_succeeded') or 0)}/{int(r.get('trials') or 0)}",
            "iters": _num(r.get("avg_iterations"), 2),
        }
        for s in scorers:
            scored, of = r.get(f"scored_{s}"), r.get(f"of_{s}")
            counts = (
                f" ({int(scored)}/{int(of)})"
                if scored is not None and of is not None and not pd.isna(of)
                else ""
            )
            row[s] = f"{_num(r.get(f'score_{s}'))}{counts}"
        if has_delta:
            row["Δ overall"] = _signed(r.get("delta_overall"))
            row["Δ cost"] = _signed(r.get("delta_avg_cost_usd"), money_fmt=True)
        rows.append(row)
    return rows, columns


def _signed(v: Any, money_fmt: bool = False) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{float(v):+.4f}" if money_fmt else f"{float(v):+.3f}"


def render_config_table(table: pd.DataFrame) -> str:
    rows, columns = config_rows(table)
    out = render_table(rows, columns)
    unknown = (
        table[table.get("cost_coverage", pd.Series(dtype=float)) < 1]
        if "cost_coverage" in table
        else table.iloc[:0]
    )
    if len(unknown):
        notes = [f"  {r['config_id']}: {r.get('cost_unknown')}" for _, r in unknown.iterrows()]
        out += "\n\nUnknown cost (not counted as 0):\n" + "\n".join(notes)
    return out


# How much of a reason the text shows (a reason carries a check's description and a grader's
# error), and how many (config, scorer) pairs: `--json` and the explorer keep all of it.
REASON_CHARS = 200
UNSCORED_PAIRS = 20


def render_unscored(cells: pd.DataFrame, table: pd.DataFrame, run_id: str) -> str:
    """Per config and scorer, how many trials were not scored and why (`results.unscored`):
    the gap the config table shows as `n/of`, in words: the count per status and the reason of
    the most trials, with one trial it applies to. Empty when there is none."""
    if cells.empty:
        return ""
    of = {}
    for _, r in table.iterrows():
        for s in scorer_names(table):
            if f"of_{s}" in table and not pd.isna(r.get(f"of_{s}")):
                of[(str(r["config_id"]), s)] = int(r[f"of_{s}"])
    lines = ["Not scored (never counted against the agent):"]
    pairs = list(cells.groupby(["config_id", "scorer"], sort=False))
    for (config, scorer), part in pairs[:UNSCORED_PAIRS]:
        known = of.get((str(config), str(scorer)))
        by_status = part.groupby("status", sort=False)["trials"].sum()
        statuses = ", ".join(f"{int(n)} {status}" for status, n in by_status.items())
        lines.append(
            f"  {config} · {scorer}: {int(part['trials'].sum())}"
            + (f" of {known}" if known else "")
            + f" ({statuses})"
        )
        top = part.iloc[0]  # (the reason of the most trials: cells are ordered so)
        reason = str(top["reason"]) or "(no reason given)"
        if len(reason) > REASON_CHARS:
            reason = reason[: REASON_CHARS - 1] + "…"
        others = part["reason"].nunique() - 1
        more = f"; {others} other reason(s)" if others else ""
        example = top["example_trial_id"]
        where = f"e.g. {example} ({top['status']})" if isinstance(example, str) else top["status"]
        lines.append(f"    {where}: {reason}{more}")
    if len(pairs) > UNSCORED_PAIRS or len(cells) > len(pairs):
        rest = len(pairs) - UNSCORED_PAIRS
        lines.append(
            (f"  and {rest} more config · scorer pairs; " if rest > 0 else "  ")
            + f"every reason: `bench results {run_id} --json`, under unscored"
        )
    return "\n".join(lines)


def render_regressions(regressions: pd.DataFrame, baseline_run_id: str | None) -> str:
    """Each config's verdict against the pinned baseline: what the Δ columns mean (a drop
    within noise is not a regression). Empty when nothing was compared."""
    if baseline_run_id is None or regressions.empty:
        return ""
    lines = [f"Against baseline {baseline_run_id}:"]
    for _, r in regressions.iterrows():
        metric = str(r["metric"])
        shown = money if metric == "cost" else _num
        regressed = False if pd.isna(r.get("regressed")) else bool(r.get("regressed"))
        note, verdict, tol = r.get("note"), r.get("verdict"), r.get("tolerance")
        tolerance = (
            ""
            if pd.isna(tol)
            else f"tolerance +{float(tol):.0%}"
            if metric == "cost"
            else f"tolerance {float(tol):.3g}"
        )
        head = f"  {r['config_id']} · {metric} {shown(r.get('baseline'))} -> {shown(r.get('current'))}: "
        if isinstance(note, str):  # (its own sentence: within noise, or why not compared)
            lines.append(head + ("REGRESSION; " if regressed else "") + note)
            continue
        label = (
            "REGRESSION"
            if regressed
            else str(verdict)
            if isinstance(verdict, str)
            else "within tolerance"
        )
        detail = tolerance
        if metric == "overall" and not pd.isna(r.get("p_value")):
            detail += (
                f"; change {float(r['effect']):+.3f} over {int(r['tasks_compared'])} tasks "
                f"(95% CI {_num(r.get('ci_low'))} to {_num(r.get('ci_high'))}), "
                f"p = {float(r['p_value']):.3g}"
            )
        lines.append(head + label + (f" ({detail})" if detail else ""))
    return "\n".join(lines)


def render_failed_checks(checks: list[dict[str, Any]], shown_elsewhere: tuple[str, ...]) -> str:
    """The result checks that failed (`results.verdicts`), one line each, but for those the
    text already says in its own words (`shown_elsewhere`). Empty when none is left."""
    lines = []
    for check in checks:
        if check.get("passed") or check["check"] in shown_elsewhere:
            continue
        details = ", ".join(
            f"{k}={v}"
            for k, v in check.items()
            if k not in ("check", "passed", "severity", "description") and v not in ("", None)
        )
        lines.append(
            f"check {check['check']} failed ({check['severity']}); expected: {check['description']}"
            + (f" ({details})" if details else "")
        )
    return "\n".join(lines)


def render_recommendations(recs: dict[str, Any]) -> str:
    lines = []
    for kind, label in (
        ("best_quality", "best quality"),
        ("most_efficient", "most efficient"),
        ("lowest_cost", "lowest cost"),
    ):
        pick = recs.get(kind)
        if not pick:
            why = (recs.get("reasons") or {}).get(kind)
            lines.append(f"  {label:<15} none qualifies" + (f": {why}" if why else ""))
            continue
        extra = ", ".join(
            "free (known cost $0)"
            if k == "overall_per_usd" and v is None
            else f"{k}={_fmt_value(v)}"
            for k, v in pick.items()
            if k != "config_id"
        )
        lines.append(f"  {label:<15} {pick['config_id']}  ({extra})")
    if recs.get("controls"):
        lines.append(f"  controls (never recommended): {', '.join(recs['controls'])}")
    if recs.get("comparable") is False:
        lines.append(f"  comparable: false — {recs.get('comparable_note')}")
    if recs.get("overlap"):
        lines.append(f"  overlap: {recs.get('overlap_note')}")
    return "\n".join(lines)


def _fmt_value(v: Any) -> str:
    if v is None:
        return "unknown"
    return display.short(v, missing="nan") if isinstance(v, float) else str(v)


def render_comparison(result: dict[str, Any]) -> str:
    def f(v: Any, fmt: str = "{:.4f}") -> str:
        return "-" if v is None else fmt.format(v)

    lines = [
        f"Paired comparison of run {result['run_id']} against {result['against'] or 'the baseline config'}"
    ]
    if not result["comparisons"]:
        lines.append("  nothing to compare")
    for c in result["comparisons"]:
        lines += [
            "",
            f"{c['candidate_config']} ({c['candidate_run_id']}) vs {c['baseline_config']} ({c['baseline_run_id']}), primary scorer {c.get('primary_scorer')}",
            f"  pairs counted {c['pairs']} of {c['pairs_matched']}: both pass {c['both_pass']}, candidate only {c['candidate_only']}, "
            f"baseline only {c['baseline_only']}, neither {c['neither']}",
            f"  excluded: infrastructure {c['infra_excluded']}, unscored {c['unscored_excluded']}; holdout pairs {c['holdout_pairs']} "
            f"(both {c['holdout_both_pass']}, candidate only {c['holdout_candidate_only']}, baseline only {c['holdout_baseline_only']})",
            f"  tasks passing every repetition: candidate {c['candidate_tasks_all_pass']}, baseline {c['baseline_tasks_all_pass']} of {c['tasks']}",
            f"  sign test over unique tasks: {c['sign_wins']} better, {c['sign_losses']} worse, {c['sign_ties']} tied, two-sided p = {f(c['sign_test_p'])}",
            f"  overall difference ({c.get('overall_pairs')} pairs): {f(c.get('overall_delta'), '{:+.4f}')} "
            f"[95% CI {f(c.get('overall_delta_ci_low'), '{:+.4f}')}, {f(c.get('overall_delta_ci_high'), '{:+.4f}')}, "
            f"bootstrap over tasks], sign-flip p = {f(c.get('overall_delta_p'))}",
            f"  pass-rate difference: {f(c.get('pass_rate_delta'), '{:+.4f}')} "
            f"[95% CI {f(c.get('pass_rate_delta_ci_low'), '{:+.4f}')}, {f(c.get('pass_rate_delta_ci_high'), '{:+.4f}')}], "
            f"McNemar exact p = {f(c.get('mcnemar_p'))}",
            f"  cost delta per trial (both succeeded, {c['cost_pairs']} pairs): {f(c['cost_delta_mean_usd'], '${:+.4f}')}; "
            f"duration delta ({c['duration_pairs']} pairs): {f(c['duration_delta_mean_seconds'], '{:+.2f}s')}",
            f"  95% CI of the cost delta: [{f(c.get('cost_delta_ci_low_usd'), '${:+.4f}')}, {f(c.get('cost_delta_ci_high_usd'), '${:+.4f}')}], "
            f"of the duration delta: [{f(c.get('duration_delta_ci_low_seconds'), '{:+.2f}s')}, {f(c.get('duration_delta_ci_high_seconds'), '{:+.2f}s')}]",
            f"  cost per accepted result (failed trials' spend included): candidate {f(c['candidate_cost_per_accepted_usd'], '${:.4f}')}, "
            f"baseline {f(c['baseline_cost_per_accepted_usd'], '${:.4f}')}",
        ]
    return "\n".join(lines)


def render_estimate(est: dict[str, Any]) -> str:
    def usd(v: Any) -> str:
        return "unbounded" if v is None else f"${v:.2f}"

    lines = [
        f"{est['launch']}: suite {est['suite']}, {est['tasks']} tasks x {est['configs']} configs x {est['repetitions']} reps = {est['trials']} trials",
        f"cost cap (sum of budgets): {usd(est['cost_cap_usd'])}",
    ]
    for c in est["per_config"]:
        forecast = "unknown" if c["forecast_usd"] is None else f"${c['forecast_usd']:.2f}"
        lines.append(
            f"  {c['config_id']:<16} {c['kind']:<10} {c['model'] or '-':<20} {c['trials']:>4} trials  cap {usd(c['cost_cap_usd']):>10}  forecast {forecast} ({c['forecast_basis']})"
        )
    ad = est.get("adaptive")
    if ad:
        known = (
            ""
            if ad["forecast_min_usd"] is None
            else f", forecast {usd(ad['forecast_min_usd'])} to {usd(ad['forecast_max_usd'])}"
        )
        lines.append(
            f"adaptive repetitions {ad['min']}-{ad['max']} (stop: {ad['stop']}): {ad['trials_min']} to {ad['trials_max']} trials, "
            f"cost cap {usd(ad['cost_cap_min_usd'])} to {usd(ad['cost_cap_max_usd'])}{known}"
        )
    pw = est.get("power")
    if pw:
        head = f"power: to detect a difference of {pw['delta']:g} in overall at {pw['power']:.0%} power (two-sided {pw['alpha']:g}) over {pw['tasks']} tasks"
        if pw["repetitions_needed"] is not None:
            cost = "unknown" if pw["cost_usd"] is None else usd(pw["cost_usd"])
            lines.append(
                f"{head}: {pw['repetitions_needed']} repetitions ({pw['trials']} trials), cost {cost}, cap {usd(pw['cost_cap_usd'])}"
            )
        elif "tasks_needed_at_max" in pw:
            lines.append(
                f"{head}: more than 10 repetitions (10 give {pw['power_at_max']:.0%}); "
                f"at 10 repetitions it needs about {pw['tasks_needed_at_max']} tasks"
            )
        else:
            lines.append(f"{head}: unknown")
        lines.append(f"  basis: {pw['basis']}")
    return "\n".join(lines)


def render_cancel(report: CancelReport) -> str:
    lines = [f"run {report.run_id}: {report.status or 'unknown'}"]
    if report.cancelled:
        lines.append(f"cancelled {len(report.cancelled)} trial(s):")
        lines += [f"  {t}" for t in report.cancelled]
    else:
        lines.append("no trial was cancelled")
    lines.append(f"kept {len(report.kept)} finished trial(s)")
    return "\n".join(lines)
