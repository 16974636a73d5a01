"""The results explorer (`bench report`) in real headless Chromium, offline.

The page is loaded with every request intercepted (and aborted): the test asserts none was made.
Expected values come from the warehouse and the trials' evidence folders, not from the page.
Uses Debian's /usr/bin/chromium through playwright-python, as test_ui_browser.py does."""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from bench_pipeline.results.pareto import pareto_frontier
from bench_pipeline_tests.conftest import run_bench
from bench_pipeline_tests.http_fakes import Recorded, Reply, ScriptedServer
from bench_pipeline_tests.test_ui_browser import CHROMIUM_FLAGS, _chromium

pytestmark = pytest.mark.slow
TIMEOUT_MS = 60_000


@pytest.fixture()
def browser(tmp_path: Path) -> Iterator[object]:
    """Headless Chromium. Tests ask for it once their `bench` runs are done: playwright's sync
    API keeps an asyncio loop running in this thread, and a Dagster run inside it cannot close
    its own loop (Dagster's cleanup then leaves a coroutine never awaited)."""
    chromium = _chromium()
    if chromium is None:
        pytest.skip("chromium is not installed (make system-deps installs Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    with (
        tempfile.TemporaryDirectory(dir=tmp_path) as profile,
        sync_api.sync_playwright() as pw,
    ):
        context = pw.chromium.launch_persistent_context(
            profile,
            executable_path=chromium,
            headless=True,
            args=CHROMIUM_FLAGS,
            viewport={"width": 1280, "height": 900},
        )
        context.set_default_timeout(TIMEOUT_MS)
        try:
            yield context
        finally:
            context.close()


def _open_offline(context, html: str):
    """A page holding `html`, every request it tries recorded and aborted."""
    requests: list[str] = []

    def refuse(route) -> None:
        requests.append(route.request.url)
        route.abort()

    page = context.new_page()
    page.route("**/*", refuse)
    page.on("request", lambda r: requests.append(r.url))
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.set_content(html, wait_until="load")
    page.locator("#grid").wait_for()
    assert not errors, errors
    return page, requests


def _no_horizontal_scroll(page) -> None:
    width, client = page.evaluate(
        "[document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert width <= client, f"horizontal scroll at 1280 px: {width} > {client}"


def _report(home: Path, out: Path) -> str:
    code, _, err = run_bench("report", "--out", str(out), home=home)
    assert code == 0, err
    return out.read_text(encoding="utf-8")


def _frontier(table: pd.DataFrame, x: str) -> str:
    f = pareto_frontier(table, x=x, y="overall")
    return ",".join(sorted(f.loc[f["on_frontier"], "config_id"]))


def _plotted(table: pd.DataFrame, x: str) -> list[str]:
    f = pareto_frontier(table, x=x, y="overall")
    return sorted(f.loc[f["excluded_reason"].isna(), "config_id"])


def _points(page) -> list[str]:
    return sorted(g.get_attribute("data-config") for g in page.locator("#pareto g.pt").all())


def test_demo_report_explorer_offline(
    factory: Path, bench_home: Path, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    code, _, err = run_bench(
        "run", str(factory / "launches" / "demo.yaml"), "--quiet", home=bench_home
    )
    assert code == 0, err
    code, out, err = run_bench("results", "--json", home=bench_home)
    assert code == 0, err
    table = pd.DataFrame(json.loads(out)["config_table"])
    html = _report(bench_home, tmp_path / "report.html")
    assert "://" not in html.replace("\\/", "/").replace(":\\/\\/", "")

    page, requests = _open_offline(request.getfixturevalue("browser"), html)
    _no_horizontal_scroll(page)

    # A failed cell -> its trials -> one trial: diff, check exit code and output, cost.
    failed = page.locator("td.cell[data-state=failed][data-config=replay]").first
    task = failed.get_attribute("data-task")
    failed.click()
    rows = page.locator("#cell-trials tr.trialrow")
    assert rows.count() == 2  # the cell's two repetitions, and only them
    trial_id = rows.first.get_attribute("data-trial")
    assert trial_id.startswith(f"{task}/replay/")
    rows.first.click()
    view = page.locator("#trial-view")
    view.wait_for()
    evidence = Path(view.locator("tr", has_text="evidence").locator("td").inner_text().strip())
    meta = json.loads((evidence / "metadata.json").read_text())
    assert meta["trial_id"] == trial_id
    patch = (evidence / "changes.patch").read_text()
    diff = page.locator("#trial-diff")
    assert patch.splitlines()[0] in diff.inner_text()
    assert diff.locator("span.add").count() + diff.locator("span.del").count() > 0
    checks = json.loads((evidence / "checks.json").read_text())
    check = next(c for c in checks if c["status"] == "failed")
    assert check["exit_code"] not in (0, None)
    box = page.locator(f"#trial-checks [data-check='{check['id']}']")
    assert f"exit code {check['exit_code']}" in box.locator(".exit-code").inner_text()
    assert box.locator(".check-output").inner_text().strip() == check["output"].strip()
    assert "graders/" in box.locator(".command").inner_text()
    assert page.locator("#trial-cost").inner_text() == f"${meta['cost_usd']:.4f}"
    assert page.locator("#trial-transcript .ev").count() >= 1
    _no_horizontal_scroll(page)
    page.screenshot(path=str(tmp_path / "explorer_trial.png"), full_page=True)

    # The chart: switching x to average time recomputes the frontier.
    # The demo's replay has no known cost, so it is plotted on time only: the switch changes
    # what is drawn whatever the trials' durations (which config is fastest is the machine's
    # load, not something a test can rely on).
    by_cost, by_time = _frontier(table, "avg_cost_usd"), _frontier(table, "avg_duration_seconds")
    assert _plotted(table, "avg_cost_usd") == ["noop", "reference"]
    assert _plotted(table, "avg_duration_seconds") == ["noop", "reference", "replay"]
    shown = lambda: ",".join(  # noqa: E731
        sorted(page.locator("#frontier-list").get_attribute("data-frontier").split(","))
    )
    assert shown() == by_cost
    assert _points(page) == ["noop", "reference"]
    page.select_option("#x-axis", "avg_duration_seconds")
    assert shown() == by_time
    assert _points(page) == ["noop", "reference", "replay"]
    assert page.locator("#pareto").get_attribute("data-x") == "avg_duration_seconds"
    assert page.locator("#pareto g.frontier").count() == len(by_time.split(","))

    # Not scored is not failed: another look, and the reason is on the cell.
    unscored = page.locator("td.cell[data-state=unscored]").first
    failed = page.locator("td.cell[data-state=failed]").first
    style = "el => [getComputedStyle(el).backgroundColor, getComputedStyle(el).backgroundImage]"
    assert unscored.evaluate(style) != failed.evaluate(style)
    assert "not scored" in unscored.inner_text() and "not_applicable" in unscored.inner_text()

    # Failures only hides every passing cell and keeps the failures.
    assert page.locator("td.cell[data-state=passed]").count() > 0
    n_failed = page.locator("td.cell[data-state=failed]").count()
    page.check("#f-failures")
    assert page.locator("td.cell[data-state=passed]").count() == 0
    assert page.locator("td.cell[data-state=failed]").count() == n_failed

    page.uncheck("#f-failures")

    # Holdouts only: every remaining task is a holdout (the example has 4).
    page.select_option("#f-holdout", "only")
    tasks = page.locator("#grid tbody tr")
    assert tasks.count() == 4
    assert all("holdout" in tasks.nth(i).inner_text() for i in range(tasks.count()))
    page.select_option("#f-holdout", "all")

    # A tag tab: the grid keeps only that tag's tasks, the config table shows that tag's rows.
    page.click("#tabs button[data-tab=validation]")
    assert "tag validation" in page.locator("h2", has_text="Configurations").inner_text()
    grid_tasks = [
        page.locator("#grid tbody tr").nth(i).locator("td").first.inner_text().split()[0]
        for i in range(page.locator("#grid tbody tr").count())
    ]
    assert grid_tasks and "amount-precision" in grid_tasks and "atomic-save" not in grid_tasks
    page.click("#tabs button[data-tab='']")

    # Paired comparisons are named, not columns 0 and 1.
    paired = page.locator("#paired").inner_text()
    assert "reference vs replay" in paired and "noop vs replay" in paired
    _no_horizontal_scroll(page)
    assert requests == [], f"the report made requests: {requests}"


def test_text_suite_report_shows_turns(
    factory: Path,
    bench_home: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    monkeypatch.setenv("SUPPORT_BOT_KEY", "support-key-123456")
    answers: list[str] = []

    def chat(req: Recorded) -> Reply:
        n = len([m for m in req.body["messages"] if m["role"] == "user"])
        text = (
            f"Answer {n}: change the billing email in Settings > Billing; see "
            "https://docs.example.com/billing. Past invoices will not be resent and you will "
            "get a confirmation email."
        )
        answers.append(text)
        return Reply(
            200,
            {
                "choices": [{"message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 50, "completion_tokens": 40},
            },
        )

    with ScriptedServer(handler=chat) as server:
        bot = factory / "agents" / "support-bot.yaml"
        bot.write_text(bot.read_text().replace("http://127.0.0.1:8765/v1", server.url + "/v1"))
        code, _, err = run_bench(
            "run",
            str(factory / "launches" / "support.yaml"),
            "--name",
            "change-billing-email",
            "--repeats",
            "1",
            "--quiet",
            home=bench_home,
        )
        assert code == 0, err
    html = _report(bench_home, tmp_path / "support.html")
    page, requests = _open_offline(request.getfixturevalue("browser"), html)
    page.locator("td.cell[data-task=change-billing-email]").first.click()
    page.locator("#cell-trials tr.trialrow").first.click()
    turns = page.locator("#trial-turns .turn")
    assert turns.count() == len(answers) == 3
    for i, answer in enumerate(answers):
        turn = turns.nth(i)
        assert turn.locator(".answer").inner_text().strip() == answer
        rows = turn.locator("table.asserts tr")
        assert rows.count() > 1  # a header and one row per assertion
        assert any(s in turn.locator("table.asserts").inner_text() for s in ("passed", "failed"))
    assert page.locator("#scenario-turns").count() == 1
    page.screenshot(path=str(tmp_path / "explorer_text_suite.png"), full_page=True)
    _no_horizontal_scroll(page)
    assert requests == [], f"the report made requests: {requests}"
