"""report.html in a real browser (Debian's chromium, headless, driven by Playwright): no console error, no
request leaves the file, the main table and every chart render, the drill-down filters and opens a task's
trace, and a screenshot is left beside the report for a person to look at."""

import os
import shutil
from pathlib import Path

import pytest
from playwright.sync_api import expect, sync_playwright

from data_agent_compare.reports import build_report

from helpers import FIXTURES

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"]


def chromium_or_skip() -> Path:
    found = CHROMIUM if CHROMIUM.exists() else shutil.which("chromium")
    if found:
        return Path(found)
    if os.environ.get("CI") == "true":
        pytest.fail("CI installs chromium (setup.sh), yet /usr/bin/chromium is missing")
    pytest.skip("no chromium on this machine: apt-get install chromium (setup.sh does)")


@pytest.fixture
def browser():
    executable = chromium_or_skip()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(executable), args=FLAGS)
        yield launched
        launched.close()


@pytest.mark.slow
def test_the_report_renders_offline_and_its_drill_down_filters(tmp_path, browser):
    files = build_report([FIXTURES / "report_run"], tmp_path)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    problems, requests = [], []
    page.on("console", lambda message: problems.append(message.text) if message.type in ("error", "warning") else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on("request", lambda request: requests.append(request.url))
    page.goto(files.files["html"].as_uri())

    figures = [key.removeprefix("figure:") for key in files.files if key.startswith("figure:")]
    assert figures, "the fixture's report has charts"
    for key in figures:  # vega-embed draws each chart as an SVG with marks in it
        page.wait_for_selector(f"#chart-{key} svg .mark-symbol, #chart-{key} svg .mark-rect", timeout=20_000)
    rows = page.locator("#main-table tbody tr")
    assert rows.count() == 6 and "tool_use" in page.locator("#main-table").inner_text()
    page.screenshot(path=str(tmp_path / "report.png"))

    count = page.locator("#match-count")
    everything = count.inner_text()
    page.select_option("#filter-failure", "provider error")
    assert count.inner_text().startswith("1 of 6 tasks, 1 runs match")
    task = page.locator("details.task")
    assert task.count() == 1
    task.locator("summary").click()
    expect(task).to_contain_text("infra_error")
    assert "reflection" in task.inner_text()
    task.locator("details.trace summary").first.click()
    expect(task.locator("table.timeline")).to_have_count(1)  # drawn when the trace is opened

    page.click("#filter-reset")
    assert count.inner_text() == everything
    page.locator("#main-table a.drill[data-filter*='infra_error']").click()  # a count cell opens its tasks
    assert count.inner_text().startswith("1 of 6 tasks, 1 runs match")
    assert page.locator("#filter-status").input_value() == "infra_error"

    assert problems == []
    assert requests == [files.files["html"].as_uri()]
    full = tmp_path / "report-full.png"
    page.screenshot(path=str(full), full_page=True)
    assert (tmp_path / "report.png").stat().st_size > 0 and full.stat().st_size > 0
