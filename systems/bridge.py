"""The bridge between a task run and an external framework: the one place that does the plumbing
every framework adapter needs, so that a family's base class only translates.

    FrameworkSystem.run(task, ctx)
        ├─ offline_environment()             no framework reaches the network (price maps, tokenizers, tracing)
        ├─ ctx.openai_endpoint()             the metered gateway as an OpenAI endpoint: the only model a framework sees
        ├─ AgentSession(task, ctx)           our tools as plain functions, each call through ctx (traced, sandboxed)
        ├─ self.drive(session, endpoint)     the family's part: build the framework's agent, run it, return its text
        └─ session.answer(text)              the answer tool's call, else the final text, else no answer

Phases need nothing framework-specific: every model call of the framework reaches the gateway and
every tool call goes through `ctx.call_tool`, so `PhaseRules` labels them as for our workflows —
a model call choosing a tool is DECISION, a tool call EXECUTE, the call after a failed tool call
RETRY, and the call that gives the answer (calls `answer`, or whose text becomes the answer) GENERATE.

Budgets need nothing framework-specific either: a call the budget refuses gets HTTP 402 from the
gateway, the framework raises, and the task ends with the budget's status (`FrameworkSystem.run`).
A tool that ends the task (`answer`, DAB's `return_answer`, a DBGorilla prediction) marks the session
finished; each family stops its framework's loop there (LangGraph's `return_direct`, AutoGen's stream
closed, LlamaIndex's `return_direct`).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import ssl
import sys
import threading
from abc import abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..core import (
    ANSWER_TOOL,
    Answer,
    BudgetExceeded,
    Endpoint,
    FinalToolCall,
    RunContext,
    System,
    Task,
    ToolResult,
    ToolSpec,
    prompt_hash,
)
from ..core.system import SystemSetup
from ..workflows.tool_use import TOOL_USE_SYSTEM, TOOL_USE_VERSION

if TYPE_CHECKING:
    import httpx

# httpx: imported by the clients' methods (`compare systems` lists a framework system without it), and before
# units run on threads (core/registry.py `import_lazy_dependencies`)
LAZY_IMPORTS = ("httpx",)

# The tool-use workflow's own prompt: with the same model, tools, budgets and prompt, what differs between
# `tool_use` and a framework's agent is the framework.
FRAMEWORK_PROMPT_VERSION = TOOL_USE_VERSION
FRAMEWORK_SYSTEM = TOOL_USE_SYSTEM

AGENT_HEADER = "X-Compare-Agent"  # the gateway labels a call's agent by this header (providers/endpoint.py)

# ---------------------------------------------------------------- offline, always


def offline_environment() -> None:
    """Switch off every run-time download the card's frameworks would attempt (ENVIRONMENT.md):
    LiteLLM's price map, tiktoken's encodings (AutoGen's, LangChain's and DocETL's token counters),
    Hugging Face hub look-ups, LangSmith tracing and telemetry. Values a user set are kept."""
    defaults = {
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "LANGSMITH_TRACING": "false",
        "LANGCHAIN_TRACING_V2": "false",
        "ANONYMIZED_TELEMETRY": "False",
        "AUTOGEN_DISABLE_RUNTIME_TRACING": "true",
        "OTEL_SDK_DISABLED": "true",
    }
    encodings = shipped_tiktoken_encodings()
    if encodings is not None:
        defaults["TIKTOKEN_CACHE_DIR"] = str(encodings)
    for name, value in defaults.items():
        os.environ.setdefault(name, value)


def shipped_tiktoken_encodings() -> Path | None:
    """A folder of tiktoken encodings under tiktoken's cache names that an installed package ships:
    LiteLLM's tokenizers (cl100k, o200k, p50k), else LlamaIndex's bundled cache. Found without
    importing either package (importing LiteLLM would itself try to fetch its price map)."""
    for package, relative in (
        ("litellm", "litellm_core_utils/tokenizers"),
        ("llama_index.core", "_static/tiktoken_cache"),
    ):
        try:
            spec = importlib.util.find_spec(package)
        except ModuleNotFoundError:
            continue
        for location in (spec.submodule_search_locations or []) if spec else []:
            folder = Path(location) / relative
            if folder.is_dir() and any(folder.iterdir()):
                return folder
    return None


def unshadow_third_party_packages() -> None:
    """Take the suite's own source folder off `sys.path`. The checkout's folders (`workflows/`, `tools/`,
    `tasks/`, ...) are imported as `data_agent_compare.*`; when the checkout itself is on the path (a
    `python -m ...` run from it puts the working directory first) they shadow third-party top-level
    packages of the same name — LlamaIndex's agents import `workflows` (llama-index-workflows)."""
    root = Path(__file__).resolve().parents[1]
    sys.path[:] = [entry for entry in sys.path if not _a_checkout(Path(entry or os.getcwd()).resolve(), root)]


def _a_checkout(folder: Path, root: Path) -> bool:
    """This package's folder, or another copy of the suite's checkout: a Ray actor imports the package from the
    copy Ray shipped while the driver's working directory, the checkout, is on its path too."""
    return folder == root or ((folder / "workflows" / "tool_use.py").is_file() and (folder / "core").is_dir())


offline_environment()  # at import: `compare systems` imports this module before any framework is imported
unshadow_third_party_packages()

# ---------------------------------------------------------------- tools as plain functions


@dataclass
class BridgedTool:
    """One of the task's tools as a framework needs it: name, description, JSON schema, and a
    function of the arguments that calls the tool through the run context and returns its text."""

    spec: ToolSpec
    ends_task: bool  # calling it gives the final answer: the framework's loop should stop after it
    session: AgentSession
    agent: str | None = None

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def description(self) -> str:
        return self.spec.description

    @property
    def parameters(self) -> dict[str, Any]:
        return self.spec.parameters

    def __call__(self, arguments: dict[str, Any] | None = None, /, **kwargs: Any) -> str:
        return self.session.call(self.name, {**(arguments or {}), **kwargs}, agent=self.agent)


_ssl_context: ssl.SSLContext | None = None
_ssl_lock = threading.Lock()


def shared_ssl_context() -> ssl.SSLContext:
    """One SSL context per process. Every OpenAI client a framework builds would otherwise load the CA
    bundle again (~40 ms each, measured: half of a LangGraph task's harness time), although the
    gateway is plain HTTP on loopback."""
    global _ssl_context
    with _ssl_lock:
        if _ssl_context is None:
            _ssl_context = ssl.create_default_context()
        return _ssl_context


@dataclass
class AgentSession:
    """The state of one framework run: the task, its context, and how the run ended."""

    task: Task
    ctx: RunContext
    answered: Answer | None = None  # the answer tool was called successfully
    final: FinalToolCall | None = None  # a tool call that is the prediction (DBGorilla's first call)
    answered_by: str | None = field(default=None, repr=False)  # the agent that answered
    speaker: str | None = None  # the agent whose text is the framework's final text (multi-agent frameworks)
    _clients: list[httpx.Client] = field(default_factory=list, repr=False)
    _async_clients: list[httpx.AsyncClient] = field(default_factory=list, repr=False)

    def http_client(self) -> httpx.Client:
        """An HTTP client for a framework's model client, closed when the run ends. `trust_env=False`:
        a proxy configured in the environment must not sit between a framework and the loopback gateway."""
        import httpx

        client = httpx.Client(trust_env=False, verify=shared_ssl_context(), timeout=None)
        self._clients.append(client)
        return client

    def async_http_client(self) -> httpx.AsyncClient:
        """The same for asyncio frameworks; `aclose()` closes it inside the run's event loop."""
        import httpx

        client = httpx.AsyncClient(trust_env=False, verify=shared_ssl_context(), timeout=None)
        self._async_clients.append(client)
        return client

    async def aclose(self) -> None:
        for client in self._async_clients:
            await client.aclose()
        self._async_clients.clear()

    def close(self) -> None:
        for client in self._clients:
            client.close()
        self._clients.clear()

    @property
    def finished(self) -> bool:
        """The task has its answer: the framework should stop."""
        return self.answered is not None or self.final is not None

    def tools(self, names: list[str] | None = None, *, agent: str | None = None) -> list[BridgedTool]:
        """The task's tools (or those named) as plain functions; calls are labelled with `agent`."""
        names = _names(names)
        _text_or_none(agent, "agent")
        return [BridgedTool(spec, self.ctx.ends_task(spec.name), self, agent) for spec in self.ctx.tool_specs(names)]

    def call(self, name: str, arguments: dict[str, Any], *, agent: str | None = None) -> str:
        """Call a tool through the context and return what the agent reads (`call_result`)."""
        return self.call_result(name, arguments, agent=agent).content

    def call_result(self, name: str, arguments: dict[str, Any], *, agent: str | None = None) -> ToolResult:
        """Call a tool through the context (validated, sandboxed, traced); never raises, so that no
        framework turns our failure into its own. A call that ends the task finishes the session."""
        if not isinstance(name, str) or not isinstance(arguments, Mapping):
            raise TypeError(
                f"session.call_result(name, arguments) takes a tool name (str) and its arguments (a dict), "
                f"not {type(name).__name__} and {type(arguments).__name__}"
            )
        _text_or_none(agent, "agent")
        if self.finished:
            return ToolResult(success=False, content="The task is already answered; stop.", error="already answered")
        try:
            result = self.ctx.call_tool(name, arguments, agent=agent)
        except FinalToolCall as final:  # the call is the prediction (function-calling tasks)
            self.final, self.answered_by = final, agent
            return ToolResult(success=True, content=str(final))
        if self.ctx.ends_task(name) and result.success:
            self.answered, self.answered_by = self.ctx.answer_from_tool(arguments), agent
        return result

    def answer(self, text: str | None, *, agent: str | None = None) -> Answer:
        """How the run ended: the answer tool's call, else the framework's final text (whose model
        call becomes GENERATE), else no answer."""
        if self.final is not None:
            raise self.final  # the runner records the call as the prediction
        if self.answered is not None:
            return self.answered
        if text and text.strip():
            return self.ctx.answer_from_text(text, agent=agent or self.speaker)
        self.ctx.warn("no_answer", "the framework stopped without an answer")
        return Answer(status="no_answer", error="the framework stopped without an answer")

    def answer_from_structured(self, arguments: dict[str, Any], *, agent: str | None = None) -> Answer:
        """A framework's structured final output, given as a call of the `answer` tool so that it is
        validated, traced as the answer (GENERATE) and read like every other system's answer."""
        self.call(ANSWER_TOOL, arguments, agent=agent)
        return self.answer(None, agent=agent)


def _names(names: object) -> list[str] | None:
    """Tool names as a list; a bare string (`session.tools("execute_sql")`) would read as its letters."""
    if names is None:
        return None
    if isinstance(names, str) or not isinstance(names, list | tuple | set | frozenset):
        raise TypeError(
            f"session.tools(names) takes a list of tool names, e.g. session.tools([{names!r}]), not "
            f"{type(names).__name__}"
        )
    wrong = [name for name in names if not isinstance(name, str)]
    if wrong:
        raise TypeError(f"session.tools(names): every name is a str, not {type(wrong[0]).__name__} ({wrong[0]!r})")
    return list(names)


def check_model_arguments(helper: str, endpoint: object, session: object, agent: object = None) -> None:
    """A family's model helper takes `(endpoint, session, *, agent=None)`: anything else is refused here,
    with the call it expected, rather than failing deep inside the framework."""
    if not isinstance(endpoint, Endpoint) or not isinstance(session, AgentSession):
        raise TypeError(
            f"{helper}(endpoint, session, *, agent=None) takes the Endpoint and the AgentSession the family's "
            f"hook receives, not {type(endpoint).__name__} and {type(session).__name__}"
        )
    _text_or_none(agent, "agent")


def check_tool_argument(helper: str, tool: object) -> None:
    """A family's tool helper converts one `BridgedTool` (an item of `session.tools(...)`)."""
    if not isinstance(tool, BridgedTool):
        raise TypeError(
            f"{helper}(tool) converts one BridgedTool (an item of session.tools(...)), not {type(tool).__name__}; "
            f"for a list: [{helper}(tool) for tool in session.tools()]"
        )


def _text_or_none(value: object, what: str) -> None:
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{what} is an agent's name (str), not {type(value).__name__}")


# ---------------------------------------------------------------- the base of every framework adapter


class FrameworkSystem(System):
    """An external framework as a system under test. A family's base class implements `drive`."""

    kind = "framework"
    system_prompt: ClassVar[str] = FRAMEWORK_SYSTEM
    prompt_version: ClassVar[str] = FRAMEWORK_PROMPT_VERSION
    framework_modules: ClassVar[tuple[str, ...]] = ()  # imported by `prepare`, before any task's clock

    def prepare(self, tasks: list[Task], setup: SystemSetup) -> list[dict[str, Any]]:
        """Import the framework before any task's clock starts, so that the first task does not pay for
        it (LangChain, AutoGen and LlamaIndex take tenths of a second to seconds to import)."""
        offline_environment()
        unshadow_third_party_packages()
        for module in self.framework_modules:
            importlib.import_module(module)
        return []

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "framework": self.framework_versions(),
            "prompt_version": self.prompt_version,
            "prompt_hash": prompt_hash(self.system_prompt),
        }

    def framework_versions(self) -> dict[str, str]:
        """The versions of the distributions this adapter runs on, for the manifest."""
        return {}

    def run(self, task: Task, ctx: RunContext) -> Answer:
        offline_environment()
        unshadow_third_party_packages()
        session = AgentSession(task, ctx)
        try:
            with ctx.openai_endpoint() as endpoint:
                text = self.drive(session, endpoint)
        except FinalToolCall:
            raise
        except BudgetExceeded as limit:
            return Answer(status=limit.status, error=str(limit))
        except Exception as failure:
            stop = ctx.budget_stop  # the gateway refused a call (HTTP 402) and the framework raised
            if stop is not None:
                return Answer(status=stop.status, error=f"{stop} (the framework stopped: {type(failure).__name__})")
            if session.finished:  # an answer was given; the framework failed while winding down
                return session.answer(None)
            raise
        finally:
            session.close()
        return session.answer(text)

    @abstractmethod
    def drive(self, session: AgentSession, endpoint: Endpoint) -> str | None:
        """Build the framework's agent over `session.tools()` and the model at `endpoint`, run it on
        `self.prompt(session)`, and return its final text (None when the answer tool was called)."""

    def prompt(self, session: AgentSession) -> str:
        return session.ctx.task_prompt()

    def max_iterations(self, session: AgentSession) -> int:
        """A loop bound for frameworks that insist on one, above the step budget, so that the
        budget (with its own status) always stops the run first."""
        return session.ctx.budgets.max_steps + 5


def distribution_versions(*names: str) -> dict[str, str]:
    """Installed versions of these distributions (absent ones are left out)."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in names:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            continue
    return versions
