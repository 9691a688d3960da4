"""report.html in a real browser (Debian's chromium, headless, driven by Playwright): no console error, no
request leaves the file, the main table and every chart render, the drill-down filters and opens a task's
trace, and a screenshot is left beside the report for a person to look at."""

import pytest
from playwright.sync_api import expect

from data_agent_compare.reports import build_report

from helpers import FIXTURES


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


# Every pair of visible <text> boxes of one chart that overlap by more than a pixel each way (a label Vega
# hid for lack of room has opacity 0 and does not count).
OVERLAPPING_TEXT = """(key) => {
  const svg = document.querySelector('#chart-' + key + ' svg');
  const visible = (element) => {
    for (let e = element; e && e !== svg; e = e.parentElement) {
      const style = getComputedStyle(e);
      if (style.display === 'none' || style.visibility === 'hidden' || style.opacity === '0') return false;
      if (e.getAttribute('opacity') === '0' || e.getAttribute('fill-opacity') === '0') return false;
    }
    return true;
  };
  const boxes = [...svg.querySelectorAll('text')]
    .filter((t) => t.textContent.trim() && visible(t))
    .map((t) => [t.textContent, t.getBoundingClientRect()])
    .filter(([, b]) => b.width > 0 && b.height > 0);
  const pairs = [];
  for (let i = 0; i < boxes.length; i++)
    for (let j = i + 1; j < boxes.length; j++) {
      const [a, b] = [boxes[i][1], boxes[j][1]];
      const wide = Math.min(a.right, b.right) - Math.max(a.left, b.left);
      const high = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
      if (wide > 1 && high > 1) pairs.push([boxes[i][0], boxes[j][0]]);
    }
  return {texts: boxes.length, overlapping: pairs};
}"""


def chart_texts(page, files) -> dict[str, dict]:
    """Each chart of the report, drawn: its number of visible texts and the pairs of them that overlap."""
    found = {}
    for key in [key.removeprefix("figure:") for key in files.files if key.startswith("figure:")]:
        page.wait_for_selector(f"#chart-{key} svg .mark-symbol, #chart-{key} svg .mark-rect", timeout=30_000)
        found[key] = page.evaluate(OVERLAPPING_TEXT, key)
    return found


@pytest.mark.slow
def test_no_two_labels_of_a_chart_overlap_with_24_system_model_rows(tmp_path, browser, wide_run):
    files = build_report([wide_run(systems=12, tasks=12)], tmp_path / "report")  # 12 systems × 2 models
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(files.files["html"].as_uri())
    assert page.locator("#main-table tbody tr").count() == 24
    charts = chart_texts(page, files)
    assert {"cost_quality", "phase_latency", "accuracy_difficulty", "tool_scores"} <= set(charts)
    assert all(chart["texts"] > 10 for chart in charts.values())  # axes, legends and labels were drawn
    assert {key: chart["overlapping"] for key, chart in charts.items() if chart["overlapping"]} == {}
    shot = tmp_path / "report" / "charts-24-rows.png"  # kept beside the report for a person to look at
    page.locator("#charts").screenshot(path=str(shot))
    assert shot.stat().st_size > 0


@pytest.mark.slow
def test_a_multi_benchmark_report_renders_its_overview_and_every_chart(tmp_path, browser, wide_run):
    runs = [wide_run("bundled", systems=4, tasks=6), wide_run("dabstep", benchmark="dabstep", systems=3, tasks=6)]
    runs.append(wide_run("dab", benchmark="dab", systems=12, tasks=6, epochs=3))  # 12 pass@k panels
    files = build_report(runs, tmp_path / "report")
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    problems = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.goto(files.files["html"].as_uri())
    overview = page.locator("#main-table")
    assert overview.locator("tbody tr").count() == 4 * 2 + 3 * 2 + 12 * 2
    assert "dabstep" in overview.inner_text() and "bundled" in overview.inner_text()
    charts = chart_texts(page, files)
    assert any(key.startswith("dabstep-") for key in charts) and any(key.startswith("bundled-") for key in charts)
    assert "dab-pass_at_k" in charts
    assert {key: chart["overlapping"] for key, chart in charts.items() if chart["overlapping"]} == {}
    shot = tmp_path / "report" / "overview.png"
    page.locator("#summary").screenshot(path=str(shot))
    assert shot.stat().st_size > 0 and problems == []
