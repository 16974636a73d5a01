"""Recommendations from a config table.

`recommend(table) -> dict` (JSON-ready):
- `best_quality`: {config_id, overall, avg_cost_usd} — highest overall (ties: lower known
  cost, then config_id), above 0;
- `most_efficient`: {config_id, overall_per_usd, overall, avg_cost_usd} — highest overall per
  dollar among configs with full cost coverage and overall > 0; a known cost of $0 with a
  score above 0 wins outright (`overall_per_usd` None: free);
- `lowest_cost`: {config_id, avg_cost_usd, overall} — lowest avg cost among configs with full
  cost coverage and overall > 0 (ties: higher overall);
  no pick goes to a config that scored 0 (or has no score): failing every task is never
  the best, the cheapest or the most efficient way to do the work;
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
    ids: np.ndarray | None = None
    for col in table.columns:
        if not col.startswith("scored_") or col == "scored_share":
            continue
        name = col[len("scored_") :]
        of = table.get(f"of_{name}")
        if of is None:
            continue
        of_n = of.to_numpy(dtype=float, na_value=np.nan)
        mask = of_n > 0
        scored = table[col].to_numpy(dtype=float, na_value=np.nan)[mask]
        share = scored / of_n[mask]
        known = share[~np.isnan(share)]  # (as a Series' max and min skip nulls)
        if len(share) > 1 and len(known) and known.max() - known.min() > EPS:
            if ids is None:
                ids = np.asarray(table["config_id"].tolist(), dtype=object)
            parts = ", ".join(
                f"{cid} {int(s)}/{int(o)}"
                for cid, s, o in zip(ids[mask], scored, of_n[mask], strict=True)
            )
            differing.append(f"{name}: {parts}")
    if not differing:
        return True, None
    return False, "configs have different shares of trials scored — " + "; ".join(differing)


def _floats(table: pd.DataFrame, col: str) -> np.ndarray:
    return table[col].to_numpy(dtype=float, na_value=np.nan)


def recommend(table: pd.DataFrame) -> dict:
    """Best quality, most efficient and lowest cost config with comparability caveats.

    Controls (`is_control`: the oracle and the do-nothing agent) bound the scale but are never
    recommended; a pick that no configuration qualifies for says why in `reasons`.
    (On plain arrays and Python sorts: a table has a row per config, and a run's tables by tag
    call this once per tag, where pandas' per-call overhead was most of the time.)"""
    n = len(table)
    controls = (
        table["is_control"].fillna(False).astype(bool).to_numpy()
        if "is_control" in table
        else np.zeros(n, dtype=bool)
    )
    ids = table["config_id"].tolist()
    overall = _floats(table, "overall")
    cost = _floats(table, "avg_cost_usd")
    coverage = np.nan_to_num(_floats(table, "cost_coverage"), nan=0.0)
    full_all = coverage >= 1 - EPS
    candidate = ~controls
    scored = candidate & ~np.isnan(overall)
    cost_known = scored & full_all & ~np.isnan(cost)  # (within the scored candidates)
    rows = np.flatnonzero(scored)
    result: dict = dict.fromkeys(KINDS)
    reasons: dict[str, str] = {}
    # the ranking of pandas' stable sort by (overall desc, known cost or inf, config_id)
    rank = sorted(
        rows.tolist(),
        key=lambda i: (-overall[i], cost[i] if cost_known[i] else np.inf, ids[i]),
    )
    if rank and overall[rank[0]] > 0:
        best = rank[0]
        result["best_quality"] = {
            "config_id": ids[best],
            "overall": nan_to_none(overall[best]),
            "avg_cost_usd": nan_to_none(cost[best]) if cost_known[best] else None,
        }
    eff = [i for i in rows.tolist() if cost_known[i] and overall[i] > 0]
    if eff:
        free = [i for i in eff if cost[i] <= EPS]
        if free:  # a known cost of $0 with a score above 0 beats every ratio
            top = sorted(free, key=lambda i: (-overall[i], ids[i]))[0]
            ratio = None
        else:
            ratios = {i: float(overall[i] / cost[i]) for i in eff}
            top = sorted(eff, key=lambda i: (-ratios[i], ids[i]))[0]
            ratio = ratios[top]
        result["most_efficient"] = {
            "config_id": ids[top],
            "overall_per_usd": ratio,  # None: free (known cost $0)
            "overall": float(overall[top]),
            "avg_cost_usd": float(cost[top]),
        }
    cheap = [i for i in rows.tolist() if cost_known[i] and overall[i] > 0]
    if cheap:
        top = sorted(cheap, key=lambda i: (cost[i], -overall[i], ids[i]))[0]
        result["lowest_cost"] = {
            "config_id": ids[top],
            "avg_cost_usd": float(cost[top]),
            "overall": nan_to_none(overall[top]),
        }
    for kind in KINDS:
        if result[kind] is None:
            picked = table.loc[scored]
            reasons[kind] = _why_none(
                kind,
                table,
                pd.Series(controls, index=table.index),
                picked,
                pd.Series(cost_known[scored], index=picked.index),
            )
    result["reasons"] = reasons
    result["controls"] = sorted(str(ids[i]) for i in np.flatnonzero(controls))
    result["comparable"], result["comparable_note"] = _comparability(table)
    result["overlap"], result["overlap_note"] = False, None
    if len(rank) >= 2 and result["best_quality"] is not None:
        first, second = rank[0], rank[1]
        low, high = _floats(table, "overall_ci_low"), _floats(table, "overall_ci_high")
        lows = (low[first], low[second])
        highs = (high[first], high[second])
        if all(nan_to_none(v) is not None for v in (*lows, *highs)):
            if lows[0] <= highs[1] and lows[1] <= highs[0]:
                result["overlap"] = True
                result["overlap_note"] = (
                    f"best quality {ids[first]} ({_fmt(overall[first])}, 95% CI "
                    f"{_fmt(lows[0])}-{_fmt(highs[0])}) and runner-up {ids[second]} "
                    f"({_fmt(overall[second])}, 95% CI {_fmt(lows[1])}-{_fmt(highs[1])}) "
                    "overlap: the difference may be noise; add repetitions or tasks"
                )
        else:
            result["overlap_note"] = "confidence intervals unavailable (fewer than two tasks)"
    result["excluded_from_cost"] = sorted(str(ids[i]) for i in np.flatnonzero(~full_all))
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
    above = rows["overall"].to_numpy(dtype=float, na_value=np.nan) > 0
    if not above.any():
        return f"no candidate scored above 0 ({', '.join(map(str, rows['config_id']))})"
    unknown = sorted(rows.loc[~cost_known, "config_id"].astype(str))
    if not bool(cost_known.any()):
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
