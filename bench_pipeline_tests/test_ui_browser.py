"""The Dagster UI in headless Chromium after a real (small) benchmark: the asset graph, the
Pareto chart in the frontier's metadata, and the asset checks on their assets' pages.

Uses Debian's /usr/bin/chromium through playwright-python (a downloaded browser does not
install on these machines); screenshots are saved under the test's tmp folder."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.servers import (
    graphql,
    start_webserver,
    stopping,
    wait_for_code_location,
)

pytestmark = pytest.mark.slow

CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
ASSETS = [
    "task_set",
    "trials",
    "scores",
    "config_table",
    "task_grid",
    "recommendations",
    "pareto_frontier",
    "config_table_by_tag",
    "recommendations_by_tag",
    "paired_comparison",
    "regressions",
]
GROUPS = ["tasks", "trials", "results"]
# The global lineage page keeps expanded groups in localStorage; open them all up front so every
# asset node (not just the three collapsed groups) is on the graph.
EXPAND_GROUPS = (
    "localStorage.setItem('asset-graph-open-graph-nodes-global-__GLOBAL__', JSON.stringify("
    "{expanded: '" + ",".join(f"global@global:{g}" for g in GROUPS) + "'}));"
)
UI_TIMEOUT_MS = 90_000  # a 2-core CI machine renders the first page slowly


def _chromium() -> str | None:
    for candidate in (
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if candidate and Path(candidate).exists():
            return candidate
    return None


@pytest.fixture()
def finished_run(factory: Path, bench_home: Path) -> str:
    """A small finished benchmark in this test's BENCH_HOME/DAGSTER_HOME."""
    code, out, err = run_bench(
        "run",
        str(factory / "launches" / "demo.yaml"),
        "--max",
        "3",
        "--repeats",
        "1",
        "--quiet",
        home=bench_home,
    )
    assert code == 0, err
    assert "reference" in out
    return out


def _body_words(page) -> set[str]:
    return set(page.inner_text("body").split())


def _wait_for_words(page, words: list[str], timeout_s: float) -> set[str]:
    deadline = time.monotonic() + timeout_s
    while True:
        seen = _body_words(page)
        if set(words) <= seen or time.monotonic() > deadline:
            return seen
        page.wait_for_timeout(500)


def test_ui_shows_graph_chart_and_checks(
    finished_run: str, bench_home: Path, tmp_path: Path
) -> None:
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium is not installed (make system-deps installs Debian's chromium)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install -e '.[dev]')"
    )
    shots = tmp_path / "screenshots"
    shots.mkdir()

    server = start_webserver(
        dagster_home=bench_home / "dagster_home", bench_home=bench_home, log_dir=tmp_path / "logs"
    )
    with stopping(server):
        wait_for_code_location(server)
        # The first visit shows a "Join the Dagster community" dialog over every page; mark it
        # seen on this throwaway instance.
        graphql(server.url, "mutation { setNuxSeen }")
        with (
            tempfile.TemporaryDirectory(dir=tmp_path) as profile,
            sync_api.sync_playwright() as pw,
        ):
            browser = pw.chromium.launch_persistent_context(
                profile,  # a fresh --user-data-dir
                executable_path=chromium,
                headless=True,
                args=CHROMIUM_FLAGS,
                viewport={"width": 1920, "height": 1500},
            )
            try:
                browser.set_default_timeout(UI_TIMEOUT_MS)
                browser.add_init_script(EXPAND_GROUPS)
                page = browser.new_page()
                _check_graph(page, server.url, shots)
                _check_pareto(page, server.url, shots)
                _check_checks(
                    page, server.url, "config_table", ["grader_integrity", "cost_coverage"], shots
                )
                _check_checks(page, server.url, "regressions", ["regression_tolerance"], shots)
            finally:
                browser.close()


def _check_graph(page, url: str, shots: Path) -> None:
    page.goto(f"{url}/asset-groups", wait_until="domcontentloaded")
    page.get_by_text("Global asset lineage").first.wait_for()
    seen = _wait_for_words(page, ASSETS, 90)
    # Let the nodes' statuses load before the screenshot ("Loading..." under each node).
    deadline = time.monotonic() + 60
    while page.get_by_text("Loading...").count() and time.monotonic() < deadline:
        page.wait_for_timeout(500)
    page.screenshot(path=str(shots / "asset_graph.png"))
    missing = [a for a in ASSETS if a not in seen]
    assert not missing, f"assets missing on the global asset lineage page: {missing}"
    assert "Materialized" in _body_words(page), "the graph shows no materialized asset"


def _check_pareto(page, url: str, shots: Path) -> None:
    page.goto(f"{url}/assets/pareto_frontier", wait_until="domcontentloaded")
    # The latest materialization's metadata: the markdown "chart" entry and its file path.
    page.get_by_text("chart_path", exact=True).first.wait_for()
    seen = _body_words(page)
    assert "chart" in seen and "frontier" in seen, "the chart metadata entry is not shown"
    # The frontier chart is inline: visible on the page before any click.
    inline = page.locator("img[src^='data:image/svg+xml;base64,']").first
    inline.wait_for(state="visible")
    size = inline.evaluate(
        "el => [el.naturalWidth, el.naturalHeight, el.getBoundingClientRect().width]"
    )
    assert size[0] > 100 and size[1] > 100 and size[2] > 100, f"no inline chart: {size}"
    page.screenshot(path=str(shots / "pareto_frontier.png"), full_page=True)
    # The full chart (SVG) stays one click away: the chart row's value is a "[Show Markdown]"
    # button; the dialog renders the data URI image, wider than the inline one (300 px).
    chart_row = page.locator("tr", has=page.get_by_text("chart", exact=True))
    chart_row.get_by_text("Show Markdown").first.click()
    svgs = "img[src^='data:image/svg+xml;base64,']"
    page.wait_for_function(
        f"() => [...document.querySelectorAll({svgs!r})].some(i => i.naturalWidth >= 700)"
    )
    size = page.evaluate(
        f"() => [...document.querySelectorAll({svgs!r})]"
        ".map(i => [i.naturalWidth, i.naturalHeight]).sort((a, b) => b[0] - a[0])[0]"
    )
    assert size[0] >= 700 and size[1] > 300, f"the Pareto chart image did not decode: {size}"
    page.screenshot(path=str(shots / "pareto_chart.png"))
    page.keyboard.press("Escape")


def _check_checks(page, url: str, asset: str, checks: list[str], shots: Path) -> None:
    page.goto(f"{url}/assets/{asset}?view=checks", wait_until="domcontentloaded")
    seen = _wait_for_words(page, checks + ["Evaluation"], 90)
    page.screenshot(path=str(shots / f"{asset}_checks.png"))
    missing = [c for c in checks if c not in seen]
    assert not missing, f"asset checks missing on the {asset} page: {missing}"
    assert "Evaluation" in seen, f"no check evaluation shown on the {asset} page"
