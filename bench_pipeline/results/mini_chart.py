"""A tiny SVG of the Pareto frontier, small enough for the Dagster UI to show inline.

The Dagster UI renders a markdown metadata value in place only when it is under 1,000
characters (longer ones hide behind "[Show Markdown]"). `mini_pareto_markdown(frontier)`
returns `![...](data:image/svg+xml;base64,...)` under that limit: points, the frontier line and
labels; when many configs would overflow it, labels of dominated configs go first, then the
dominated points themselves (the full chart stays in the `chart` entry).
"""

from __future__ import annotations

import base64

import numpy as np
import pandas as pd

MARKDOWN_LIMIT = 990  # the UI's inline limit is 1,000 characters
W, H, L, B, T, R = 300, 180, 26, 18, 20, 70


def _svg(frontier: pd.DataFrame, x: str, y: str, labels: str, dominated: bool) -> str:
    pts = (
        frontier[frontier["excluded_reason"].isna()] if "excluded_reason" in frontier else frontier
    )
    if not dominated:
        pts = pts[pts["on_frontier"].astype(bool)]
    xs, ys = pts[x].astype(float), pts[y].astype(float)
    drawable = np.isfinite(xs) & np.isfinite(ys)  # (a point off every axis has no place)
    pts, xs, ys = pts[drawable], xs[drawable], ys[drawable]
    x_hi = max(float(xs.max()) if len(xs) else 1.0, 1e-9) * 1.1
    y_lo, y_hi = (
        (0.0, 1.0)
        if len(ys) == 0 or (ys.min() >= 0 and ys.max() <= 1)
        else (float(ys.min()), float(ys.max()) + 1e-9)
    )

    def px(v: float) -> int:
        return round(L + v / x_hi * (W - L - R))

    def py(v: float) -> int:
        return round(H - B - (v - y_lo) / (y_hi - y_lo) * (H - B - T))

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" font-size="10" '
        f'font-family="sans-serif"><rect width="{W}" height="{H}" fill="#fff"/>'
        f'<path d="M{L} {T}V{H - B}H{W - 4}" stroke="#555" fill="none"/>'
        f'<text x="{L}" y="{H - 4}">{x.replace("avg_", "")} →</text>'
        f'<text x="2" y="{T + 8}">{y[:7]}</text>'
    ]
    front = pts[pts["on_frontier"].astype(bool)].sort_values(x)
    if len(front) > 1:
        line = " ".join(f"{px(a)},{py(b)}" for a, b in zip(front[x], front[y], strict=True))
        parts.append(f'<polyline points="{line}" stroke="#1a7f37" fill="none" stroke-width="2"/>')
    for r in pts.itertuples():
        on = bool(r.on_frontier)
        cx, cy = px(float(getattr(r, x))), py(float(getattr(r, y)))
        parts.append(
            f'<circle cx="{cx}" cy="{cy}" r="{5 if on else 4}" fill="{"#1a7f37" if on else "#999"}"/>'
        )
        if labels == "all" or (labels == "frontier" and on):
            parts.append(f'<text x="{cx + 6}" y="{cy - 4}">{str(r.config_id)[:16]}</text>')
    parts.append("</svg>")
    return "".join(parts)


def mini_pareto_markdown(
    frontier: pd.DataFrame, x: str = "avg_cost_usd", y: str = "overall"
) -> str:
    """Markdown of an inline image of the frontier, under `MARKDOWN_LIMIT` characters."""
    for labels, dominated in (
        ("all", True),
        ("frontier", True),
        ("none", True),
        ("frontier", False),
        ("none", False),
    ):
        svg = _svg(frontier, x, y, labels, dominated)
        md = f"![Pareto frontier](data:image/svg+xml;base64,{base64.b64encode(svg.encode()).decode()})"
        if len(md) <= MARKDOWN_LIMIT:
            return md
    return "_the frontier has too many configurations for an inline chart: see `chart`_"
