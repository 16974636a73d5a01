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


def test_the_explorers_records_are_the_frontier_frames_rows():
    """frontier_records (what the explorer embeds for every axis pair) gives pareto_frontier's
    rows, in its order, with NaN as null: ties in x broken by config id, a config with no
    value on an axis last, unknown cost excluded."""
    import itertools
    import json
    import math

    from bench_pipeline.results.pareto import frontier_records

    t = table()
    t.loc[2, "avg_duration_seconds"] = float("nan")  # no value on one axis: sorted last
    t.loc[5, "score_checks"] = float("nan")
    axes = ["overall", "score_checks", "avg_cost_usd", "avg_duration_seconds"]
    for x, y in itertools.permutations(axes, 2):
        frame = pareto_frontier(t, x=x, y=y)
        want = json.loads(frame.to_json(orient="records"))
        got = frontier_records(t, x=x, y=y)
        assert [list(r) for r in got] == [list(r) for r in want], (x, y)  # same keys, in order
        for a, b in zip(got, want, strict=True):
            for key in a:
                if isinstance(b[key], float):
                    assert math.isclose(a[key], b[key], rel_tol=1e-9), (x, y, key)
                else:
                    assert a[key] == b[key], (x, y, key)
    ordered = [r["config_id"] for r in frontier_records(t, "avg_duration_seconds", "overall")]
    assert ordered == ["P5", "P1", "P4", "P2", "P6", "P3"]  # P3 has no duration: last
    costs = [r["config_id"] for r in frontier_records(t, "avg_cost_usd", "overall")]
    assert costs == ["P5", "P1", "P2", "P4", "P3", "P6"]  # P2 and P4 cost the same: by id


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
    text = "".join(root.itertext())
    assert "avg cost per trial, USD (lower is better)" in text
    assert "overall score (higher is better)" in text
    assert "P5: cost unknown" in text  # the text box beside the plot
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temp left
    svg = pareto_chart_svg(f, baseline_config="P1")
    assert ET.fromstring(svg).tag.endswith("svg")


def _points(svg: str) -> dict[str, tuple[float, float, str]]:
    """config -> (x, y, shape) of each drawn point, in SVG pixels (y grows downwards)."""
    out = {}
    for e in ET.fromstring(svg).iter():
        if "point" not in (e.get("class") or ""):
            continue
        if e.tag.endswith("circle"):
            out[e.get("data-config")] = (float(e.get("cx")), float(e.get("cy")), "circle")
        else:  # the baseline's diamond: its path starts at the top vertex, straight above it
            x, y = e.get("d")[1:].split("L")[0].split()
            out[e.get("data-config")] = (float(x), float(y) + 6, "diamond")
    return out


def test_the_svg_chart_places_every_plotted_config_by_its_values():
    f = pareto_frontier(table())
    svg = pareto_chart_svg(f, baseline_config="P1")
    pts = _points(svg)
    # P5 (cost unknown) is listed apart, never drawn as a point.
    assert set(pts) == {"P1", "P2", "P3", "P4", "P6"}
    cost = dict(zip(f["config_id"], f["avg_cost_usd"], strict=True))
    overall = dict(zip(f["config_id"], f["overall"], strict=True))
    # Cheaper is further left, better is higher up; equal values share a coordinate.
    by_cost = sorted(pts, key=lambda c: (cost[c], c))
    assert [pts[c][0] for c in by_cost] == sorted(pts[c][0] for c in by_cost)
    assert pts["P2"][:2] == pts["P4"][:2]
    assert pts["P6"][1] < pts["P2"][1] < pts["P3"][1] < pts["P1"][1]
    # The same scale on both sides: the distance in pixels is proportional to the values.
    dx = (pts["P6"][0] - pts["P1"][0]) / (cost["P6"] - cost["P1"])
    assert abs((pts["P3"][0] - pts["P1"][0]) - dx * (cost["P3"] - cost["P1"])) < 0.05
    dy = (pts["P1"][1] - pts["P6"][1]) / (overall["P6"] - overall["P1"])
    assert abs((pts["P1"][1] - pts["P3"][1]) - dy * (overall["P3"] - overall["P1"])) < 0.05
    assert pts["P1"][2] == "diamond" and pts["P6"][2] == "circle"
    root = ET.fromstring(svg)
    # The frontier line runs through the frontier configs, left to right, and not through P3.
    (line,) = [e for e in root.iter() if e.get("class") == "frontier"]
    xy = [tuple(map(float, p.split(","))) for p in line.get("points").split()]
    assert xy == sorted(xy) and len(xy) == 4
    assert {(pts[c][0], pts[c][1]) for c in ("P1", "P2", "P4", "P6")} == set(xy)
    assert (pts["P3"][0], pts["P3"][1]) not in xy
    colors = {e.get("data-config"): e.get("fill") for e in root.iter() if e.get("data-config")}
    assert colors["P3"] != colors["P2"]  # dominated points are drawn apart
    assert "P1 (original)" in "".join(root.itertext())


def test_the_svg_chart_escapes_config_ids_and_draws_an_all_free_frontier():
    t = table()
    t["config_id"] = ["a<b", "c&d", "P3", "P4", "P5", "P6"]
    t["avg_cost_usd"] = 0.0
    t["cost_coverage"] = 1.0
    svg = pareto_chart_svg(pareto_frontier(t))
    root = ET.fromstring(svg)  # parses: the ids are escaped
    assert {"a<b", "c&d"} <= set(_points(svg))
    # Every config free: the x axis still starts at 0 and spans a positive range.
    xs = {p[0] for p in _points(svg).values()}
    assert len(xs) == 1
    ticks = [
        e.text for e in root.iter() if e.tag.endswith("text") and e.get("text-anchor") == "middle"
    ]
    assert "0" in ticks


def test_chart_bad_suffix(tmp_path):
    with pytest.raises(ValueError):
        pareto_chart(pareto_frontier(table()), tmp_path / "front.jpg")
