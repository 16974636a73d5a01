"""Recommendations from a config table.

`recommend(table) -> dict` (JSON-ready):
- `best_quality`: {config_id, overall, avg_cost_usd} — highest overall (ties: lower known
  cost, then config_id);
- `most_efficient`: {config_id, overall_per_usd, overall, avg_cost_usd} — highest overall per
  dollar among configs with full cost coverage and overall > 0; a known cost of $0 with a
  score above 0 wins outright (`overall_per_usd` None: free);
- `lowest_cost`: {config_id, avg_cost_usd, overall} — lowest avg cost among configs with full
  cost coverage (ties: higher overall);
  each is None when no config qualifies, and `reasons[kind]` then says why;
- controls (`is_control` in the table: the oracle and the do-nothing agent) are never picked;
  `controls` lists them;
- `comparable`: False when configs have different shares of trials scored (scored/of differs
  for some scorer); `comparable_note` names the scorers and shares;
- `overlap`: True when the 95 % overall CIs of the two best configs overlap; `overlap_note`;
- `excluded_from_cost`: configs left out of the cost-based picks (cost coverage < 1).

`recommendations_frame(table, keys=())` -> one row per recommendation kind (and per `keys`
value, e.g. tag): the keys, `recommendation` (best_quality | most_efficient | lowest_cost),
`config_id`, `metric`, `value`, `overall`, `avg_cost_usd`, `comparable`, `comparable_note`,
`overlap`, `overlap_note`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from bench_pipeline.formats import display

from ._common import EPS, nan_to_none

KINDS = ("best_quality", "most_efficient", "lowest_cost")


def _fmt(x: object) -> str:
    return display.number(x, missing="n/a")


def _comparability(table: pd.DataFrame) -> tuple[bool, str | None]:
    differing = []
    for col in table.columns:
        if not col.startswith("scored_") or col == "scored_share":
            continue
        name = col[len("scored_") :]
        of = table.get(f"of_{name}")
        if of is None:
            continue
        mask = of > 0
        share = table.loc[mask, col] / of[mask]
        if len(share) > 1 and share.max() - share.min() > EPS:
            parts = ", ".join(
                f"{cid} {int(s)}/{int(o)}"
                for cid, s, o in zip(
                    table.loc[mask, "config_id"], table.loc[mask, col], of[mask], strict=True
                )
            )
            differing.append(f"{name}: {parts}")
    if not differing:
        return True, None
    return False, "configs have different shares of trials scored — " + "; ".join(differing)


def recommend(table: pd.DataFrame) -> dict:
    """Best quality, most efficient and lowest cost config with comparability caveats.

    Controls (`is_control`: the oracle and the do-nothing agent) bound the scale but are never
    recommended; a pick that no configuration qualifies for says why in `reasons`."""
    controls = (
        table["is_control"].fillna(False).astype(bool)
        if "is_control" in table
        else pd.Series(False, index=table.index)
    )
    candidates = table.loc[~controls]
    rows = candidates.loc[candidates["overall"].notna()].copy()
    full = rows["cost_coverage"].fillna(0) >= 1 - EPS
    cost_known = full & rows["avg_cost_usd"].notna()
    result: dict = dict.fromkeys(KINDS)
    reasons: dict[str, str] = {}
    rank = rows.iloc[:0]
    if len(rows):
        rank = rows.assign(_cost=rows["avg_cost_usd"].where(cost_known, np.inf)).sort_values(
            ["overall", "_cost", "config_id"], ascending=[False, True, True]
        )
        best = rank.iloc[0]
        result["best_quality"] = {
            "config_id": best["config_id"],
            "overall": nan_to_none(best["overall"]),
            "avg_cost_usd": nan_to_none(best["avg_cost_usd"]) if cost_known[best.name] else None,
        }
    eff = rows.loc[cost_known & (rows["overall"] > 0)].copy()
    if len(eff):
        free = eff.loc[eff["avg_cost_usd"] <= EPS]
        if len(free):  # a known cost of $0 with a score above 0 beats every ratio
            top = free.sort_values(["overall", "config_id"], ascending=[False, True]).iloc[0]
            ratio = None
        else:
            eff["_ratio"] = eff["overall"] / eff["avg_cost_usd"]
            top = eff.sort_values(["_ratio", "config_id"], ascending=[False, True]).iloc[0]
            ratio = float(top["_ratio"])
        result["most_efficient"] = {
            "config_id": top["config_id"],
            "overall_per_usd": ratio,  # None: free (known cost $0)
            "overall": float(top["overall"]),
            "avg_cost_usd": float(top["avg_cost_usd"]),
        }
    cheap = candidates.loc[
        (candidates["cost_coverage"].fillna(0) >= 1 - EPS) & candidates["avg_cost_usd"].notna()
    ]
    if len(cheap):
        cheap = cheap.assign(_o=cheap["overall"].fillna(-np.inf))
        top = cheap.sort_values(
            ["avg_cost_usd", "_o", "config_id"], ascending=[True, False, True]
        ).iloc[0]
        result["lowest_cost"] = {
            "config_id": top["config_id"],
            "avg_cost_usd": float(top["avg_cost_usd"]),
            "overall": nan_to_none(top["overall"]),
        }
    for kind in KINDS:
        if result[kind] is None:
            reasons[kind] = _why_none(kind, table, controls, rows, cost_known)
    result["reasons"] = reasons
    result["controls"] = sorted(table.loc[controls, "config_id"].astype(str))
    result["comparable"], result["comparable_note"] = _comparability(table)
    result["overlap"], result["overlap_note"] = False, None
    if len(rank) >= 2:
        first, second = rank.iloc[0], rank.iloc[1]
        lows = (first["overall_ci_low"], second["overall_ci_low"])
        highs = (first["overall_ci_high"], second["overall_ci_high"])
        if all(nan_to_none(v) is not None for v in (*lows, *highs)):
            if lows[0] <= highs[1] and lows[1] <= highs[0]:
                result["overlap"] = True
                result["overlap_note"] = (
                    f"best quality {first['config_id']} ({_fmt(first['overall'])}, 95% CI "
                    f"{_fmt(lows[0])}-{_fmt(highs[0])}) and runner-up {second['config_id']} "
                    f"({_fmt(second['overall'])}, 95% CI {_fmt(lows[1])}-{_fmt(highs[1])}) "
                    "overlap: the difference may be noise; add repetitions or tasks"
                )
        else:
            result["overlap_note"] = "confidence intervals unavailable (fewer than two tasks)"
    result["excluded_from_cost"] = sorted(
        table.loc[table["cost_coverage"].fillna(0) < 1 - EPS, "config_id"].astype(str)
    )
    return result


def _why_none(
    kind: str, table: pd.DataFrame, controls: pd.Series, rows: pd.DataFrame, cost_known: pd.Series
) -> str:
    """Why no configuration qualifies for `kind`, in words a user can act on."""
    if table.empty:
        return "no configuration in the table"
    if bool(controls.all()):
        return f"every configuration is a control ({', '.join(map(str, table['config_id']))}); controls are never recommended"
    if rows.empty:
        return "no candidate configuration has a score yet"
    if kind == "best_quality":
        return "no candidate configuration has a score yet"
    unknown = sorted(rows.loc[~cost_known, "config_id"].astype(str))
    if kind == "lowest_cost" or not bool(cost_known.any()):
        return f"no candidate has a fully known cost (unknown for {', '.join(unknown)})"
    return "no candidate with a fully known cost scored above 0" + (
        f" (cost unknown for {', '.join(unknown)})" if unknown else ""
    )


_METRIC = {
    "best_quality": ("overall", "overall"),
    "most_efficient": ("overall_per_usd", "overall_per_usd"),
    "lowest_cost": ("avg_cost_usd", "avg_cost_usd"),
}


def recommendations_frame(
    table: pd.DataFrame, keys: Sequence[str] = (), *, recommended: dict | None = None
) -> pd.DataFrame:
    """recommend() as rows, per value of `keys` (e.g. ["tag"]) when given; `recommended`:
    recommend(table) already made (without keys)."""
    keys = list(keys)
    parts = [((), table)] if not keys else list(table.groupby(keys, sort=True))
    rows = []
    for key, sub in parts:
        key = key if isinstance(key, tuple) else (key,)
        rec = recommended if recommended is not None and not keys else recommend(sub)
        for kind in KINDS:
            pick = rec[kind] or {}
            metric, field = _METRIC[kind]
            rows.append(
                dict(zip(keys, key, strict=True))
                | {
                    "recommendation": kind,
                    "config_id": pick.get("config_id"),
                    "metric": metric,
                    "value": pick.get(field),
                    "overall": pick.get("overall"),
                    "avg_cost_usd": pick.get("avg_cost_usd"),
                    "comparable": rec["comparable"],
                    "comparable_note": rec["comparable_note"],
                    "overlap": rec["overlap"],
                    "overlap_note": rec["overlap_note"],
                }
            )
    cols = [*keys, "recommendation", "config_id", "metric", "value", "overall", "avg_cost_usd"]
    cols += ["comparable", "comparable_note", "overlap", "overlap_note"]
    return pd.DataFrame(rows, columns=cols)
