"""Plain-text rendering of result tables for the terminal."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd


def _num(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    return f"{float(v):.{digits}f}"


def money(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "unknown"
    return f"${float(v):.4f}"


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
            "config": str(r["config_id"]) + (" (baseline)" if bool(r.get("is_baseline")) else ""),
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


def render_recommendations(recs: dict[str, Any]) -> str:
    lines = []
    for kind, label in (
        ("best_quality", "best quality"),
        ("most_efficient", "most efficient"),
        ("lowest_cost", "lowest cost"),
    ):
        pick = recs.get(kind)
        if not pick:
            lines.append(f"  {label:<15} none qualifies")
            continue
        extra = ", ".join(f"{k}={_fmt_value(v)}" for k, v in pick.items() if k != "config_id")
        lines.append(f"  {label:<15} {pick['config_id']}  ({extra})")
    if recs.get("comparable") is False:
        lines.append(f"  comparable: false — {recs.get('comparable_note')}")
    if recs.get("overlap"):
        lines.append(f"  overlap: {recs.get('overlap_note')}")
    return "\n".join(lines)


def _fmt_value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)
