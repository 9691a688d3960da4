"""Helpers shared by the tests (the one module tests import besides the suite): paths of the
fixtures, the scripted test model, run plans without the CLI, and a local OpenAI-compatible
fake server.

The fake server stands in for OpenRouter / any OpenAI-compatible endpoint: it serves
`POST .../chat/completions` on 127.0.0.1 from a scripted queue of responses (real-shaped bodies,
error statuses, Retry-After headers, OpenRouter's 200-with-error), records every request it
receives, and can add a fixed artificial latency per response. `load_recorded(path)` replays
response bodies recorded as JSONL.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import socket
import sqlite3
import string
import struct
import subprocess
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import pytest

from data_agent_compare.core import (
    PROVIDERS,
    SYSTEMS,
    Benchmark,
    Budgets,
    CallContext,
    Message,
    ModelConfig,
    ModelRequest,
    ModelResponse,
    ResultRecord,
    System,
    Task,
    ToolEnvironment,
    ToolSettings,
    ToolSpec,
    Trace,
    TraceRecorder,
    create_benchmark,
    create_system,
    register_provider,
    register_system,
)
from data_agent_compare.core.model import forget_provider
from data_agent_compare.core.scorer import SCORER_INFO, SCORERS, scorer_info
from data_agent_compare.engine.config import RunConfig
from data_agent_compare.engine.runner import RunPlan, execute
from data_agent_compare.providers.scripted import ScriptedProvider
from data_agent_compare.systems.palimpzest_worker import install_network_guard
from data_agent_compare.tools.postgres import PostgresUnavailable, find_bin_dir

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"

# A child Python that reacts to Ctrl-C even when the test runs as a background job, which starts with
# SIGINT ignored and passes that on to every child: tests that send SIGINT put this first.
DELIVER_CTRL_C = "import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"


def compare_command(*flags: str) -> list[str]:
    """`compare FLAGS` in a child process that Ctrl-C reaches (DELIVER_CTRL_C)."""
    main = "import runpy, sys; sys.argv[0] = 'compare'; runpy.run_module('data_agent_compare.cli', run_name='__main__')"
    return [sys.executable, "-c", DELIVER_CTRL_C + main, *flags]


# ---------------------------------------------------------------- the scripted test model

SCRIPTED = ModelConfig(alias="scripted", provider="scripted", model_id="scripted-test-model")
Responder = Callable[[ModelRequest, CallContext], Message | ModelResponse]


def steps_taken(request: ModelRequest) -> int:
    """How many assistant turns the conversation already has (the scripted model's step counter)."""
    return sum(m.role == "assistant" for m in request.messages)


@contextlib.contextmanager
def scripted_provider() -> Iterator[Callable[[Responder], ModelConfig]]:
    """`install(respond)` registers a scripted test model as provider "scripted" (and returns its
    ModelConfig); everything installed is unregistered when the block ends."""

    def install(respond: Responder) -> ModelConfig:
        provider = ScriptedProvider(respond)
        register_provider("scripted")(lambda: provider)
        return SCRIPTED

    try:
        yield install
    finally:
        PROVIDERS.unregister("scripted")
        forget_provider("scripted")


@contextlib.contextmanager
def registered_system(cls: type[System]) -> Iterator[type[System]]:
    """A test-only system, registered under its name for the block (never at import time)."""
    register_system(cls)
    try:
        yield cls
    finally:
        SYSTEMS.unregister(cls.name)


def recorder(**budgets: Any) -> TraceRecorder:
    return TraceRecorder(Trace(task_id="t", system="s", model="m"), Budgets(**budgets))


# ---------------------------------------------------------------- running tasks without the CLI


def make_plan(
    tmp_path: Path,
    tasks: list[Task],
    model: ModelConfig,
    systems: list[str],
    benchmark: Benchmark | None = None,
    **config: object,
) -> RunPlan:
    """A run plan of these tasks; the benchmark (default: the tasks' own, its files unread) gives
    their tools and scorers."""
    run_config = RunConfig(workflows=systems, models=[model.alias], out=str(tmp_path / "run"), **config)
    return RunPlan(
        config=run_config,
        benchmark=benchmark or create_benchmark(tasks[0].benchmark, tmp_path / "unread"),
        tasks=tasks,
        systems={name: create_system(name) for name in systems},
        models=[model],
        run_dir=tmp_path / "run",
    )


def run_task(
    tmp_path: Path, model: ModelConfig, task: Task, system: str, instance: System | None = None, **config: object
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """Run one task through the real runner; returns its result record, trace and the manifest, as JSON."""
    plan = make_plan(tmp_path, [task], model, [system], **config)
    if instance is not None:
        plan.systems[system] = instance
    manifest = execute(plan)
    record = json.loads((plan.run_dir / "results.jsonl").read_text().splitlines()[0])
    trace = json.loads((plan.run_dir / record["trace_file"]).read_text())
    return record, trace, manifest.model_dump(mode="json")


def processes_with(marker: str) -> list[int]:
    """Live processes on this machine whose command line holds `marker` (an agent's, seen from the host)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes() and (cmdline.parent / "stat").read_text().split()[2] != "Z":
                found.append(int(cmdline.parent.name))
        except (OSError, IndexError):  # it ended while we looked
            continue
    return found


def readme_example(name: str) -> str:
    """The Python block the README (or a chapter of docs/) marks with `<!-- example: NAME -->`."""
    readme = documentation()
    match = re.search(rf"<!-- example: {name} -->\s*```python\n(.*?)```", readme, flags=re.S)
    assert match, f"README has no example {name!r}"
    return match.group(1)


def write_jsonl(path: Path, rows: list[dict[str, Any]] | list[str]) -> Path:
    """A JSON Lines file of these rows (strings are written as they are, e.g. broken lines)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def by_id(tasks: list[Task]) -> dict[str, Task]:
    return {task.id: task for task in tasks}


def load_tasks(benchmark: str, path: str | Path | None = None, **options: Any) -> list[Task]:
    return create_benchmark(benchmark, path, **options).load()


def environment(task: Task, settings: ToolSettings | None = None, **budgets: Any) -> ToolEnvironment:
    """The task's tools as its benchmark gives them (its files unread), with a fresh recorder."""
    tools = create_benchmark(task.benchmark, TESTS / "unread").tools(task, settings or ToolSettings())
    return ToolEnvironment(tools, recorder(**budgets))


def bump_scorer_version(monkeypatch: pytest.MonkeyPatch, name: str) -> tuple[str, str]:
    """Scorer `name` declared one version on for this test (`@versioned`); returns (before, after)."""
    scorer = SCORERS.load(name)
    info = scorer_info(scorer)
    bumped = dataclasses.replace(info, version=f"{info.version}.1")
    monkeypatch.setattr(scorer, SCORER_INFO, bumped)
    return str(info.version), str(bumped.version)


def read_records(run_dir: Path) -> list[ResultRecord]:
    return [ResultRecord.model_validate_json(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]



def run_files_as_text(run_dir: Path) -> dict[str, str]:
    """Every file of a run as text, by path: the request store's compressed blobs and rows decoded (a secret
    compressed into conversations.sqlite would not show in its raw bytes), binary files with replacements."""
    texts = {}
    for path in sorted(Path(run_dir).rglob("*")):
        if not path.is_file():
            continue
        name = str(path.relative_to(run_dir))
        if path.name == "conversations.sqlite":
            with contextlib.closing(sqlite3.connect(path)) as store:
                blobs = [zlib.decompress(body).decode() for (body,) in store.execute("SELECT body FROM blobs")]
                rows = [" ".join(map(str, row)) for row in store.execute("SELECT * FROM calls")]
            texts[name] = "\n".join(blobs + rows)
        elif not path.name.startswith("conversations.sqlite-"):  # WAL pages: what they hold, the store holds
            texts[name] = path.read_text("utf-8", "replace")
    return texts

# ---------------------------------------------------------------- a quiz plugin for `compare` child processes

QUIZ_PLUGIN = string.Template('''
"""A test plugin: the scripted test model (provider "scripted"), a quiz benchmark and kill switches."""

import json
import os
import signal
import time

from data_agent_compare import (
    Benchmark,
    DataSource,
    DataSourceKind,
    Gold,
    QuestionType,
    ScoringRules,
    Task,
    register_benchmark,
)
from data_agent_compare.core import register_provider
from data_agent_compare.core.scorer import register_scorer, reports
from data_agent_compare.providers.scripted import ScriptedProvider, tool_call_message
from data_agent_compare.tools import default_tools

KILL_AT_CALL = $kill_at_call  # what KILL_AT_CALL=N in the environment does (see write_quiz_run)
KILL_WHILE_SCORING = $kill_while_scoring  # whether the benchmark scores with the KILL_WHILE_SCORING switch
CALLS = 0


def kill_this_process():
    os.kill(os.getpid(), signal.SIGKILL)  # kill -9, no clean-up of any kind


def respond(request, context):
    global CALLS
    CALLS += 1
    answering = any(m.role == "assistant" for m in request.messages)
    if os.environ.get("PIDS_FILE"):
        with open(os.environ["PIDS_FILE"], "a") as pids:
            pids.write(f"{os.getpid()}\\n")
    kill_at = int(os.environ.get("KILL_AT_CALL", "0"))
    if KILL_AT_CALL == "exactly" and CALLS == kill_at:
        kill_this_process()  # at this process's Nth model call, before it replies
    if KILL_AT_CALL == "answering" and kill_at and CALLS >= kill_at and answering and first_kill():
        kill_this_process()  # inside a unit that has already paid for a call
    end = time.thread_time() + float(os.environ.get("CPU_S", "0"))
    while time.thread_time() < end:  # Python work under the GIL, as a CPU-bound system does
        pass
    time.sleep(float(os.environ.get("MODEL_DELAY_S", "0")))
    if not answering:
        return tool_call_message("execute_sql", {"sql": "SELECT COUNT(*) FROM `Sales Team`"})
    return tool_call_message("answer", {"answer": f"{context.task_id}-{len(request.messages)}"})


def first_kill():
    """True but once per run when KILL_ONCE_FILE names a file (made by the first kill), else always."""
    if not os.environ.get("KILL_ONCE_FILE"):
        return True
    try:
        os.close(os.open(os.environ["KILL_ONCE_FILE"], os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return False
    return True


register_provider("scripted")(lambda: ScriptedProvider(respond))


@reports("scored")
def kill_switch(task, answer, trace, judge):
    if task.id == os.environ.get("KILL_WHILE_SCORING"):
        kill_this_process()
    return {"scored": 1.0}


if KILL_WHILE_SCORING:
    register_scorer("test_kill_switch")(kill_switch)


@register_benchmark
class Quiz(Benchmark):
    """Factoid questions (quiz.jsonl) over sales.sqlite beside them (a test plugin)."""

    name = "test_quiz"
    scoring = ScoringRules(scorers=("exact_match", "test_kill_switch") if KILL_WHILE_SCORING else ("exact_match",))

    def load(self):
        database = DataSource(name="sales", kind=DataSourceKind.SQLITE, location=str(self.path / "sales.sqlite"))
        rows = [json.loads(line) for line in (self.path / "quiz.jsonl").read_text().splitlines() if line]
        return [
            Task(id=r["id"], benchmark=self.name, question=r["question"], question_type=QuestionType.FACTOID,
                 data=[database], gold=Gold(answer=r["answer"]))
            for r in rows
        ]

    def tools(self, task, settings):
        return default_tools(task, settings)
''')


def quiz_questions(count: int) -> list[dict[str, str]]:
    """`count` quiz rows Q0, Q1, ... whose gold answer is the one the quiz plugin's model gives ("Q{i}-3")."""
    return [{"id": f"Q{i}", "question": "How many sales teams are there?", "answer": f"Q{i}-3"} for i in range(count)]


def write_quiz_run(
    folder: Path,
    questions: list[dict[str, str]],
    settings: str,
    *,
    kill_at_call: Literal["exactly", "answering"] | None = None,
    kill_while_scoring: bool = False,
) -> dict[str, Path]:
    """What a user of a `compare` child process would write, in `folder`: the quiz benchmark's files
    (quiz/sales.sqlite, a copy of the fixtures' database, and quiz/quiz.jsonl of `questions`), the
    plugin (quiz_plugin.py: the scripted model, provider "scripted", and the benchmark "test_quiz"), its
    alias table (models.yaml: the alias `scripted`) and a --config naming them (run.yaml), ending with
    `settings` (YAML lines, e.g. "epochs: 2\\nconcurrency: 1\\n"). Returns the paths: config, models,
    plugin, quiz.

    The plugin's model asks one SQL query, then answers "TASK_ID-3". Its environment steers it:
    MODEL_DELAY_S (seconds each call sleeps), CPU_S (seconds of CPU each call spins), PIDS_FILE (each call
    appends its process id), and KILL_AT_CALL=N as `kill_at_call` says: "exactly" kills the process
    (SIGKILL) at its Nth model call, before the reply; "answering" at its first answering call from the Nth
    on, but once per run when KILL_ONCE_FILE names a file; None ignores it. With `kill_while_scoring`
    the benchmark also scores with a switch that kills the process while scoring the task
    KILL_WHILE_SCORING names (its score "scored" is 1.0)."""
    quiz = folder / "quiz"
    quiz.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "regional_sales.sqlite", quiz / "sales.sqlite")
    write_jsonl(quiz / "quiz.jsonl", questions)
    plugin, models, config = folder / "quiz_plugin.py", folder / "models.yaml", folder / "run.yaml"
    plugin.write_text(
        QUIZ_PLUGIN.substitute(kill_at_call=repr(kill_at_call), kill_while_scoring=repr(kill_while_scoring)).lstrip()
    )
    models.write_text("models:\n  scripted: {provider: scripted, model_id: v1, price: {input_per_mtok: 1.0}}\n")
    config.write_text(
        f"plugins: [{plugin}]\nmodels_file: {models}\nmodels: [scripted]\n"
        f"benchmark: test_quiz\ntasks_path: {quiz}\n{settings}"
    )
    return {"config": config, "models": models, "plugin": plugin, "quiz": quiz}


# ---------------------------------------------------------------- PostgreSQL


def postgres_bin_dir_or_skip() -> Path:
    try:
        return find_bin_dir()
    except PostgresUnavailable as missing:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI installs PostgreSQL, yet: {missing}")
        pytest.skip(f"no PostgreSQL server binaries on this machine: {missing}")


# ---------------------------------------------------------------- a fake OpenAI-compatible server


@dataclass
class FakeResponse:
    body: dict[str, Any] | str
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    # Faults (`fault_response`): "reset" drops the connection with a TCP RST; "trickle" sends the
    # headers, then the body one byte every `trickle_s`; "hang" answers nothing until the server stops.
    fault: str | None = None
    trickle_s: float = 0.25


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]  # lower-cased names
    body: dict[str, Any] | None


def usage(prompt: int, completion: int, *, reasoning: int = 0, cost: float | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": reasoning},
    }
    if cost is not None:
        out["cost"] = cost
    return out


def completion(
    message: dict[str, Any], finish_reason: str, usage_body: dict[str, Any], model: str = "openai/gpt-5"
) -> FakeResponse:
    return FakeResponse(
        {
            "id": "gen-1732300000-fake",
            "provider": "OpenAI",
            "model": model,
            "object": "chat.completion",
            "created": 1732300000,
            "system_fingerprint": None,  # required (nullable) by the OpenRouter SDK's strict validation
            "choices": [
                {
                    "logprobs": None,
                    "finish_reason": finish_reason,
                    "native_finish_reason": finish_reason,
                    "index": 0,
                    "message": {"role": "assistant", "refusal": None, "reasoning": None, **message},
                }
            ],
            "usage": usage_body,
        }
    )


def text_response(text: str, *, usage_body: dict[str, Any] | None = None, model: str = "openai/gpt-5") -> FakeResponse:
    return completion({"content": text}, "stop", usage_body or usage(10, 5), model)


def tool_call_response(
    calls: list[tuple[str, str, str]], *, usage_body: dict[str, Any] | None = None, model: str = "openai/gpt-5"
) -> FakeResponse:
    """`calls` are (id, name, arguments-as-JSON-text) triples, as a model emits them."""
    tool_calls = [
        {"index": i, "id": cid, "type": "function", "function": {"name": name, "arguments": args}}
        for i, (cid, name, args) in enumerate(calls)
    ]
    return completion({"content": "", "tool_calls": tool_calls}, "tool_calls", usage_body or usage(20, 8), model)


def error_response(status: int, message: str, *, retry_after: str | None = None) -> FakeResponse:
    headers = {"Retry-After": retry_after} if retry_after is not None else {}
    return FakeResponse({"error": {"code": status, "message": message}}, status=status, headers=headers)


def error_in_body(code: int, message: str) -> FakeResponse:
    """OpenRouter's quirk: the model failed after the request was accepted, so HTTP says 200."""
    return FakeResponse({"error": {"code": code, "message": message, "metadata": {"provider_name": "Fake"}}})


def load_recorded(path: Path) -> dict[str, FakeResponse]:
    """Recorded responses by name; each JSONL line is {"name", "status", "headers", "body"}."""
    recorded = {}
    for line in path.read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            recorded[row["name"]] = FakeResponse(row["body"], row.get("status", 200), row.get("headers", {}))
    return recorded


def fault_response(kind: str) -> FakeResponse:
    """One faulty reply: "429" (Retry-After 0), "500", "no_choices" (a 200 without choices), "empty"
    (a 200 with an empty body), "invalid_json", "reset", "trickle" or "hang"."""
    bodies: dict[str, FakeResponse] = {
        "429": error_response(429, "Rate limit exceeded", retry_after="0"),
        "500": error_response(500, "Internal Server Error"),
        "no_choices": FakeResponse({"id": "gen-1", "object": "chat.completion", "created": 1, "model": "m"}),
        "empty": FakeResponse(""),
        "invalid_json": FakeResponse('{"id": "gen-1", "choices": [{"message": '),
        "reset": FakeResponse("", fault="reset"),
        "trickle": FakeResponse(text_response("slow").body, fault="trickle"),
        "hang": FakeResponse("", fault="hang"),
    }
    return bodies[kind]


FAULT_KINDS = ("429", "500", "no_choices", "empty", "invalid_json", "reset", "trickle", "hang")


class _FakeHTTPServer(ThreadingHTTPServer):
    request_queue_size = 256  # the default backlog of 5 stalls connections above ~32 in flight
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that gave up (fault tests) is no error
            super().handle_error(request, client_address)


class FakeOpenAIServer:
    """`with FakeOpenAIServer() as fake: fake.enqueue(...); ... fake.requests`

    `responder(request)`, when set, answers every POST instead of the queue (fault injection);
    `get_routes` maps a path suffix (e.g. "/models") to the reply of a GET."""

    def __init__(self, *, latency_s: float = 0.0, default: FakeResponse | None = None) -> None:
        self.latency_s = latency_s  # test-only artificial delay before every response
        self.default = default  # served when the queue is empty
        self.requests: list[RecordedRequest] = []
        self.responder: Callable[[RecordedRequest], FakeResponse] | None = None
        self.get_routes: dict[str, FakeResponse] = {}
        self.stopping = threading.Event()  # ends hanging and trickling replies when the server stops
        self._queue: deque[FakeResponse] = deque()
        self._lock = threading.Lock()
        self._server = _FakeHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/api/v1"

    def enqueue(self, *responses: FakeResponse) -> None:
        with self._lock:
            self._queue.extend(responses)

    def next_response(self, request: RecordedRequest) -> FakeResponse:
        with self._lock:
            self.requests.append(request)
            if self.responder is not None and request.method == "POST":
                return self.responder(request)
            if self._queue:
                return self._queue.popleft()
        return self.default or error_response(400, "fake server: no scripted response left")

    def get_response(self, request: RecordedRequest) -> FakeResponse:
        with self._lock:
            self.requests.append(request)
        path = request.path.split("?", 1)[0]
        for suffix, response in self.get_routes.items():
            if path.endswith(suffix):
                return response
        return error_response(404, f"fake server: no GET route for {path}")

    def __enter__(self) -> FakeOpenAIServer:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def _handler_for(fake: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, like the real service
        disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms delayed-ACK stall

        def do_GET(self) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            response = fake.get_response(RecordedRequest("GET", self.path, headers, None))
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self._send(response)

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = None
            headers = {k.lower(): v for k, v in self.headers.items()}
            response = fake.next_response(RecordedRequest("POST", self.path, headers, body))
            time.sleep(fake.latency_s)
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
                self._send(response)

        def _send(self, response: FakeResponse) -> None:
            if response.fault == "reset":
                self._reset()
                return
            if response.fault == "hang":
                fake.stopping.wait(60)
                self.close_connection = True
                return
            payload = response.body if isinstance(response.body, str) else json.dumps(response.body)
            data = payload.encode()
            self.send_response(response.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in response.headers.items():
                self.send_header(name, value)
            self.end_headers()
            if response.fault == "trickle":
                self._trickle(data, response.trickle_s)
                return
            self.wfile.write(data)

        def _reset(self) -> None:
            """Close with SO_LINGER 0: the client gets a TCP RST instead of a reply."""
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()

        def _trickle(self, data: bytes, interval_s: float) -> None:
            self.wfile.flush()
            for index in range(len(data)):
                if fake.stopping.wait(interval_s):
                    break
                self.wfile.write(data[index : index + 1])
                self.wfile.flush()
            self.close_connection = True

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep test output quiet

    return Handler


# What the model tests send: an OpenRouter-shaped key, one SQL tool, a two-message question, and the
# responses recorded from OpenRouter.
KEY = "sk-or-v1-test-0123456789abcdef"
SQL_TOOL = ToolSpec(
    name="sql_query",
    description="Run a read-only SQL query.",
    parameters={"type": "object", "properties": {"sql": {"type": "string"}}, "required": ["sql"]},
)
QUESTION = [Message(role="system", content="You answer questions."), Message(role="user", content="How many orders?")]
RECORDED = load_recorded(FIXTURES / "openrouter_responses.jsonl")


# ---------------------------------------------------------------- no network beyond loopback


@contextlib.contextmanager
def no_network() -> Iterator[list[str]]:
    """Refuse, and list, every attempt of this process to resolve or connect to anything but loopback.

    Frameworks often swallow connection errors (a price map, a tokenizer, telemetry), so a test must
    assert that the yielded list is empty, not only that nothing raised. Unix sockets are allowed."""
    attempts: list[str] = []
    undo = install_network_guard(attempts, who="the test")
    try:
        yield attempts
    finally:
        undo()


# ---------------------------------------------------------------- an MCP client (the official `mcp` SDK)


def mcp_session_calls(
    url: str, token: str, calls: list[tuple[str, dict[str, Any]]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Connect to a unit's MCP tools as any agent would (Streamable HTTP, the unit's bearer token), list
    them, make `calls` in order; returns the listed tools and each call's {"text", "isError"}. Runs its
    own event loop (call it from a thread without one, e.g. a system's `run`)."""
    import asyncio

    import httpx
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def session() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        headers = {"Authorization": f"Bearer {token}"}
        async with (
            httpx.AsyncClient(headers=headers, timeout=60, trust_env=False) as client,
            streamable_http_client(url, http_client=client) as (read, write, _),
            ClientSession(read, write) as mcp,
        ):
            await mcp.initialize()
            listed = [tool.model_dump() for tool in (await mcp.list_tools()).tools]
            results = []
            for name, arguments in calls:
                result = await mcp.call_tool(name, arguments)
                text = "\n".join(getattr(part, "text", "") for part in result.content)
                results.append({"text": text, "isError": bool(result.isError)})
            return listed, results

    return asyncio.run(session())


def documentation() -> str:
    """The README and every chapter of docs/, one text (the README's examples moved into docs/)."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    return "\n\n".join(page.read_text(encoding="utf-8") for page in pages)


class LoopbackNamespace:
    """A network namespace with only loopback, held open by a sleeping process; commands enter it."""

    def __init__(self) -> None:
        missing = [tool for tool in ("unshare", "nsenter", "ip") if shutil.which(tool) is None]
        problem = f"{' and '.join(missing)} not found" if missing else None
        if problem is None:
            probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, text=True)
            problem = None if probe.returncode == 0 else f"unshare -n failed (root needed): {probe.stderr.strip()}"
        if problem:
            if os.environ.get("CI") == "true":
                pytest.fail(f"CI runs as root with unshare, nsenter and ip, yet: {problem}")
            pytest.skip(f"no loopback-only network namespace: {problem}")
        self.holder = subprocess.Popen(["unshare", "-n", "sh", "-c", "ip link set lo up && exec sleep 3600"])
        time.sleep(0.3)

    def command(self, *argv: str) -> list[str]:
        return ["nsenter", "-t", str(self.holder.pid), "-n", *argv]

    def run(self, *argv: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(*argv), cwd=ROOT, capture_output=True, text=True, timeout=timeout, env={**os.environ, **env}
        )

    def close(self) -> None:
        self.holder.kill()
        self.holder.wait()
