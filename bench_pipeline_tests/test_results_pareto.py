"""Pareto frontier on a hand-made 6-config table, and the chart files (PNG and SVG).

config  cost  coverage  overall  duration  checks
  P1    0.10    1.0      0.50      100      0.40
  P2    0.20    1.0      0.70      200      0.60
  P3    0.30    1.0      0.60      300      0.30   dominated by P2 and P4 on cost x overall
  P4    0.20    1.0      0.70      150      0.60   exact tie with P2 on cost x overall
  P5    0.05    0.5      0.90       50      0.35   unknown cost on half its trials
  P6    0.40    1.0      0.80      400      0.50
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

import matplotlib.image as mpimg
import pandas as pd
import pytest

from bench_pipeline.results import pareto_chart, pareto_chart_svg, pareto_frontier


def table() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "config_id": ["P1", "P2", "P3", "P4", "P5", "P6"],
            "avg_cost_usd": [0.10, 0.20, 0.30, 0.20, 0.05, 0.40],
            "cost_coverage": [1.0, 1.0, 1.0, 1.0, 0.5, 1.0],
            "overall": [0.50, 0.70, 0.60, 0.70, 0.90, 0.80],
            "avg_duration_seconds": [100.0, 200.0, 300.0, 150.0, 50.0, 400.0],
            "score_checks": [0.40, 0.60, 0.30, 0.60, 0.35, 0.50],
            "is_baseline": [True, False, False, False, False, False],
        }
    )


def test_cost_overall_frontier():
    f = pareto_frontier(table()).set_index("config_id")
    assert sorted(f.index[f["on_frontier"]]) == ["P1", "P2", "P4", "P6"]  # P2/P4 tie: both
    assert f.loc["P3", "dominated_by"] == "P2, P4"
    assert not f.loc["P3", "on_frontier"]
    # unknown cost is set apart, never plotted as free
    assert not f.loc["P5", "on_frontier"]
    assert "cost unknown" in f.loc["P5", "excluded_reason"]
    assert f["excluded_reason"].notna().sum() == 1
    assert pd.isna(f.loc["P1", "dominated_by"])


def test_duration_checks_frontier_accepts_scores_dot_spelling():
    f = pareto_frontier(table(), x="avg_duration_seconds", y="scores.checks").set_index("config_id")
    # no cost axis: P5 takes part. Lower duration and higher checks are better.
    assert sorted(f.index[f["on_frontier"]]) == ["P1", "P4", "P5"]
    assert f.loc["P2", "dominated_by"] == "P4"  # same checks, slower
    assert f.loc["P3", "dominated_by"] == "P1, P2, P4, P5"
    assert f.loc["P6", "dominated_by"] == "P2, P4"
    assert f["excluded_reason"].isna().all()
    assert "score_checks" in f.columns


def test_unknown_axis_is_refused():
    with pytest.raises(ValueError):
        pareto_frontier(table(), x="tokens")


def test_chart_png_and_svg(tmp_path):
    f = pareto_frontier(table())
    png = pareto_chart(f, tmp_path / "front.png", baseline_config="P1")
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    image = mpimg.imread(png)
    assert image.shape[0] > 100 and image.shape[1] > 100
    try:
        from PIL import Image

        with Image.open(png) as im:
            im.verify()
    except ImportError:  # pragma: no cover - matplotlib's reader already parsed it
        pass
    svg_path = pareto_chart(f, tmp_path / "front.svg")
    root = ET.parse(svg_path).getroot()
    assert root.tag.endswith("svg")
    text = svg_path.read_text()
    # matplotlib keeps each text as an SVG comment next to its glyph paths
    assert "avg cost per trial, USD (lower is better)" in text
    assert "overall score (higher is better)" in text
    assert "P5: cost unknown" in text  # the text box beside the plot
    svg = pareto_chart_svg(f, baseline_config="P1")
    assert ET.fromstring(svg).tag.endswith("svg")


def test_chart_bad_suffix(tmp_path):
    with pytest.raises(ValueError):
        pareto_chart(pareto_frontier(table()), tmp_path / "front.jpg")
