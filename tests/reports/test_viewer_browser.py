"""`compare view` in a real browser (Debian's chromium, headless, driven by Playwright) over scripted quiz runs:
the runs list, a run's overview with its charts, a filter applied, a click into a task, the conversations side
by side and diffed, the links to report.html and back; and `compare run --view`, whose page follows the run
without a reload. The screenshots go to $VIEWER_SCREENSHOTS (docs/viewer/ holds the ones the docs show:
`VIEWER_SCREENSHOTS=docs/viewer pytest tests/reports/test_viewer_browser.py` makes them again)."""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from data_agent_compare.reports.viewer import start_in_background

from helpers import ROOT, compare_command, quiz_questions, write_quiz_run

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("VIEWER_SCREENSHOTS")
    folder = (
        (ROOT / given if not Path(given).is_absolute() else Path(given)) if given else tmp_path_factory.mktemp("shots")
    )
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _quiz_run(
    folder: Path, tasks: int, settings: str, *flags: str, env: dict[str, str] | None = None
) -> subprocess.Popen[str]:
    files = write_quiz_run(folder, quiz_questions(tasks), settings)
    command = compare_command("run", "--config", str(files["config"]), *flags)
    environment = {**os.environ, **(env or {})}
    return subprocess.Popen(
        command, cwd=folder, env=environment, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("viewer-browser")
    running = _quiz_run(
        folder, 3, "systems: [tool_use, planning]\nepochs: 2\nconcurrency: 2\n", "--out", str(folder / "runs" / "quiz")
    )
    _, err = running.communicate(timeout=300)
    assert running.returncode == 0, err
    return folder / "runs"


def _watched(page: Page) -> list[str]:
    problems: list[str] = []
    page.on("console", lambda message: problems.append(message.text) if message.type in ("error", "warning") else None)
    page.on("pageerror", lambda error: problems.append(str(error)))
    return problems


def test_the_runs_an_overview_a_filter_a_task_and_its_conversations(
    browser: Browser, runs: Path, screenshots: Path
) -> None:
    served = start_in_background([runs])
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        problems = _watched(page)
        requests: list[str] = []
        page.on("request", lambda request: requests.append(request.url))
        page.goto(served.url)
        row = page.locator("#runs-table tr[data-run='quiz']")
        expect(row).to_contain_text("test_quiz")
        expect(row).to_contain_text("completed")
        expect(row).to_contain_text("12 / 12")
        page.screenshot(path=str(screenshots / "runs.png"))

        row.locator("a").click()
        expect(page).to_have_url(re.compile(r"/runs/quiz$"))
        expect(page.locator("#main-table tbody tr")).to_have_count(2)
        page.wait_for_selector("#charts svg .mark-symbol, #charts svg .mark-rect", timeout=30_000)  # vega drew
        count = page.locator("#match-count")
        expect(count).to_have_text("12 of 12 units match")
        page.screenshot(path=str(screenshots / "overview.png"), full_page=True)

        page.select_option("#filter-system", "tool_use")
        expect(count).to_have_text("6 of 12 units match")
        systems = page.locator("#units-table tbody tr td:nth-child(2)").all_inner_texts()
        assert systems == ["tool_use"] * 6
        expect(page.locator("#main-table tbody tr:not([hidden])")).to_have_count(1)
        assert "system=tool_use" in page.url  # the filter is in the address: a link shows the same view
        page.fill("#filter-task", "Q2")
        expect(count).to_have_text("2 of 12 units match")
        page.click("#filter-reset")
        expect(count).to_have_text("12 of 12 units match")

        page.locator("#units-table tbody tr", has_text="tool_use").first.locator("a").click()
        expect(page).to_have_url(re.compile(r"/runs/quiz/tasks/Q\d$"))
        expect(page.locator("#task-units .unit")).to_have_count(4)
        expect(page.locator("#question")).to_have_text("How many sales teams are there?")
        unit = page.locator("#task-units .unit", has_text="tool_use / scripted · epoch 1")
        expect(unit.locator(".message.system pre").first).to_contain_text("call the `answer` tool")
        expect(unit.locator(".message.user pre").first).to_contain_text("How many sales teams")
        expect(unit.locator(".message.tool").first).to_be_visible()  # the SQL result as the model saw it
        expect(unit.locator(".entry.tool_call").first).to_contain_text("execute_sql")
        page.screenshot(path=str(screenshots / "task.png"))

        page.select_option("#diff-a", index=0)
        page.select_option("#diff-b", index=2)
        page.click("#diff-show")
        expect(page.locator("table.diff tr.replace").first).to_be_visible()
        expect(page.locator("#diff")).to_contain_text("% of the lines alike")
        page.locator("table.diff").screenshot(path=str(screenshots / "diff.png"))

        page.goto(served.url + "runs/quiz")
        page.click("#report-link")
        expect(page).to_have_url(re.compile(r"/runs/quiz/report\.html$"))
        expect(page.locator("#main-table")).to_contain_text("tool_use")
        page.click("#viewer-link")
        expect(page).to_have_url(re.compile(r"/runs/quiz$"))
        expect(page.locator("#main-table tbody tr")).to_have_count(2)

        assert problems == []
        origin = served.url.rstrip("/")
        assert all(url.startswith(origin) or url.startswith("data:") for url in requests), requests
    finally:
        served.stop()


def test_compare_run_view_follows_the_run_without_a_reload(browser: Browser, tmp_path: Path, screenshots: Path) -> None:
    running = _quiz_run(
        tmp_path, 8, "systems: [tool_use]\nconcurrency: 1\n", "--out", str(tmp_path / "runs" / "live"), "--view",
        env={"MODEL_DELAY_S": "0.5"},
    )  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(running.stderr or []), daemon=True)
    reader.start()
    try:
        address = _viewer_address(lines, running)
        assert address.endswith("/runs/live")
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        problems = _watched(page)
        page.goto(address)
        progress = page.locator("#live-progress")
        expect(page.locator("#live")).to_be_visible(timeout=20_000)
        expect(progress).to_contain_text("in flight", timeout=20_000)
        page.evaluate("window.sameDocument = true")  # gone if the page reloads
        expect(page.locator("#live-in-flight tbody tr").first).to_contain_text("model call", timeout=20_000)
        first = _done(progress.inner_text())
        page.wait_for_function(
            f"() => /^(\\d+) of/.exec(document.getElementById('live-progress').textContent)?.[1] > {first}",
            timeout=30_000,
        )
        expect(page.locator("#units-table tbody tr").first).to_be_visible(timeout=20_000)  # the tables follow too
        page.screenshot(path=str(screenshots / "live.png"))
        expect(progress).to_contain_text("the run ended: completed", timeout=60_000)
        expect(page.locator("#match-count")).to_have_text("8 of 8 units match", timeout=20_000)
        assert page.evaluate("window.sameDocument") is True
        assert problems == []
        assert running.wait(timeout=60) == 0
    finally:
        if running.poll() is None:
            running.kill()


def _viewer_address(lines: list[str], running: subprocess.Popen[str]) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for line in lines:
            found = re.search(r"viewer: (http://127\.0\.0\.1:\d+/runs/\S+)", line)
            if found:
                return found.group(1)
        if running.poll() is not None:
            break
        time.sleep(0.1)
    raise AssertionError("compare run --view printed no viewer address:\n" + "".join(lines))


def _done(text: str) -> int:
    found = re.match(r"(\d+) of", text)
    assert found, text
    return int(found.group(1))
