"""The full Pareto chart as SVG, drawn directly: a run draws it without importing matplotlib.

Every `bench run` draws this chart (the explorer page inlines it, the frontier's asset
metadata carries it), so it is plain string work: matplotlib costs ~0.5 s and ~30 MB of the
harness's memory to import, and only a PNG (`pareto_chart(frontier, "x.png")`) needs it.

`frontier_svg(frontier, x, y, baseline)` draws what the matplotlib chart draws: axes with
ticks and grid, the frontier line, every plotted config (the baseline as a diamond, frontier
points blue, dominated ones grey) with its label, a legend, and a box listing the configs that
are not plotted and why. Each point carries `data-config` so a reader (or a test) can find it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from xml.sax.saxutils import escape, quoteattr

import pandas as pd

FRONT = "#1f77b4"
DOMINATED = "#9a9a9a"
WIDTH, HEIGHT = 720, 460
PANEL = 270  # the "Not plotted" box beside the plot, when some config is excluded
LEFT, RIGHT, TOP, BOTTOM = 78, 24, 44, 58


def nice_ticks(lo: float, hi: float, target: int = 6) -> list[float]:
    """Round tick values covering [lo, hi]: steps of 1, 2, 2.5 or 5 times a power of ten."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo]
    raw = (hi - lo) / max(target - 1, 1)
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step - 1e-9) * step
    ticks, k = [], 0
    while first + k * step <= hi + step * 1e-9:
        ticks.append(round(first + k * step, 12))
        k += 1
    return ticks


def _tick_label(value: float, ticks: list[float]) -> str:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else abs(value) or 1.0
    # The fewest decimals that show the step exactly (0.25 -> 2, 0.2 -> 1, 5 -> 0).
    decimals = next(d for d in range(7) if abs(round(step, d) - step) <= step * 1e-6 or d == 6)
    text = f"{value:.{decimals}f}"
    return "0" if float(text) == 0 else text


def _range(values: Iterable[float], floor_at_zero: bool, empty: float) -> tuple[float, float]:
    vals = [v for v in values if math.isfinite(v)]
    if not vals:
        return 0.0, empty
    lo, hi = min(vals), max(vals)
    if floor_at_zero and lo >= 0:
        # Costs and durations start at 0; all-equal values (every config free) would otherwise
        # get a range around them, negative dollars included.
        top = hi or empty
        return -0.04 * top, 1.15 * top
    pad = (hi - lo) * 0.1 or (abs(hi) * 0.1 or 0.05)
    return lo - pad, hi + pad


def wrap_words(text: str, width: int = 34) -> list[str]:
    words, lines, cur = text.split(), [], ""
    for w in words:
        if cur and len(cur) + 1 + len(w) > width:
            lines.append(cur)
            cur = "  " + w
        else:
            cur = f"{cur} {w}" if cur else w
    lines.append(cur)
    return lines


def frontier_svg(
    frontier: pd.DataFrame,
    x: str,
    y: str,
    baseline: set[str],
    *,
    x_label: str,
    y_label: str,
    title: str,
    x_starts_at_zero: bool,
) -> str:
    """The chart of `frontier` (a `pareto_frontier` frame) on columns `x` and `y`."""
    excluded = frontier.loc[frontier["excluded_reason"].notna()]
    plotted = frontier.loc[frontier["excluded_reason"].isna()]
    width = WIDTH + (PANEL if len(excluded) else 0)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    xs = [float(v) for v in plotted[x]]
    ys = [float(v) for v in plotted[y]]
    x_lo, x_hi = _range(xs, x_starts_at_zero, 0.01 if x_starts_at_zero else 1.0)
    y_lo, y_hi = _range(ys, False, 1.0)

    def px(v: float) -> float:
        return round(LEFT + (v - x_lo) / (x_hi - x_lo) * plot_w, 2)

    def py(v: float) -> float:
        return round(TOP + plot_h - (v - y_lo) / (y_hi - y_lo) * plot_h, 2)

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{HEIGHT}" '
        f'viewBox="0 0 {width} {HEIGHT}" font-family="DejaVu Sans, Arial, sans-serif" '
        f'font-size="11"><rect width="{width}" height="{HEIGHT}" fill="#fff"/>',
        f'<text x="{LEFT}" y="{TOP - 16}" font-size="14">{escape(title)}</text>',
    ]
    x_ticks, y_ticks = nice_ticks(x_lo, x_hi), nice_ticks(y_lo, y_hi)
    for tick in x_ticks:
        tx = px(tick)
        out.append(
            f'<line x1="{tx}" y1="{TOP}" x2="{tx}" y2="{TOP + plot_h}" stroke="#000" '
            f'stroke-opacity="0.12"/><text x="{tx}" y="{TOP + plot_h + 16}" '
            f'text-anchor="middle">{_tick_label(tick, x_ticks)}</text>'
        )
    for tick in y_ticks:
        ty = py(tick)
        out.append(
            f'<line x1="{LEFT}" y1="{ty}" x2="{LEFT + plot_w}" y2="{ty}" stroke="#000" '
            f'stroke-opacity="0.12"/><text x="{LEFT - 6}" y="{ty + 4}" '
            f'text-anchor="end">{_tick_label(tick, y_ticks)}</text>'
        )
    out.append(
        f'<rect x="{LEFT}" y="{TOP}" width="{plot_w}" height="{plot_h}" fill="none" '
        f'stroke="#000" stroke-width="0.8"/>'
        f'<text x="{LEFT + plot_w / 2}" y="{HEIGHT - 14}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
        f'<text transform="translate(18 {TOP + plot_h / 2}) rotate(-90)" '
        f'text-anchor="middle">{escape(y_label)}</text>'
    )
    front = plotted.loc[plotted["on_frontier"].astype(bool)].sort_values([x, y])
    if len(front):
        points = " ".join(
            f"{px(float(a))},{py(float(b))}" for a, b in zip(front[x], front[y], strict=True)
        )
        out.append(
            f'<polyline class="frontier" points="{points}" fill="none" stroke="{FRONT}" '
            f'stroke-width="1.5"/>'
        )
        # Hollow rings on the line keep a one-point frontier visible, as in the legend.
        out.extend(
            f'<circle cx="{px(float(a))}" cy="{py(float(b))}" r="7" fill="none" '
            f'stroke="{FRONT}" stroke-width="1.2"/>'
            for a, b in zip(front[x], front[y], strict=True)
        )
    labels: dict[tuple[float, float], list[str]] = {}
    for row in plotted.itertuples(index=False):
        config = str(row.config_id)
        cx, cy = px(float(getattr(row, x))), py(float(getattr(row, y)))
        on = bool(row.on_frontier)
        color = FRONT if on else DOMINATED
        cls = "point frontier-point" if on else "point"
        attrs = f'class="{cls}" data-config={quoteattr(config)}'
        if config in baseline:
            out.append(
                f'<path {attrs} d="M{cx} {cy - 6}L{cx + 6} {cy}L{cx} {cy + 6}L{cx - 6} {cy}Z" '
                f'fill="{color}" stroke="#000"/>'
            )
        else:
            out.append(f'<circle {attrs} cx="{cx}" cy="{cy}" r="4.5" fill="{color}"/>')
        labels.setdefault((cx, cy), []).append(
            config + (" (original)" if config in baseline else "")
        )
    # Configs on the same spot (an exact tie) share one label instead of overprinting.
    out.extend(
        f'<text x="{cx + 7}" y="{cy - 6}" font-size="10">{escape(", ".join(names))}</text>'
        for (cx, cy), names in labels.items()
    )
    if len(front):
        # Above the plot, right-aligned: inside it, it would hide the best configs' labels.
        lx, ly = LEFT + plot_w - 180, TOP - 30
        out.append(
            f'<rect x="{lx}" y="{ly}" width="180" height="24" fill="#fff" fill-opacity="0.85" '
            f'stroke="#ccc"/><line x1="{lx + 8}" y1="{ly + 12}" x2="{lx + 30}" y2="{ly + 12}" '
            f'stroke="{FRONT}" stroke-width="1.5"/><circle cx="{lx + 19}" cy="{ly + 12}" r="5" '
            f'fill="none" stroke="{FRONT}"/><text x="{lx + 36}" y="{ly + 16}" font-size="10">'
            f"Pareto frontier (trade-off)</text>"
        )
    if len(excluded):
        lines = ["Not plotted:"]
        for cid, reason in zip(excluded["config_id"], excluded["excluded_reason"], strict=True):
            lines += wrap_words(f"{cid}: {reason}")
        bx, by = WIDTH, TOP
        out.append(
            f'<rect class="not-plotted" x="{bx}" y="{by}" width="{PANEL - 14}" '
            f'height="{16 * len(lines) + 12}" rx="6" fill="#fff7e0" stroke="#c9a227"/>'
        )
        out.extend(
            f'<text x="{bx + 8}" y="{by + 20 + 16 * i}" font-size="10" xml:space="preserve">'
            f"{escape(line)}</text>"
            for i, line in enumerate(lines)
        )
    out.append("</svg>")
    return "".join(out)
