"""Pareto frontier of configurations and its chart.

`pareto_frontier(table, x="avg_cost_usd", y="overall")` -> one row per config of `table`:
`config_id`, `is_baseline`, the two axis columns under their table names (e.g.
`avg_cost_usd`, `overall`), `cost_coverage`, `on_frontier` (no other plotted config is at
least as good on both axes and strictly better on one; exact ties both stay on), `dominated_by`
(comma-separated config ids dominating it, null otherwise) and `excluded_reason` (null when
plotted; "cost unknown ..." when an axis is cost and cost_coverage < 1 — never plotted as free —
or "no <axis> value"). Excluded rows have on_frontier False. Rows are sorted by x.
The frame's `attrs` carry `x` and `y`.

Axes: `overall`, `score_<scorer>` (also spelled `scores.<scorer>`), `avg_cost_usd`,
`avg_duration_seconds` (and `pass_rate`); cost and duration are lower-better, scores
higher-better.

`pareto_chart(frontier, path, x=None, y=None, baseline_config=None) -> Path` writes SVG or PNG
(by suffix); `pareto_chart_svg(...) -> str` returns the SVG text. The SVG is drawn directly
(`frontier_chart.py`); only a PNG imports matplotlib.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from bench_pipeline.formats.files import replace_text, replacing

from ._common import EPS

if TYPE_CHECKING:
    from matplotlib.figure import Figure

LOWER_BETTER = {"avg_cost_usd", "avg_duration_seconds"}
COST_AXES = {"avg_cost_usd"}
LABELS = {
    "avg_cost_usd": "avg cost per trial, USD (lower is better)",
    "avg_duration_seconds": "avg duration per trial, seconds (lower is better)",
    "overall": "overall score (higher is better)",
    "pass_rate": "pass rate (higher is better)",
}


def axis_column(name: str) -> str:
    """Normalize an axis name: `scores.checks` -> `score_checks`."""
    if name.startswith("scores."):
        return "score_" + name[len("scores.") :]
    return name


def axis_label(column: str) -> str:
    if column in LABELS:
        return LABELS[column]
    if column.startswith("score_"):
        return f"{column[len('score_') :]} score (higher is better)"
    return column


def _check_axis(table: pd.DataFrame, column: str) -> None:
    allowed = {"overall", "avg_cost_usd", "avg_duration_seconds", "pass_rate"}
    if column in allowed or column.startswith("score_"):
        if column not in table.columns:
            raise ValueError(f"axis {column!r} is not a column of the config table")
        return
    raise ValueError(
        f"unknown axis {column!r}: use overall, scores.<scorer>, avg_cost_usd, avg_duration_seconds"
    )


def pareto_frontier(
    table: pd.DataFrame, x: str = "avg_cost_usd", y: str = "overall"
) -> pd.DataFrame:
    """Frontier flags for every config (see module doc)."""
    x, y = axis_column(x), axis_column(y)
    columns = _frontier_columns(table, x, y)
    columns["excluded_reason"] = pd.Series(columns["excluded_reason"], dtype=object)
    out = pd.DataFrame(columns)
    out.attrs["x"], out.attrs["y"] = x, y
    return out


def frontier_records(table: pd.DataFrame, x: str, y: str) -> list[dict[str, Any]]:
    """`pareto_frontier`'s rows as JSON-ready dicts (NaN as None), without building a frame:
    the explorer embeds the frontier of every axis pair of every run, and a frame per pair
    cost ~7 ms of pandas, most of the page's time on a small run."""
    x, y = axis_column(x), axis_column(y)
    columns = _frontier_columns(table, x, y)
    names = list(columns)
    values = [
        [_plain(v) for v in col.tolist()] if isinstance(col, np.ndarray) else list(col)
        for col in columns.values()
    ]
    return [dict(zip(names, row, strict=True)) for row in zip(*values, strict=True)]


def _plain(value: Any) -> Any:
    return None if isinstance(value, float) and value != value else value


def _frontier_columns(table: pd.DataFrame, x: str, y: str) -> dict[str, Any]:
    """The frontier's columns, rows already in the frame's order (by x, NaN last, then
    config_id): numpy arrays, and lists for the text columns (None where null)."""
    _check_axis(table, x)
    _check_axis(table, y)
    # Plain arrays, one frame built at the end: the explorer computes the frontier of every
    # axis pair for every run, and per-cell frame access made each call ~8 ms.
    ids = table["config_id"].astype(str).to_numpy()
    n = len(ids)
    is_baseline = (
        table["is_baseline"].fillna(False).astype(bool).to_numpy()
        if "is_baseline" in table
        else np.zeros(n, dtype=bool)
    )
    values = {x: table[x].astype(float).to_numpy()}
    if y != x:
        values[y] = table[y].astype(float).to_numpy()
    coverage = (
        table["cost_coverage"].astype(float).to_numpy() if "cost_coverage" in table else np.ones(n)
    )
    reasons: list[str | None] = []
    for i in range(n):
        reason = None
        for axis, column in values.items():
            if axis in COST_AXES and not coverage[i] >= 1 - EPS:
                known = 0.0 if np.isnan(coverage[i]) else coverage[i]
                reason = f"cost unknown for {1 - known:.0%} of trials (coverage {known:.0%})"
                break
            if np.isnan(column[i]):
                reason = f"no {axis} value"
                break
        reasons.append(reason)
    plotted = np.array([r is None for r in reasons], dtype=bool)
    # orient both axes so that larger is better, then test dominance pairwise (few configs)
    gx = values[x] * (-1 if x in LOWER_BETTER else 1)
    gy = values[y] * (-1 if y in LOWER_BETTER else 1)
    ge = (gx[:, None] >= gx[None, :]) & (gy[:, None] >= gy[None, :])
    gt = (gx[:, None] > gx[None, :]) | (gy[:, None] > gy[None, :])
    dom = ge & gt & plotted[:, None] & plotted[None, :]  # dom[a, b]: a dominates b
    dominated_by = [
        ", ".join(sorted(ids[dom[:, b]])) if dom[:, b].any() else None for b in range(n)
    ]
    # sorted by x (NaN last), then config_id: as sort_values([x, "config_id"]) orders them
    order = np.lexsort((ids, values[x]))
    return {
        "config_id": ids[order],
        "is_baseline": is_baseline[order],
        **{axis: column[order] for axis, column in values.items()},
        "cost_coverage": coverage[order],
        "on_frontier": (plotted & ~dom.any(axis=0))[order],
        "dominated_by": [dominated_by[i] for i in order],
        "excluded_reason": [reasons[i] for i in order],
    }


def _baseline(frontier: pd.DataFrame, baseline_config: str | None) -> set[str]:
    if baseline_config is not None:
        return {str(baseline_config)}
    if "is_baseline" in frontier:
        return set(frontier.loc[frontier["is_baseline"].astype(bool), "config_id"])
    return set()


def _title(x: str) -> str:
    return "Quality vs " + ("cost" if x in COST_AXES else axis_label(x).split(",")[0])


def _svg(frontier: pd.DataFrame, x: str, y: str, baseline_config: str | None) -> str:
    from .frontier_chart import frontier_svg

    values = frontier.loc[frontier["excluded_reason"].isna(), x].astype(float).dropna()
    return frontier_svg(
        frontier,
        x,
        y,
        _baseline(frontier, baseline_config),
        x_label=axis_label(x),
        y_label=axis_label(y),
        title=_title(x),
        x_starts_at_zero=bool(len(values)) and float(values.min()) >= 0,
    )


def _figure(frontier: pd.DataFrame, x: str, y: str, baseline_config: str | None) -> Figure:
    """The matplotlib figure, for a PNG."""
    excluded = frontier.loc[frontier["excluded_reason"].notna()]
    plotted = frontier.loc[frontier["excluded_reason"].isna()]
    # matplotlib costs ~0.5 s and ~30 MB to import: only a PNG pays for it.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from .frontier_chart import wrap_words

    fig = Figure(figsize=(9.5 if len(excluded) else 7.0, 4.8))
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0.1, 0.12, 0.58 if len(excluded) else 0.85, 0.78))
    baseline = _baseline(frontier, baseline_config)
    front = plotted.loc[plotted["on_frontier"]].sort_values([x, y])
    if len(front):
        ax.plot(
            front[x],
            front[y],
            "-",
            color="#1f77b4",
            linewidth=1.5,
            # A marker keeps a one-point frontier visible in the legend too.
            marker="o",
            markerfacecolor="none",
            markersize=10,
            zorder=1,
            label="Pareto frontier (trade-off)",
        )
    for _, row in plotted.iterrows():
        is_base = row["config_id"] in baseline
        on = bool(row["on_frontier"])
        ax.scatter(
            [row[x]],
            [row[y]],
            marker="D" if is_base else "o",
            s=70 if is_base else 45,
            color="#1f77b4" if on else "#9a9a9a",
            edgecolors="black" if is_base else "none",
            zorder=3,
        )
        ax.annotate(
            row["config_id"] + (" (original)" if is_base else ""),
            (row[x], row[y]),
            textcoords="offset points",
            xytext=(6, 5),
            fontsize=8,
        )
    values = plotted[x].astype(float).dropna()
    if len(values) and values.min() >= 0:
        # Costs and durations start at 0; all-equal values (every config free) would otherwise
        # get a symmetric axis around them, negative dollars included.
        top = float(values.max()) or (0.01 if x in COST_AXES else 1.0)
        ax.set_xlim(-0.04 * top, 1.15 * top)
    ax.set_xlabel(axis_label(x))
    ax.set_ylabel(axis_label(y))
    ax.set_title(_title(x))
    ax.grid(True, alpha=0.3)
    if len(front):
        ax.legend(loc="best", fontsize=8)
    if len(excluded):
        lines = ["Not plotted:"] + [
            f"{cid}: {reason}"
            for cid, reason in zip(excluded["config_id"], excluded["excluded_reason"], strict=True)
        ]
        fig.text(
            0.71,
            0.88,
            "\n".join("\n".join(wrap_words(line)) for line in lines),
            fontsize=8,
            va="top",
            bbox={"boxstyle": "round", "facecolor": "#fff7e0", "edgecolor": "#c9a227"},
        )
    return fig


def _axes(frontier: pd.DataFrame, x: str | None, y: str | None) -> tuple[str, str]:
    x = axis_column(x or frontier.attrs.get("x", "avg_cost_usd"))
    y = axis_column(y or frontier.attrs.get("y", "overall"))
    return x, y


def pareto_chart(
    frontier: pd.DataFrame,
    path: str | Path,
    x: str | None = None,
    y: str | None = None,
    baseline_config: str | None = None,
) -> Path:
    """Draw the frontier to `path` (.svg or .png), atomically; returns the path."""
    x, y = _axes(frontier, x, y)
    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in {"png", "svg"}:
        raise ValueError(f"chart path must end in .png or .svg, got {path.name!r}")
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "svg":
        return replace_text(path, _svg(frontier, x, y, baseline_config))
    with replacing(path) as tmp:
        _figure(frontier, x, y, baseline_config).savefig(tmp, format="png", dpi=120)
    return path


def pareto_chart_svg(
    frontier: pd.DataFrame,
    x: str | None = None,
    y: str | None = None,
    baseline_config: str | None = None,
) -> str:
    """The chart as SVG text (for inlining in the HTML report)."""
    x, y = _axes(frontier, x, y)
    return _svg(frontier, x, y, baseline_config)
