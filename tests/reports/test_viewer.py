"""`compare view`'s app over a scripted quiz run (Starlette's test client; the browser test drives it in
chromium): the runs list with the report's own headline, the overview with the report's own tables, a task's
units with their conversations as sent and a diff of two, a running run's events, and what it refuses: writes,
foreign hosts, requests without the token, runs and tasks it does not have."""

from __future__ import annotations

import json
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from data_agent_compare.reports.build import assemble
from data_agent_compare.reports.runs import load_runs
from data_agent_compare.reports.viewer import create_app

from helpers import compare_command, quiz_questions, write_quiz_run


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder `runs/` with one finished quiz run, `quiz` (2 systems × 3 tasks × 2 epochs)."""
    folder = tmp_path_factory.mktemp("viewer")
    files = write_quiz_run(folder, quiz_questions(3), "systems: [tool_use, planning]\nepochs: 2\nconcurrency: 2\n")
    done = subprocess.run(
        compare_command("run", "--config", str(files["config"]), "--out", str(folder / "runs" / "quiz")),
        capture_output=True, text=True, timeout=300, cwd=folder,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return folder / "runs"


@pytest.fixture
def client(runs: Path) -> TestClient:
    return TestClient(create_app([runs]))


def test_the_runs_list_shows_each_run_with_the_reports_own_headline(client: TestClient, runs: Path) -> None:
    listed = client.get("/api/runs").json()["runs"]
    assert [run["key"] for run in listed] == ["quiz"]
    (run,) = listed
    assert (run["benchmark"], run["status"], run["systems"], run["models"]) == (
        "test_quiz", "completed", ["planning", "tool_use"], ["scripted"],
    )  # fmt: skip
    assert (run["done"], run["units"], run["has_report"]) == (12, 12, True)
    assert run["headline"] == assemble(load_runs([runs / "quiz"])).headline


def test_the_overview_is_the_reports_tables_and_a_row_per_unit(client: TestClient, runs: Path) -> None:
    shown = client.get("/api/runs/quiz/overview").json()
    report = assemble(load_runs([runs / "quiz"]))
    assert [row["cells"] for row in shown["main"]["rows"]] == report.tables["overview"].texts()
    assert {row["system"] for row in shown["main"]["rows"]} == {"tool_use", "planning"}  # what the filter reads
    assert [figure["key"] for figure in shown["figures"]] == [figure.key for figure in report.figures]
    units = shown["units"]
    assert len(units) == 12 and {unit["task"] for unit in units} == {"Q0", "Q1", "Q2"}
    assert {unit["verdict"] for unit in units} <= {"correct", "wrong", "unscored"}
    planning = [unit for unit in units if unit["system"] == "planning"]
    assert all("planner_fallback" in unit["warnings"] for unit in planning), planning[0]["warnings"]


def test_a_task_page_has_every_unit_with_its_conversation_as_sent(client: TestClient) -> None:
    page = client.get("/api/runs/quiz/tasks/Q1").json()
    assert (page["task"], page["question"], page["gold"]) == ("Q1", "How many sales teams are there?", "Q1-3")
    units = page["units"]
    assert [(u["system"], u["epoch"]) for u in units] == [
        ("planning", 1),
        ("planning", 2),
        ("tool_use", 1),
        ("tool_use", 2),
    ]
    tool_use = units[2]
    first_call = next(entry for entry in tool_use["entries"] if entry["kind"] == "model_call")
    roles = [message["role"] for message in first_call["messages"]]
    assert roles == ["system", "user"] and "How many sales teams" in first_call["messages"][1]["content"]
    assert "execute_sql" in first_call["tools"]
    later = [entry for entry in tool_use["entries"] if entry["kind"] == "model_call"][1]
    assert any(message["role"] == "tool" for message in later["messages"])  # the SQL result as the model saw it
    assert tool_use["verdict"] in ("correct", "wrong") and tool_use["answer"]


def test_two_units_conversations_are_diffed_line_by_line(client: TestClient) -> None:
    ids = [unit["id"] for unit in client.get("/api/runs/quiz/tasks/Q0").json()["units"]]
    same = client.get("/api/runs/quiz/diff/Q0", params={"a": ids[2], "b": ids[2]}).json()
    assert same["same"] == 1.0 and {row["op"] for row in same["rows"]} == {"equal"}
    apart = client.get("/api/runs/quiz/diff/Q0", params={"a": ids[0], "b": ids[2]}).json()
    assert apart["same"] < 1.0
    changed = [row for row in apart["rows"] if row["op"] != "equal"]
    assert any("write a plan" in (row["a"] or "") for row in changed)  # planning's instructions, not tool_use's
    assert apart["rows"][0] == {
        "op": "equal",
        "a": "question: How many sales teams are there?",
        "b": apart["rows"][0]["b"],
    }
    bad = client.get("/api/runs/quiz/diff/Q0", params={"a": "nonsense", "b": ids[0]})
    assert bad.status_code == 404 and "not a unit id" in bad.json()["error"]
    assert client.get("/api/runs/quiz/diff/Q0").status_code == 400


def test_what_is_not_there_is_404_naming_it(client: TestClient) -> None:
    missing_run = client.get("/api/runs/nothing/overview")
    assert missing_run.status_code == 404 and "no run 'nothing'" in missing_run.json()["error"]
    missing_task = client.get("/api/runs/quiz/tasks/Q9")
    assert missing_task.status_code == 404 and "no task 'Q9'" in missing_task.json()["error"]
    assert client.get("/static/../app.py").status_code == 404
    assert client.get("/runs/quiz/tasks/Q0").headers["content-type"].startswith("text/html")


def test_the_viewer_is_read_only_and_answers_loopback_hosts_only(client: TestClient) -> None:
    for method in ("post", "put", "delete", "patch"):
        assert getattr(client, method)("/api/runs").status_code == 405
    assert client.get("/api/runs", headers={"host": "attacker.example:8765"}).status_code == 403  # DNS rebinding
    assert client.get("/api/runs", headers={"host": "127.0.0.1:8765"}).status_code == 200
    page = client.get("/")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"


def test_bound_elsewhere_every_request_needs_the_token(runs: Path) -> None:
    guarded = TestClient(create_app([runs], token="s3cret-token", loopback=False), follow_redirects=False)
    assert guarded.get("/api/runs").status_code == 401
    assert guarded.get("/api/runs", params={"token": "wrong"}).status_code == 401
    entering = guarded.get("/runs/quiz", params={"token": "s3cret-token"})
    assert entering.status_code == 303 and entering.headers["location"] == "/runs/quiz"  # the token leaves the URL
    assert "HttpOnly" in entering.headers["set-cookie"]
    assert guarded.get("/api/runs").status_code == 200  # the cookie carries it now


def test_report_html_and_the_viewer_link_both_ways(client: TestClient) -> None:
    report = client.get("/runs/quiz/report.html")
    assert report.status_code == 200 and 'id="viewer-link"' in report.text
    assert "default-src 'none'" in report.headers["content-security-policy"]  # the report's own rule, not the app's
    assert client.get("/api/runs/quiz").json()["has_report"] is True


def _running_copy(runs: Path, tmp_path: Path) -> tuple[Path, list[str]]:
    """The quiz run as it was while running: 4 results written, unit Q2/tool_use/1 with a request out."""
    live = tmp_path / "live" / "quiz"
    shutil.copytree(runs / "quiz", live)
    manifest = json.loads((live / "manifest.json").read_text())
    (live / "manifest.json").write_text(json.dumps(manifest | {"status": "running", "finished_at": None}))
    results = (live / "results.jsonl").read_text().splitlines(keepends=True)
    late = [
        line
        for line in results
        if '"task_id":"Q2"' in line.replace(" ", "") and '"system":"tool_use"' in line.replace(" ", "")
    ]
    kept = [line for line in results if line not in late][:4]
    (live / "results.jsonl").write_text("".join(kept))
    first = json.loads(late[0])
    sent = {key: first[key] for key in ("attempt", "task_id", "system", "model", "epoch")} | {"sent": 1}
    (live / "calls.jsonl").write_text(json.dumps(sent) + "\n")
    return live, late


def test_a_running_runs_events_say_what_is_in_flight_then_that_it_ended(runs: Path, tmp_path: Path) -> None:
    live, late = _running_copy(runs, tmp_path)
    client = TestClient(create_app([live.parent]))

    def finish() -> None:
        time.sleep(1.5)
        with (live / "results.jsonl").open("a") as file:
            file.write(late[0])
        time.sleep(1.0)
        manifest = json.loads((live / "manifest.json").read_text())
        (live / "manifest.json").write_text(json.dumps(manifest | {"status": "completed"}))

    threading.Thread(target=finish, daemon=True).start()
    events = []
    with client.stream("GET", "/api/runs/quiz/live") as stream:
        kind = None
        for line in stream.iter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: "):
                events.append((kind, json.loads(line.removeprefix("data: "))))
    progress = [state for kind, state in events if kind == "progress"]
    first = progress[0]
    assert (first["status"], first["done"], first["planned"]) == ("running", 4, 12)
    (flying,) = first["in_flight"]
    assert (flying["task"], flying["system"]) == ("Q2", "tool_use")
    assert flying["step"] == "model call 1 sent, waiting for its reply"
    assert any(state["done"] == 5 and not state["in_flight"] for state in progress)  # it finished, without a reload
    assert events[-1] == ("end", {"status": "completed"})
