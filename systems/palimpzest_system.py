"""Palimpzest (palimpzest 0.9.0) as a semantic-operator system: `palimpzest`.

The planning step, the data and the answer are those of every semantic-operator system
(`semantic_operators.SemanticOperatorSystem`: the same prompts as LOTUS and DocETL, so that what differs
is the engine): the task's schema tool, one planning call (queries + 1 to 4 operators over named tables),
every row the task's SQL tool returns within its caps (a cut is said, never a silent sample), the
document chunks as the table `documents`, one traced tool call per operator, and a last call that answers.
Palimpzest offers `sem_filter` and `sem_map`.

Palimpzest cannot share the suite's environment (it pins numpy 2 and sentence-transformers 5; pip
settles on 0.7.7 beside LangChain 1.x, which breaks LlamaIndex), so it runs in an environment of its own,
built once by the suite's mechanism for systems in their own environments (`environments.py`:
`REQUIREMENTS`, cached by their hash, resolved versions in the manifest; `setup.sh` builds it, and so does
`prepare` when it is missing), as a worker process (`palimpzest_worker.py`, whose docstring is the
protocol: JSON lines over stdin/stdout). Each operator is one worker request
carrying every row of its table; the worker runs it as one Palimpzest query (`MemoryDataset` →
operator → `.run(policy)`), whose model calls go through the gateway endpoint, so they are metered and
traced like any other. The step in the trace is timed by this process's monotonic clock around that
request (`ctx.tool_step`, in the base). One query per operator is what makes each operator a step: the
optimizer chooses each operator's physical implementation under the policy (`describe()["policy"]`),
but does not reorder the plan's operators.

Budgets: a call refused by a budget (HTTP 402 inside the worker, which then stops its query) ends the
task with the budget's status; an operator makes at least one model call per row, so one with more
rows than model calls left is not started (`expected_calls`). Palimpzest reads a failed model call as
"no" (or an empty value): an operator with any failed call fails instead (the table keeps its rows, and
the answer step reads why), never dropping rows silently.

The worker refuses and reports any non-loopback network attempt; `network_attempts` collects them
(empty, or something in its environment went online). Workers are kept warm: one is started in
`prepare`, before any task's clock (its imports take ~15 s), and one more per task running at once.

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from ..core import Answer, RunContext, Task
from ..core.model import ModelError
from .environments import (
    BuiltEnvironment,
    EnvironmentBuildError,
    Requirements,
    cache_root,
    ensure_environment,
    find_environment,
)
from .palimpzest_worker import POLICIES
from .semantic_operators import BRACED, OperatorRun, SemanticOperatorSystem, Table, operator_branch

READY_TIMEOUT_S = 300.0  # importing torch, chromadb and palimpzest from a cold disk
REPLY_MARGIN_S = 60.0  # beyond the task's wall time, for one request's reply
WORKER_SCRIPT = Path(__file__).with_name("palimpzest_worker.py")
PYTHON_VARIABLE = "PALIMPZEST_PYTHON"  # the Python of another environment with palimpzest 0.9.0
# pip, not uv: pip reads this machine's configuration, whose local wheel folder holds the CPU build of torch
# (from the registry, torch 2.13.0 is the multi-GB CUDA build); the pin makes pip take that build.
REQUIREMENTS = Requirements(python=("torch==2.13.0", "palimpzest==0.9.0"), installer="pip")
LEGACY_VENV = Path(__file__).resolve().parents[1] / ".venv-palimpzest"  # made by setup.sh before the cache


# ---------------------------------------------------------------- the environment


def worker_python() -> Path:
    """The Python that runs the worker: $PALIMPZEST_PYTHON, else the built environment of `REQUIREMENTS`, else
    the `.venv-palimpzest` an older setup.sh made; else where the built one will be (`refusal` says so)."""
    configured = os.environ.get(PYTHON_VARIABLE)
    if configured:
        return Path(configured)
    built = find_environment(REQUIREMENTS)
    if built is not None and built.python is not None:
        return built.python
    legacy = LEGACY_VENV / "bin" / "python"
    return legacy if legacy.is_file() else cache_root() / REQUIREMENTS.key() / "venv" / "bin" / "python"


def build_environment() -> BuiltEnvironment:
    """Build palimpzest's environment now unless it is there (setup.sh, and `prepare` when it is missing)."""
    return ensure_environment(REQUIREMENTS)


def refusal(python: Path) -> str | None:
    """Why the system cannot run here, naming the fix; None when its environment is there."""
    if python.is_file() and os.access(python, os.X_OK):
        return None
    return (
        f"palimpzest is refused: its own virtual environment is missing ({python} not found). "
        "Run ./setup.sh, which builds it (palimpzest cannot share the suite's environment), "
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


# ---------------------------------------------------------------- operators


def model_call_failure(done: dict[str, Any]) -> Exception | None:
    """Why an operator's output cannot be used: a budget refusal, failed model calls (a provider failure,
    5xx or no response, is a ModelError), or the worker's own failure; None when it can."""
    errors = done.get("model_errors") or []
    if done.get("budget_refused"):
        return WorkerError(f"a budget ran out: {done['budget_refused']}")
    if errors:
        first = errors[0]
        message = f"{len(errors)} model calls of {done['operator']} failed (first: {first['error']})"
        provider = first["status"] is None or first["status"] >= 500
        return ModelError(message, status_code=first["status"]) if provider else WorkerError(message)
    if not done.get("success"):
        return WorkerError(str(done.get("error") or "the operator failed"))
    return None


def plain_instruction(instruction: str) -> str:
    """The plan's `{column}` names as plain words: palimpzest shows the model every field of the row."""
    return BRACED.sub(lambda found: found.group(1), instruction)


def table_rows(table: Table) -> list[dict[str, Any]]:
    """Every row of the table as JSON-ready objects (missing values as null)."""
    return json.loads(table.frame.to_json(orient="records", date_format="iso", default_handler=str))


# ---------------------------------------------------------------- the system


class PalimpzestSystem(SemanticOperatorSystem):
    """Palimpzest 0.9.0's semantic operators over the SQL result and the documents, planned by the model."""

    name = "palimpzest"
    engine = "Palimpzest"
    framework_packages = ()  # palimpzest lives in its own environment: `describe()["palimpzest"]`
    operators: ClassVar[dict[str, str]] = {
        "sem_filter": "keeps the rows for which the natural-language condition `instruction` holds "
        "(one model call per row)",
        "sem_map": "adds a column named `column` whose value the model derives from each row as "
        "`instruction` describes (one model call per row)",
    }
    policy: ClassVar[str] = "max_quality"  # the optimizer's policy: max_quality, min_cost or min_time
    # A member of pz.Model (its model list is fixed); the gateway serves the run's model whatever it names.
    pz_model: ClassVar[str] = "GPT_4o_MINI"
    max_workers: ClassVar[int] = 4  # palimpzest's parallel model calls per operator

    _pool: ClassVar[WorkerPool | None] = None

    def __init__(self, policy: str | None = None) -> None:
        self.policy = policy or type(self).policy
        if self.policy not in POLICIES:
            raise ValueError(f"unknown palimpzest policy {self.policy!r}; known: {', '.join(POLICIES)}")
        self.network_attempts: list[str] = []  # refused by the workers' guard, over every task
        self.build_error: str | None = None  # why its environment could not be built
        self._attempts_lock = threading.Lock()

    @classmethod
    def pool(cls) -> WorkerPool:
        if PalimpzestSystem._pool is None:
            PalimpzestSystem._pool = WorkerPool()
        return PalimpzestSystem._pool

    def settings(self) -> dict[str, Any]:
        return {"policy": self.policy, "model": self.pz_model, "max_workers": self.max_workers}

    def describe(self) -> dict[str, Any]:
        built = self.environment()
        python = worker_python()
        return {
            **super().describe(),
            **self.settings(),
            "allow_rag_reduction": False,
            "palimpzest": installed_version(python),
            "worker_python": str(python),
            "requirements": {"python": list(REQUIREMENTS.python), "node": []},
            "environment": built.describe() if built is not None else None,
            "refused": self.refusal(),
        }

    def environment(self) -> BuiltEnvironment | None:
        """Its built environment (building it now when neither $PALIMPZEST_PYTHON nor an older setup's
        `.venv-palimpzest` stands in for it: ~3 min the first time, before any task's clock); None when one does."""
        if os.environ.get(PYTHON_VARIABLE) or (find_environment(REQUIREMENTS) is None and LEGACY_VENV.is_dir()):
            return None
        try:
            return build_environment()
        except EnvironmentBuildError as failed:  # the system refuses to run, saying why (`refusal`)
            self.build_error = str(failed)
            return None

    def import_library(self) -> None:
        """Start a worker before any task's clock (base `prepare`): its imports take ~15 s."""
        self.environment()
        python = worker_python()
        if refusal(python) is not None:
            return  # each task says why
        worker = self.pool().acquire(python)
        ready = False
        try:
            worker.wait_ready()
            ready = True
        finally:
            self._release(worker, healthy=ready)

    def refusal(self) -> str | None:
        problem = refusal(worker_python())
        return f"{problem} Building it failed: {self.build_error}" if problem and self.build_error else problem

    def run(self, task: Task, ctx: RunContext) -> Answer:
        problem = self.refusal()
        if problem is not None:
            return Answer(status="error", error=problem)
        return super().run(task, ctx)

    def operator_schemas(self, tables: list[str]) -> list[dict[str, Any]]:
        instruction = {"type": "string"}
        return [
            operator_branch("sem_filter", tables, {"instruction": instruction}),
            operator_branch("sem_map", tables, {"column": {"type": "string"}, "instruction": instruction}),
        ]

    def expected_calls(self, run: OperatorRun, operator: dict[str, Any]) -> int | None:
        """At least one model call per row, whatever implementation the optimizer picks."""
        table = run.tables.get(str(operator.get("input")))
        return len(table.frame) if table is not None else None

    @contextlib.contextmanager
    def open(self, run: OperatorRun) -> Iterator[None]:
        """A warm worker for the task's operators, pointed at its endpoint, working in its scratch folder."""
        worker = self.pool().acquire(worker_python())
        healthy = True  # a request either got its reply or killed the worker: it is in step for the next task
        try:
            worker.wait_ready()
            load = {"type": "load", "workdir": str(Path(run.workdir) / "palimpzest"), "settings": self.settings()}
            load["endpoint"] = {"base_url": run.endpoint.base_url, "api_key": run.endpoint.api_key}
            worker.request(load, timeout(run.ctx))
            run.state["worker"] = worker
            yield
        except BaseException as stopped:  # a budget stop or a failed worker keeps it (if alive); Ctrl-C may
            healthy = isinstance(stopped, Exception)  # have come between a request and its reply
            raise
        finally:
            self._release(worker, healthy=healthy)

    def apply(self, run: OperatorRun, operator: dict[str, Any]) -> Table:
        table = run.tables[str(operator["input"])]
        request = {"type": "operator", "index": len(table.history), **operator, "rows": table_rows(table)}
        request["instruction"] = plain_instruction(str(operator.get("instruction", "")))
        done = run.state["worker"].request(request, timeout(run.ctx))
        failure = model_call_failure(done)
        if failure is not None:
            raise failure
        columns = None if done["rows"] else done["columns"]  # a filter that kept nothing keeps the columns
        frame = type(table.frame)(done["rows"], columns=columns)  # a pandas DataFrame
        return Table(table.name, frame, table.source, truncated=table.truncated)

    def _release(self, worker: WorkerProcess, *, healthy: bool) -> None:
        with self._attempts_lock:
            self.network_attempts += [a for a in worker.network_attempts if a not in self.network_attempts]
        self.pool().release(worker, healthy=healthy)


def timeout(ctx: RunContext) -> float:
    return ctx.budgets.wall_time_s + REPLY_MARGIN_S


def main() -> None:
    """`python -m data_agent_compare.systems.palimpzest_system --build-environment` (setup.sh): build palimpzest's
    environment unless the cache holds it, and say where it is and what it took."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--build-environment", action="store_true", required=True)
    parser.parse_args()
    try:
        built = build_environment()
    except EnvironmentBuildError as failed:
        raise SystemExit(f"palimpzest's environment could not be built: {failed}") from None
    took = f"built in {built.build_s:.0f} s" if built.build_s is not None else "already built"
    version = built.resolved.get("python", {}).get("palimpzest")
    print(f"palimpzest {version}: {built.path} ({took})")


if __name__ == "__main__":
    main()
