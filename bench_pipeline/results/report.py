"""Self-contained HTML report of one run.

`render_report_html(run_meta, config_table, grid, recommendations, frontier, chart_svg,
by_tag=None, comparison=None) -> str`: ONE HTML document with inline CSS and the chart inlined
as SVG; no external URL of any kind (no links, CDN or web fonts; any "://" in data is
rendered as an entity so the page never holds a URL). Sections: run, recommendations,
config table, Pareto chart (+ configs not plotted), task x config grid, by tag (optional),
paired comparison (optional; a dict, a list of dicts or a DataFrame).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping

import numpy as np
import pandas as pd

from ._common import nan_to_none
from .grid import grid_pivot

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#222}
h1{font-size:22px}h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:12px;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:right;white-space:nowrap}
th{background:#f4f4f4;position:sticky;top:0}td.t{text-align:left}
.note{background:#fff7e0;border:1px solid #e3c766;padding:6px 10px;margin:6px 0;font-size:13px}
.ok{background:#e6f4ea}.bad{background:#fde7e7}.mid{background:#fff4d6}
.chart svg{max-width:100%;height:auto}.meta td{text-align:left}
"""


def _text(value: object) -> str:
    """Escaped text that can never form a URL in the page."""
    return html.escape(str(value)).replace("://", ":&#47;&#47;")


def _cell(value: object) -> str:
    value = nan_to_none(value) if not isinstance(value, list | tuple | np.ndarray) else value
    if value is None:
        return '<td class="t">–</td>'
    if isinstance(value, bool | np.bool_):
        return f'<td class="t">{"yes" if value else "no"}</td>'
    if isinstance(value, int | np.integer):
        return f"<td>{int(value)}</td>"
    if isinstance(value, float | np.floating):
        return f"<td>{float(value):.4g}</td>"
    if isinstance(value, list | tuple | np.ndarray):
        items = list(value)
        shown = ", ".join(map(str, items[:5])) + (
            f" … (+{len(items) - 5})" if len(items) > 5 else ""
        )
        return f'<td class="t">{_text(shown)}</td>'
    return f'<td class="t">{_text(value)}</td>'


def _table(frame: pd.DataFrame, css_class: str = "", index: bool = False) -> str:
    if index:
        frame = frame.reset_index()
    head = "".join(f"<th>{_text(c)}</th>" for c in frame.columns)
    body = "".join(
        "<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in frame.itertuples(index=False)
    )
    return f'<table class="{css_class}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _inline_svg(svg: str) -> str:
    """Strip the XML prolog, DOCTYPE, metadata and namespace URLs (implicit in HTML5)."""
    svg = re.sub(r"<\?xml[^>]*\?>", "", svg)
    svg = re.sub(r"<!DOCTYPE[^>]*>", "", svg, flags=re.S)
    svg = re.sub(r"<metadata>.*?</metadata>", "", svg, flags=re.S)
    svg = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", svg)
    svg = svg.replace("xlink:href=", "href=")
    return svg.replace("http://", "").replace("https://", "")


def _recommendations(rec: Mapping | pd.DataFrame) -> str:
    if isinstance(rec, pd.DataFrame):
        return _table(rec)
    parts = ["<ul>"]
    labels = {
        "best_quality": ("Best quality", "overall"),
        "most_efficient": ("Most efficient", "overall_per_usd"),
        "lowest_cost": ("Lowest cost", "avg_cost_usd"),
    }
    for kind, (label, metric) in labels.items():
        pick = rec.get(kind)
        if pick:
            value = nan_to_none(pick.get(metric))
            shown = "n/a" if value is None else f"{value:.4g}"
            parts.append(f"<li><b>{label}</b>: {_text(pick['config_id'])} ({metric} {shown})</li>")
        else:
            parts.append(f"<li><b>{label}</b>: none qualifies</li>")
    parts.append("</ul>")
    if rec.get("comparable") is False:
        parts.append(f'<div class="note">Not comparable: {_text(rec.get("comparable_note"))}</div>')
    if rec.get("overlap"):
        parts.append(f'<div class="note">Overlap: {_text(rec.get("overlap_note"))}</div>')
    if rec.get("excluded_from_cost"):
        ids = ", ".join(map(str, rec["excluded_from_cost"]))
        parts.append(f'<div class="note">Left out of cost picks (unknown cost): {_text(ids)}</div>')
    return "".join(parts)


def _grid(grid: pd.DataFrame) -> str:
    if len(grid) == 0:
        return "<p>No trials.</p>"
    passed = grid_pivot(grid, "passed")
    overall = grid_pivot(grid, "overall")
    share = grid.assign(_s=grid["reps_passed"] / grid["reps"].where(grid["reps"] > 0)).pivot(
        index="task_id", columns="config_id", values="_s"
    )
    head = "<th>task</th>" + "".join(f"<th>{_text(c)}</th>" for c in passed.columns)
    rows = []
    for task in passed.index:
        cells = [f'<td class="t">{_text(task)}</td>']
        for cfg in passed.columns:
            text, o, s = passed.loc[task, cfg], overall.loc[task, cfg], share.loc[task, cfg]
            if nan_to_none(text) is None:
                cells.append('<td class="t">–</td>')
                continue
            cls = "ok" if s == 1 else ("bad" if s == 0 else "mid")
            o_txt = "" if nan_to_none(o) is None else f" · {o:.2f}"
            cells.append(f'<td class="{cls}">{_text(text)}{o_txt}</td>')
        rows.append("<tr>" + "".join(cells) + "</tr>")
    legend = "<p>Cells: repetitions passed / repetitions · mean overall.</p>"
    return (
        legend
        + f'<table class="grid"><thead><tr>{head}</tr></thead><tbody>{"".join(rows)}</tbody></table>'
    )


def _comparison(comparison: Mapping | Iterable[Mapping] | pd.DataFrame) -> str:
    if isinstance(comparison, pd.DataFrame):
        frame = comparison
    elif isinstance(comparison, Mapping):
        frame = pd.DataFrame([dict(comparison)])
    else:
        frame = pd.DataFrame(list(comparison))
    return _table(frame.T.reset_index().rename(columns={"index": "field"}))


def render_report_html(
    run_meta: dict,
    config_table: pd.DataFrame,
    grid: pd.DataFrame,
    recommendations: Mapping | pd.DataFrame,
    frontier: pd.DataFrame,
    chart_svg: str,
    by_tag: pd.DataFrame | None = None,
    comparison: Mapping | Iterable[Mapping] | pd.DataFrame | None = None,
) -> str:
    """The whole report as one HTML string (see module doc)."""
    title = f"bench_pipeline — {run_meta.get('suite', '')} {run_meta.get('run_id', '')}".strip()
    meta_rows = "".join(
        f'<tr><td class="t"><b>{_text(k)}</b></td><td class="t">{_text(v)}</td></tr>'
        for k, v in run_meta.items()
    )
    excluded = (
        frontier.loc[frontier["excluded_reason"].notna()]
        if "excluded_reason" in frontier
        else frontier.iloc[:0]
    )
    excluded_html = (
        '<div class="note">Not plotted: '
        + "; ".join(
            f"{_text(c)} — {_text(r)}"
            for c, r in zip(excluded["config_id"], excluded["excluded_reason"], strict=True)
        )
        + "</div>"
        if len(excluded)
        else ""
    )
    sections = [
        f"<h1>{_text(title)}</h1>",
        f'<table class="meta">{meta_rows}</table>',
        "<h2>Recommendations</h2>",
        _recommendations(recommendations),
        "<h2>Config table</h2>",
        _table(config_table, "configs"),
        "<h2>Quality vs cost (Pareto frontier)</h2>",
        f'<div class="chart">{_inline_svg(chart_svg)}</div>',
        excluded_html,
        _table(frontier, "frontier"),
        "<h2>Task × config grid</h2>",
        _grid(grid),
    ]
    if by_tag is not None:
        sections += ["<h2>By tag</h2>", _table(by_tag, "bytag")]
    if comparison is not None:
        sections += ["<h2>Paired comparison</h2>", _comparison(comparison)]
    body = "\n".join(sections)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{_text(title)}</title><style>{CSS}</style></head><body>\n{body}\n</body></html>\n"
    )
