"""Spend of calls in flight survives `kill -9` (issue 19): every request is journaled before it is sent, so
after the runner is killed with requests waiting at the server, the spend journal accounts for every request
the server received — answered (a finished call) or not (sent, never answered) — and the summary says so."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest
from typer.testing import CliRunner

from data_agent_compare.cli.main import app
from data_agent_compare.core.runlog import read_run

from helpers import FIXTURES, ROOT, FakeOpenAIServer, FakeResponse, RecordedRequest, fault_response, tool_call_response

ANSWERED = 4  # the first requests are answered; every later one waits at the server until the runner dies
CONCURRENCY = 3


def answer_then_hang(fake: FakeOpenAIServer):
    def respond(request: RecordedRequest) -> FakeResponse:
        if len(fake.requests) <= ANSWERED:
            return tool_call_response([("c1", "query_database", '{"collection_name": "Restaurants"}')])
        return fault_response("hang")

    return respond


def wait_for_requests(fake: FakeOpenAIServer, count: int, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while len(fake.requests) < count:
        assert time.monotonic() < deadline, f"the server received {len(fake.requests)} of {count} requests"
        time.sleep(0.05)
    time.sleep(0.5)  # nothing more can come: every unit running waits for its answer


@pytest.mark.slow  # a real `compare` process against a fake server: ~15 s
def test_kill_9_with_requests_in_flight_loses_none_of_them_from_the_journal(tmp_path):
    run = tmp_path / "run"
    with FakeOpenAIServer() as fake:
        fake.responder = answer_then_hang(fake)
        flags = ["--models", "openai-compatible:m", "--base-url", fake.base_url, "--limit", "10"]
        flags += ["--benchmark", "dbgorilla", "--tasks-path", str(FIXTURES / "dbgorilla/queries-sample.json")]
        flags += ["--concurrency", str(CONCURRENCY), "--out", str(run)]
        child = subprocess.Popen([sys.executable, "-m", "data_agent_compare.cli", *flags], cwd=ROOT,
                                 stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)  # fmt: skip
        try:
            wait_for_requests(fake, ANSWERED + CONCURRENCY)
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(timeout=30)
        served = len(fake.requests)

    log = read_run(run)
    unanswered = sum(spent.in_flight_calls for spent in log.interrupted)
    assert served == ANSWERED + CONCURRENCY
    assert len(log.records) == ANSWERED and log.journaled_calls == ANSWERED
    assert unanswered == CONCURRENCY and len(log.interrupted) == CONCURRENCY  # one waiting request per unit
    assert log.journaled_calls + unanswered == served

    reported = CliRunner().invoke(app, ["report", str(run)])
    assert reported.exit_code == 0, reported.output
    summary = (run / "summary.md").read_text()
    assert f"{CONCURRENCY} more call(s) were in flight when the run stopped (usage unknown)" in summary
