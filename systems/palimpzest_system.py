"""Palimpzest (palimpzest 0.9.0) as a semantic-operator system: `palimpzest`.

Palimpzest cannot share the suite's environment (it pins numpy 2 and sentence-transformers 5; pip
settles on 0.7.7 beside LangChain 1.x, which breaks LlamaIndex), so it runs in its own virtual
environment, `.venv-palimpzest` (made by `setup.sh`), as a worker process (`palimpzest_worker.py`,
whose docstring is the protocol: JSON lines over stdin/stdout). A task runs:

    get_schema_info (tool call)          the tables, for the planner
    plan (model call, JSON schema)       the SQL that fetches the rows, and 1 to MAX_OPERATORS semantic
                                         operators (sem_filter / sem_map) with natural-language instructions,
                                         each over the SQL result ("records") or the document chunks
    execute_sql (tool call)              every row within the environment's caps; rows cut by a cap
                                         are said so to the answer model, never dropped silently
    worker: load                         the rows and every chunk of the task's documents
    sem_filter / sem_map (tool steps)    one worker request per operator: one Palimpzest query
                                         (`MemoryDataset` → operator → `.run(policy)`) whose model calls
                                         go through the gateway endpoint, so they are metered and traced
    answer (model call + answer tool)    the operators' output turned into the task's answer

Trace: each operator is a tool call of its own name (`ctx.tool_step`), timed by this process's monotonic
clock around the worker request that carries it out; the worker's model calls reach the gateway during
that step and are recorded as model calls (so cost and external-call counts compare with every other
system). One Palimpzest query per operator is what makes each operator a step: the optimizer chooses
each operator's physical implementation under the policy (`describe()["policy"]`), but does not reorder
the plan's operators.

Budgets: a call refused by a budget (BudgetExceeded here, HTTP 402 inside the worker, which then stops
its query) ends the task with the budget's status. An operator makes at least one model call per item:
one with more items than model calls left is not started, and the task ends with `max_steps` at once.
Palimpzest reads a failed model call as "no" (or an empty value), so any failed call under the worker
ends the task (`raise_model_errors`: infra_error for a provider failure) instead of dropping rows.

The worker refuses and reports any non-loopback network attempt; `network_attempts` collects them
(empty, or something in its environment went online). Workers are kept warm between tasks, one per
task running at a time; the first task of a process waits for the worker's imports (~15 s) in its clock.

Without the environment the system refuses to run, naming the fix (`refusal`).
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import queue
import shutil
import subprocess
import tempfile
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any, ClassVar

from ..compare import (
    ANSWER_TOOL,
    Answer,
    BudgetExceeded,
    Message,
    RunContext,
    System,
    Task,
    prompt_hash,
)
from ..compare.model import ModelError
from ..compare.task import DataSourceKind
from ..compare.tool import SystemStep, ToolError
from ..tools.documents import chunk_markdown, corpus_files
from .palimpzest_worker import POLICIES

PALIMPZEST_VERSION = "1"
PLAN_SYSTEM = """You plan a Palimpzest pipeline of semantic operators that answers a question over a database \
and company documents. Write:
1. `query`: one read-only SQL query that fetches the rows the question needs. When the model must judge each row \
(a condition or a value the columns do not hold), fetch the rows themselves with the columns the operators read.
2. `operators`: up to 4 semantic operators, applied in order. Each runs over `records` (the SQL result) or \
`documents` (passages of the documents). `sem_filter` keeps the items that satisfy a natural-language condition; \
`sem_map` adds a column whose value the model derives from each item, described by the instruction. Name the \
columns an instruction reads. Filter the documents to find definitions and rules the tables do not hold. \
Use no operator when the SQL result answers the question by itself."""
ANSWER_SYSTEM = """You answer a question from the output of a Palimpzest pipeline: the SQL result after the \
semantic operators ran over it, and the document passages the operators kept. Answer from these results; do \
not guess numbers they do not show. Call the `answer` tool."""
ANSWER_REFUSED = "The answer was refused: {error} Call the `answer` tool again with a valid answer."

MAX_OPERATORS = 4
MAX_ANSWER_ATTEMPTS = 2
OPERATOR_NAMES = ("sem_filter", "sem_map")
READY_TIMEOUT_S = 300.0  # importing torch, chromadb and palimpzest from a cold disk
REPLY_MARGIN_S = 60.0  # beyond the task's wall time, for one request's reply
WORKER_SCRIPT = Path(__file__).with_name("palimpzest_worker.py")
PYTHON_VARIABLE = "PALIMPZEST_PYTHON"  # the Python of another environment with palimpzest 0.9.0
DEFAULT_VENV = Path(__file__).resolve().parents[1] / ".venv-palimpzest"


# ---------------------------------------------------------------- the environment


def worker_python() -> Path:
    """The Python that runs the worker: $PALIMPZEST_PYTHON, else `.venv-palimpzest` of this checkout."""
    configured = os.environ.get(PYTHON_VARIABLE)
    return Path(configured) if configured else DEFAULT_VENV / "bin" / "python"


def refusal(python: Path) -> str | None:
    """Why the system cannot run here, naming the fix; None when its environment is there."""
    if python.is_file() and os.access(python, os.X_OK):
        return None
    return (
        f"palimpzest is refused: its own virtual environment is missing ({python} not found). "
        "Run ./setup.sh, which creates .venv-palimpzest (palimpzest cannot share the suite's environment), "
        f"or set {PYTHON_VARIABLE} to the Python of an environment with palimpzest 0.9.0."
    )


def installed_version(python: Path) -> str | None:
    """palimpzest's version in that environment, read from its dist-info (without starting it)."""
    for info in python.parent.parent.glob("lib/python3*/site-packages/palimpzest-*.dist-info"):
        return info.name.removeprefix("palimpzest-").removesuffix(".dist-info")
    return None


def shipped_encodings(python: Path) -> Path | None:
    """The tiktoken encodings litellm ships in that environment (else tiktoken downloads them)."""
    pattern = "lib/python3*/site-packages/litellm/litellm_core_utils/tokenizers"
    return next((folder for folder in python.parent.parent.glob(pattern) if folder.is_dir()), None)


def worker_environment(home: Path, python: Path) -> dict[str, str]:
    """The worker's whole environment: no variable of ours (API keys included) reaches it. Every
    switch keeps its libraries offline."""
    encodings = shipped_encodings(python)
    return {
        **({"TIKTOKEN_CACHE_DIR": str(encodings)} if encodings else {}),
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": str(home),  # caches (chromadb, Hugging Face) land in the worker's folder
        "TMPDIR": str(home),
        "LANG": "C.UTF-8",
        "PYTHONUNBUFFERED": "1",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "ANONYMIZED_TELEMETRY": "False",  # chromadb
        "DO_NOT_TRACK": "1",
        "OTEL_SDK_DISABLED": "true",
        "TOKENIZERS_PARALLELISM": "false",
        "DAC_WORKER_NETWORK_GUARD": "1",
    }


# ---------------------------------------------------------------- the worker process


class WorkerError(RuntimeError):
    """The worker failed (it exited, timed out, or could not import palimpzest)."""


class WorkerProcess:
    """One worker in the palimpzest environment, talking the protocol of `palimpzest_worker`."""

    def __init__(self, python: Path) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="palimpzest-worker-"))
        self.log_path = self.folder / "worker.log"
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                [str(python), str(WORKER_SCRIPT)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                cwd=self.folder,
                env=worker_environment(self.folder, python),
                text=True,
                encoding="utf-8",
            )
        self.replies: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.ready: dict[str, Any] | None = None
        self.network_attempts: list[str] = []

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            try:
                self.replies.put(json.loads(line))
            except json.JSONDecodeError:
                self.replies.put({"type": "error", "error": f"not a protocol line: {line[:200]!r}"})
        self.replies.put(None)  # end of output: the worker exited

    def _next(self, timeout_s: float) -> dict[str, Any]:
        try:
            reply = self.replies.get(timeout=timeout_s)
        except queue.Empty:
            self.kill()
            raise WorkerError(
                f"the palimpzest worker did not answer within {timeout_s:.0f}s{self.log_tail()}"
            ) from None
        if reply is None:
            self.replies.put(None)
            raise WorkerError(f"the palimpzest worker exited (status {self.process.wait()}){self.log_tail()}")
        self.network_attempts = list(reply.get("network_attempts") or [])
        return reply

    def wait_ready(self) -> dict[str, Any]:
        if self.ready is None:
            reply = self._next(READY_TIMEOUT_S)
            if reply.get("type") != "ready":
                raise WorkerError(f"the palimpzest worker could not start: {reply.get('error')}{self.log_tail()}")
            self.ready = reply
        return self.ready

    def request(self, message: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(message, default=str) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as broken:
            raise WorkerError(f"the palimpzest worker is gone ({broken}){self.log_tail()}") from None
        reply = self._next(timeout_s)
        if reply.get("type") == "error":
            raise WorkerError(f"the palimpzest worker refused a request: {reply.get('error')}")
        return reply

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def log_tail(self, limit: int = 1500) -> str:
        try:
            text = self.log_path.read_text("utf-8", errors="replace").strip()
        except OSError:
            return ""
        return f"; its log ends: …{text[-limit:]}" if text else ""

    def close(self, timeout_s: float = 10.0) -> None:
        """End of input makes the worker exit; one that does not is killed."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        try:
            self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        shutil.rmtree(self.folder, ignore_errors=True)

    def kill(self) -> None:
        if self.alive:
            self.process.kill()
            self.process.wait()


class WorkerPool:
    """Warm workers, one per task running at a time; closed when the process exits."""

    def __init__(self) -> None:
        self._idle: list[WorkerProcess] = []
        self._lock = threading.Lock()
        atexit.register(self.close)

    def acquire(self, python: Path) -> WorkerProcess:
        with self._lock:
            while self._idle:
                worker = self._idle.pop()
                if worker.alive:
                    return worker
                worker.close(timeout_s=0)
        return WorkerProcess(python)

    def release(self, worker: WorkerProcess, *, healthy: bool) -> None:
        if healthy and worker.alive:
            with self._lock:
                self._idle.append(worker)
        else:
            worker.kill()
            worker.close(timeout_s=0)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.close()


# ---------------------------------------------------------------- the plan


def plan_schema(sql_parameters: dict[str, Any] | None, inputs: list[str]) -> dict[str, Any]:
    """The plan: execute_sql's own arguments (when the task has SQL) and the operators, one branch each."""
    common = {"input": {"enum": inputs}, "instruction": {"type": "string"}}
    operators = [
        {
            "type": "object",
            "properties": {"operator": {"const": "sem_filter"}, **common},
            "required": ["operator", "input", "instruction"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"operator": {"const": "sem_map"}, **common, "column": {"type": "string"}},
            "required": ["operator", "input", "instruction", "column"],
            "additionalProperties": False,
        },
    ]
    properties: dict[str, Any] = {}
    if sql_parameters is not None:
        properties["query"] = sql_parameters
    # At least one operator: a plan without one would measure the planning workflow, not Palimpzest (and a
    # schema-constrained small model otherwise always takes the shortcut of an empty list).
    items = {"anyOf": operators}
    properties["operators"] = {"type": "array", "items": items, "minItems": 1, "maxItems": MAX_OPERATORS}
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


def read_plan(text: str | None) -> dict[str, Any]:
    """The plan as the model wrote it; a reply that is not one is an empty plan (the answer says so)."""
    try:
        plan = json.loads(text or "")
    except json.JSONDecodeError:
        return {"operators": []}
    if not isinstance(plan, dict):
        return {"operators": []}
    operators = [op for op in plan.get("operators") or [] if valid_operator(op)]
    return {**plan, "operators": operators[:MAX_OPERATORS]}


def valid_operator(op: Any) -> bool:
    return (
        isinstance(op, dict)
        and op.get("operator") in OPERATOR_NAMES
        and op.get("input") in ("records", "documents")
        and isinstance(op.get("instruction"), str)
        and bool(op["instruction"].strip())
    )


def document_chunks(task: Task) -> list[dict[str, Any]]:
    """Every chunk of the task's documents, chunked as `search_documents` indexes them."""
    sources = [s for s in task.data if s.kind == DataSourceKind.DOCUMENTS]
    if not sources:
        return []
    try:
        files = corpus_files(sources, task.data_dir)
    except ToolError:
        return []
    texts = [(name, path.read_text("utf-8", errors="replace")) for name, path in files]
    return [asdict(chunk) for name, text in texts for chunk in chunk_markdown(name, text)]


def render_rows(rows: list[dict[str, Any]], limit: int) -> str:
    """Rows as JSON lines, cut at `limit` characters with a note saying how many are shown."""
    lines, size = [], 0
    for row in rows:
        line = json.dumps(row, ensure_ascii=False, default=str)
        if size + len(line) > limit:
            lines.append(f"[cut for length: showing {len(lines)} of {len(rows)} rows]")
            break
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) if rows else "(no rows)"


def raise_model_errors(done: dict[str, Any]) -> None:
    """Palimpzest answers a failed model call with "no" (a filter drops the row) or an empty value: the
    task must not go on from such output. A provider failure (5xx, no response) is the infrastructure's
    (ModelError: `infra_error`); another refusal of the gateway is the system's."""
    errors = done.get("model_errors") or []
    if not errors:
        return
    first = errors[0]
    message = f"{len(errors)} model calls of operator {done['operator']} failed (first: {first['error']})"
    if first["status"] is None or first["status"] >= 500:
        raise ModelError(message, status_code=first["status"])
    raise WorkerError(message)


# ---------------------------------------------------------------- the system


class PalimpzestSystem(System):
    """Palimpzest 0.9.0's semantic operators over the SQL result and the documents, planned by the model."""

    name = "palimpzest"
    kind = "semantic-operator"
    policy: ClassVar[str] = "max_quality"  # the optimizer's policy: max_quality, min_cost or min_time
    # A member of pz.Model (its model list is fixed); the gateway serves the run's model whatever it names.
    pz_model: ClassVar[str] = "GPT_4o_MINI"
    max_workers: ClassVar[int] = 4  # palimpzest's parallel model calls per operator

    _pool: ClassVar[WorkerPool | None] = None

    def __init__(self, policy: str | None = None) -> None:
        self.policy = policy or type(self).policy
        if self.policy not in POLICIES:
            raise ValueError(f"unknown palimpzest policy {self.policy!r}; known: {', '.join(POLICIES)}")
        self.network_attempts: list[str] = []  # refused by the worker's guard, over every task
        self._attempts_lock = threading.Lock()

    @classmethod
    def pool(cls) -> WorkerPool:
        if PalimpzestSystem._pool is None:
            PalimpzestSystem._pool = WorkerPool()
        return PalimpzestSystem._pool

    def settings(self) -> dict[str, Any]:
        return {"policy": self.policy, "model": self.pz_model, "max_workers": self.max_workers}

    def describe(self) -> dict[str, Any]:
        python = worker_python()
        return {
            **super().describe(),
            **self.settings(),
            "allow_rag_reduction": False,
            "palimpzest": installed_version(python),
            "worker_python": str(python),
            "refused": refusal(python),
            "prompt_version": PALIMPZEST_VERSION,
            "prompt_hash": prompt_hash(PLAN_SYSTEM, ANSWER_SYSTEM, ANSWER_REFUSED),
            "max_operators": MAX_OPERATORS,
        }

    def run(self, task: Task, ctx: RunContext) -> Answer:
        python = worker_python()
        problem = refusal(python)
        if problem is not None:
            return Answer(status="error", error=problem)
        worker = self.pool().acquire(python)  # starts importing while the model plans
        healthy = False
        try:
            answer = self._run(task, ctx, worker)
            healthy = True
            return answer
        except BudgetExceeded as limit:
            healthy = True
            return Answer(status=limit.status, error=str(limit))
        finally:
            with self._attempts_lock:
                self.network_attempts += [a for a in worker.network_attempts if a not in self.network_attempts]
            self.pool().release(worker, healthy=healthy)

    def _run(self, task: Task, ctx: RunContext, worker: WorkerProcess) -> Answer:
        documents = document_chunks(task)
        plan = self._plan(ctx, has_documents=bool(documents))
        records, notes, truncated = self._fetch(ctx, plan)
        results = {"records": records, "documents": documents}
        touched: set[str] = set()
        workdir = Path(tempfile.mkdtemp(prefix="task-", dir=worker.folder))
        try:
            with ctx.openai_endpoint() as endpoint:
                worker.wait_ready()
                load = {"type": "load", "workdir": str(workdir), "settings": self.settings()}
                load |= {"endpoint": {"base_url": endpoint.base_url, "api_key": endpoint.api_key}}
                worker.request({**load, "datasets": results}, self._timeout(ctx))
                for index, op in enumerate(plan["operators"]):
                    ctx.check_budget()
                    cut = truncated and op["input"] == "records"
                    done = self._operator(ctx, worker, index, op, (len(results[op["input"]]), cut), workdir)
                    if ctx.budget_stop is not None:
                        raise ctx.budget_stop
                    raise_model_errors(done)
                    if done["success"]:
                        results[op["input"]] = done["rows"]
                        touched.add(op["input"])
                    else:
                        notes.append(f"operator {index + 1} ({op['operator']}) failed: {done['error']}")
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
        return self._answer(ctx, plan, results, touched, notes)

    def _timeout(self, ctx: RunContext) -> float:
        return ctx.budgets.wall_time_s + REPLY_MARGIN_S

    def _plan(self, ctx: RunContext, *, has_documents: bool) -> dict[str, Any]:
        """The model's plan; the schema of the databases first, so that it can write the SQL."""
        sql = ctx.tool_specs(["execute_sql"])
        inputs = ["records", "documents"] if has_documents else ["records"]
        schema_text = ""
        if ctx.tool_specs(["get_schema_info"]):
            schema_text = "\n\nDatabase schema:\n" + ctx.call_tool("get_schema_info", {}).content
        messages = [
            Message(role="system", content=PLAN_SYSTEM),
            Message(role="user", content=f"{ctx.task_prompt(answer_format=False)}{schema_text}"),
        ]
        reply = ctx.generate(messages, response_schema=plan_schema(sql[0].parameters if sql else None, inputs))
        return read_plan(reply.message.content)

    def _fetch(self, ctx: RunContext, plan: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str], bool]:
        """Every row the plan's SQL returns within the environment's caps, notes for the answer model, and
        whether a cap cut the result."""
        query = plan.get("query")
        if not isinstance(query, dict) or not query.get("sql"):
            return [], ["no SQL query was run"], False
        result = ctx.call_tool("execute_sql", query)
        if not result.success:
            return [], [f"the SQL query failed: {result.error}"], False
        columns, rows = result.data["columns"], result.data["rows"]
        notes = [f"SQL: {query['sql']}"]
        if result.truncated:
            notes.append(f"the SQL result was cut by the environment's row/byte caps at {len(rows)} rows")
        return [dict(zip(columns, row, strict=True)) for row in rows], notes, result.truncated

    def _refuse_if_too_many(self, ctx: RunContext, op: dict[str, Any], items: int) -> None:
        """An operator makes at least one model call per item, whatever implementation the optimizer picks:
        one that cannot finish within the steps left is not started (as for LOTUS and DocETL)."""
        recorder = ctx.model.recorder
        left = ctx.budgets.max_steps - len(recorder.trace.model_calls)
        if items > left:
            detail = (
                f"step limit of {ctx.budgets.max_steps} model calls: operator {op['operator']} needs at least "
                f"{items} model calls (one per item) and {left} are left"
            )
            raise recorder.refuse("max_steps", detail)

    def _operator(
        self,
        ctx: RunContext,
        worker: WorkerProcess,
        index: int,
        op: dict[str, Any],
        size: tuple[int, bool],
        workdir: Path,
    ) -> dict[str, Any]:
        """One operator as one worker request, traced as a tool call of the operator's name; `size` is its
        number of items and whether a cap cut them. One refused before it starts is in the trace too."""
        arguments = {key: op[key] for key in ("input", "instruction", "column") if key in op}
        arguments |= {"items": size[0], "truncated": size[1], "policy": self.policy}
        with ctx.tool_step(op["operator"], arguments) as step:
            self._refuse_if_too_many(ctx, op, size[0])
            request = {"type": "operator", "index": index, **op}
            done = worker.request(request, self._timeout(ctx))
            self._report(step, done, workdir)
        return done

    def _report(self, step: SystemStep, done: dict[str, Any], workdir: Path) -> None:
        parse_errors = len(list((workdir / "parse-answer-errors").glob("*")))
        physical = next((line.split("->")[1].strip() for line in done.get("plan", "").splitlines() if "->" in line), "")
        errors = done["model_errors"]
        counts = f"{done['model_calls']} model calls" + (f" ({len(errors)} failed)" if errors else "")
        counts += f", {parse_errors} answers palimpzest could not parse" if parse_errors else ""
        kept = f"{done['rows_out']} of {done['rows_in']} {done['input']} out"
        step.content = f"{kept}; {counts}; {physical or 'no operator'}"
        if done["budget_refused"]:
            step.fail(f"a budget ran out: {done['budget_refused']}")
        elif errors:
            step.fail(f"{len(errors)} model calls failed: {errors[0]['error']}")
        elif not done["success"]:
            step.fail(done["error"] or "failed")

    def _answer(
        self, ctx: RunContext, plan: dict[str, Any], results: dict[str, list], touched: set[str], notes: list[str]
    ) -> Answer:
        limit = ctx.budgets.tool_result_max_chars
        described = [f"{op['operator']} on {op['input']}: {op['instruction']}" for op in plan["operators"]]
        parts = [ctx.task_prompt(), "Pipeline: " + ("; ".join(described) or "no operators"), *notes]
        rows = render_rows(results["records"], limit)
        parts.append(f"SQL result after the operators ({len(results['records'])} rows):\n{rows}")
        if "documents" in touched:
            passages = render_rows(results["documents"], limit)
            parts.append(f"Document passages kept by the operators ({len(results['documents'])}):\n{passages}")
        messages = [Message(role="system", content=ANSWER_SYSTEM), Message(role="user", content="\n\n".join(parts))]
        error = "no answer"
        for _ in range(MAX_ANSWER_ATTEMPTS):
            reply = ctx.generate(messages, ctx.tool_specs([ANSWER_TOOL]), tool_choice="required")
            call = next((c for c in reply.message.tool_calls or [] if c.name == ANSWER_TOOL), None)
            if call is None:
                return ctx.answer_from_text(reply.message.content or "")
            result = ctx.call_tool(ANSWER_TOOL, call.arguments)
            if result.success:
                return ctx.answer_from_tool(call.arguments)
            error = result.error or result.content
            refused = ANSWER_REFUSED.format(error=error)
            messages += [reply.message, Message(role="tool", content=refused, tool_call_id=call.id, name=ANSWER_TOOL)]
        return Answer(status="no_answer", error=f"answer refused: {error}")
