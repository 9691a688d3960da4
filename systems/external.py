"""Any agent as a system under test, unchanged and in any language: a command the suite runs per unit, in a
sandbox of its own.

    class MyAgent(ExternalSystem):
        name = "my_agent"
        agent_dir = Path(__file__).parent                # shown read-only in the sandbox, at its own path
        command = ("{python}", "{agent_dir}/agent.py", "{question_file}")
        requirements = Requirements(python=("openai-agents==0.24.0",))   # optional: its own environment

or, without Python, a YAML file given to `--plugin` (systems/external_yaml.py).

Per unit the suite opens the metered model endpoint (the gateway's OpenAI-compatible session) and serves the
unit's tools over MCP (`mcp_server.py`), both opened by one token, the unit's; then it runs the command in the
unit's sandbox (systems/agent_sandbox.py: its own processes, files, network and limits; the question and
system prompt in its scratch folder; only the environment below). The agent's model calls are metered,
budgeted (HTTP 402) and traced like every system's; its tool calls are tool steps of the trace.

Template fields (and environment variables): {question_file} DAC_QUESTION_FILE, {mcp_url} DAC_MCP_URL,
{model_base_url} DAC_MODEL_BASE_URL and OPENAI_BASE_URL, {model} DAC_MODEL and OPENAI_MODEL, {token}
DAC_TOKEN and OPENAI_API_KEY, {task_id} DAC_TASK_ID, {workdir} DAC_WORKDIR, {deadline_s} DAC_DEADLINE_S,
{python} (its environment's interpreter, else the suite's), {agent_dir} (where its files are), {node_modules}
NODE_PATH (its Node environment), {build_dir} (what its `build` command made), {system_prompt_file}
DAC_SYSTEM_PROMPT_FILE (the tool-use workflow's system prompt, as every framework adapter has it), {max_steps}
DAC_MAX_STEPS, {mcp_stdio} DAC_MCP_STDIO (a command line serving the same tools over stdio).

The unit's wall-time limit is the agent's: at the deadline the sandbox (the agent and everything it started)
is torn down and the unit ends `time_limit`. The answer is what the agent gave to the `answer` tool; else its
standard output (the last model call becomes GENERATE); an agent that exits non-zero without answering (or is
killed, or reaches a limit of its sandbox) makes the unit `error`, saying why.
"""

from __future__ import annotations

import json
import re
import shlex
import string
import sys
import tempfile
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import urlsplit, urlunsplit

from ..core import Answer, RunContext, System, Task, ToolSettings, register_system
from ..core.context import Endpoint
from ..core.system import SystemSetup
from ..tools.agent_network import agent_network
from ..tools.agent_sandbox import (
    GATEWAY_PORT,
    MCP_PORT,
    RUN_FOLDER,
    SCRATCH,
    AgentBox,
    AgentOutcome,
    AgentSandboxError,
    agent_limits,
    agent_sandbox_mode,
    agent_sandbox_problem,
    interpreter,
    run_in_sandbox,
)
from .bridge import FRAMEWORK_SYSTEM, AgentSession
from .environments import BuiltEnvironment, EnvironmentBuildError, Requirements, ensure_environment
from .mcp_server import McpEndpoint, shared_tool_server
from .unsandboxed_agent import run_unsandboxed

QUESTION_FILE = "question.md"
SYSTEM_PROMPT_FILE = "system_prompt.md"  # the tool-use workflow's system prompt, as every framework adapter has it
HOST_UNIT_FILE = ".mcp-unit.json"  # unsandboxed only: the stdio bridge's address, in the scratch folder
STDIO_BRIDGE = f"{RUN_FOLDER}/mcp_stdio.py"  # in the sandbox: the bridge (systems/mcp_stdio.py) and its unit file
UNIT_FILE = f"{RUN_FOLDER}/unit.json"
TEMPLATE_FIELDS = (
    "question_file",
    "mcp_url",
    "model_base_url",
    "model",
    "token",
    "task_id",
    "workdir",
    "deadline_s",
    "python",
    "agent_dir",
    "node_modules",
    "build_dir",
    "system_prompt_file",
    "max_steps",
    "mcp_stdio",
)
OFFLINE_SWITCHES = {
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "HF_HUB_DISABLE_TELEMETRY": "1",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "ANONYMIZED_TELEMETRY": "False",
    "DO_NOT_TRACK": "1",
    "OTEL_SDK_DISABLED": "true",
    "OPENAI_AGENTS_DISABLE_TRACING": "1",  # the OpenAI Agents SDK would upload traces to OpenAI
    "SMOLAGENTS_TELEMETRY": "false",
    "LOGFIRE_IGNORE_NO_CONFIG": "1",
    "npm_config_update_notifier": "false",
}


class ExternalSystemError(ValueError):
    """An external system's definition is wrong (a one-line message naming the file, system and field)."""


class ExternalSystem(System):
    """An agent run as a command per unit, in its sandbox, with the task's tools over MCP and the model through
    the gateway."""

    kind: ClassVar[str] = "external"
    command: ClassVar[tuple[str, ...]] = ()  # a template of argv (module docstring: the fields)
    env: ClassVar[dict[str, str]] = {}  # extra environment variables, templates too
    requirements: ClassVar[Requirements | None] = None  # its own environment; None: the suite's Python
    build: ClassVar[str | None] = None  # a shell command run once into {build_dir} (docs: any language)
    agent_dir: ClassVar[Path | None] = None  # where its files are ({agent_dir}), shown read-only
    # files of agent_dir copied into the scratch folder per unit: a Node ES module resolves its imports from
    # where it lies, and the scratch folder links the environment's node_modules
    agent_files: ClassVar[tuple[str, ...]] = ()
    system_prompt: ClassVar[str] = FRAMEWORK_SYSTEM

    def __init__(self) -> None:
        self._environment: BuiltEnvironment | None = None
        self._environment_lock = threading.Lock()
        self.build_error: str | None = None  # its environment could not be built: every unit says why
        self.settings = ToolSettings()  # the run's, from `prepare`

    def needs(self) -> Requirements | None:
        """Its environment's requirements, its build folded in."""
        if self.build is None:
            return self.requirements
        base = self.requirements or Requirements()
        return Requirements(base.python, base.node, base.installer, base.python_version, self.build, self.agent_dir)

    def environment(self) -> BuiltEnvironment | None:
        """Its own environment, built once (cached across runs by the requirements' hash); None without
        requirements, or when the build failed (`build_error`)."""
        needs = self.needs()
        if needs is None:
            return None
        with self._environment_lock:
            if self._environment is None and self.build_error is None:
                try:
                    self._environment = ensure_environment(needs)
                except EnvironmentBuildError as failed:
                    self.build_error = str(failed)
        return self._environment

    def prepare(self, tasks: list[Task], setup: SystemSetup) -> list[dict[str, Any]]:
        self.settings = setup.tools
        self.environment()  # before any task's clock: a cold build takes a while
        return []

    def describe(self) -> dict[str, Any]:
        built = self.environment()
        needs = self.needs()
        return {
            **super().describe(),
            "command": list(self.command),
            "requirements": _described(needs),
            "environment": built.describe() if built else None,
            **({"environment_error": self.build_error} if self.build_error else {}),
        }

    def run(self, task: Task, ctx: RunContext) -> Answer:
        self.environment()
        if self.build_error is not None:
            return Answer(status="error", error=f"{self.name}: its environment could not be built: {self.build_error}")
        mode = agent_sandbox_mode(self.settings)
        if mode == "unavailable":  # the run refuses this before it starts; a system run on its own says it here
            return Answer(status="error", error=f"{self.name}: no agent sandbox can be made: {agent_sandbox_problem()}")
        session = AgentSession(task, ctx)
        with ctx.openai_endpoint() as endpoint, shared_tool_server().open_unit(session, endpoint.api_key) as mcp:
            try:
                if mode == "bubblewrap":
                    outcome = self.run_sandboxed(task, ctx, endpoint, mcp)
                else:
                    outcome = self.run_on_host(task, ctx, endpoint, mcp)
            except AgentSandboxError as refused:
                return Answer(status="error", error=f"{self.name}: its sandbox could not be made: {refused}")
        return self.answer(session, ctx, outcome)

    # ------------------------------------------------------------ in the sandbox

    def run_sandboxed(self, task: Task, ctx: RunContext, endpoint: Endpoint, mcp: McpEndpoint) -> AgentOutcome:
        gateway_url, mcp_url = _inside(endpoint.base_url, GATEWAY_PORT), _inside(mcp.url, MCP_PORT)
        fields = self.fields(task, ctx, SCRATCH)
        fields |= {
            "mcp_url": mcp_url,
            "model_base_url": gateway_url,
            "model": endpoint.model,
            "token": endpoint.api_key,
        }
        fields["mcp_stdio"] = shlex.join(bridge_command())
        built = self.environment()
        box = AgentBox(
            argv=[render(part, fields, self.name, "command") for part in self.command],
            env=self.process_environment(fields),
            read_only=[path for path in (built.path if built else None, self.agent_dir) if path is not None],
            files={**self.staged_files(ctx, SCRATCH), **suite_files(mcp_url, endpoint.api_key)},
            symlinks={f"{SCRATCH}/node_modules": str(built.node_modules)} if built and built.node_modules else {},
            ports=(GATEWAY_PORT, MCP_PORT),
        )
        upstream = (_port(endpoint.base_url), _port(mcp.url))
        relay = agent_network()
        return run_in_sandbox(
            box,
            agent_limits(self.settings),
            float(fields["deadline_s"]),
            serve=lambda listeners: relay.relay(dict(zip(listeners, upstream, strict=True))),
        )

    def staged_files(self, ctx: RunContext, workdir: str) -> dict[str, str | bytes]:
        """The scratch folder's files: the question, the system prompt, copies of the agent's files."""
        files: dict[str, str | bytes] = {
            f"{workdir}/{QUESTION_FILE}": ctx.task_prompt(),
            f"{workdir}/{SYSTEM_PROMPT_FILE}": self.system_prompt,
        }
        for name in self.agent_files:
            files[f"{workdir}/{name}"] = ((self.agent_dir or Path(workdir)) / name).read_bytes()
        return files

    # ------------------------------------------------------------ on the host (--unsandboxed-agents)

    def run_on_host(self, task: Task, ctx: RunContext, endpoint: Endpoint, mcp: McpEndpoint) -> AgentOutcome:
        with tempfile.TemporaryDirectory(prefix="dac-agent-") as scratch:
            workdir = Path(scratch)
            for path, content in self.staged_files(ctx, scratch).items():
                Path(path).write_bytes(content.encode() if isinstance(content, str) else content)
            built = self.environment()
            if built is not None and built.node_modules is not None:
                (workdir / "node_modules").symlink_to(built.node_modules, target_is_directory=True)
            fields = self.fields(task, ctx, scratch)
            fields |= {"mcp_url": mcp.url, "model_base_url": endpoint.base_url, "model": endpoint.model}
            fields["token"] = endpoint.api_key
            fields["mcp_stdio"] = host_stdio_command(workdir, mcp.url, mcp.token)
            argv = [render(part, fields, self.name, "command") for part in self.command]
            return run_unsandboxed(argv, self.process_environment(fields), workdir, float(fields["deadline_s"]))

    # ------------------------------------------------------------ what the agent gets

    def fields(self, task: Task, ctx: RunContext, workdir: str) -> dict[str, str]:
        built = self.environment()
        python = built.python if built and built.python else Path(sys.executable)
        node_modules = built.node_modules if built and built.node_modules else ""
        build_dir = built.build_dir if built and built.build_dir else ""
        return {
            "question_file": f"{workdir}/{QUESTION_FILE}",
            "task_id": task.id,
            "workdir": workdir,
            "deadline_s": f"{max(0.0, ctx.model.recorder.remaining_s()):.3f}",
            "python": str(python),
            "agent_dir": str(self.agent_dir or workdir),
            "node_modules": str(node_modules),
            "build_dir": str(build_dir),
            "system_prompt_file": f"{workdir}/{SYSTEM_PROMPT_FILE}",
            "max_steps": str(ctx.budgets.max_steps),
        }

    def process_environment(self, fields: Mapping[str, str]) -> dict[str, str]:
        """The agent's whole environment: the fields, the offline switches, its own variables; nothing of ours."""
        built = self.environment()
        path = [str(folder) for folder in (built.bin_dirs if built else [])] + ["/usr/local/bin", "/usr/bin", "/bin"]
        env = {
            "PATH": ":".join(path),
            "HOME": fields["workdir"],
            "TMPDIR": "/tmp" if fields["workdir"] == SCRATCH else fields["workdir"],
            "LANG": "C.UTF-8",
            "PYTHONUNBUFFERED": "1",
            **OFFLINE_SWITCHES,
            "DAC_QUESTION_FILE": fields["question_file"],
            "DAC_MCP_URL": fields["mcp_url"],
            "DAC_MODEL_BASE_URL": fields["model_base_url"],
            "DAC_MODEL": fields["model"],
            "DAC_TOKEN": fields["token"],
            "DAC_TASK_ID": fields["task_id"],
            "DAC_WORKDIR": fields["workdir"],
            "DAC_DEADLINE_S": fields["deadline_s"],
            "DAC_SYSTEM_PROMPT_FILE": fields["system_prompt_file"],
            "DAC_MAX_STEPS": fields["max_steps"],
            "DAC_MCP_STDIO": fields["mcp_stdio"],
            "OPENAI_BASE_URL": fields["model_base_url"],
            "OPENAI_API_KEY": fields["token"],
            "OPENAI_MODEL": fields["model"],
        }
        if fields["node_modules"]:
            env["NODE_PATH"] = fields["node_modules"]
        env |= {name: render(value, fields, self.name, f"env.{name}") for name, value in self.env.items()}
        return env

    def answer(self, session: AgentSession, ctx: RunContext, outcome: AgentOutcome) -> Answer:
        """The answer tool's call; else the budget or deadline that stopped it; else its output or failure."""
        if session.final is not None or session.answered is not None:
            return session.answer(None)
        stop = ctx.budget_stop
        if stop is not None:
            return Answer(status=stop.status, error=f"{stop} (the agent then stopped)")
        if outcome.timed_out:
            limit = ctx.model.recorder.refuse("time_limit", f"wall-time limit of {ctx.budgets.wall_time_s}s reached")
            return Answer(status="time_limit", error=f"{limit}: the agent was killed with everything it started")
        if outcome.failure is not None:
            return Answer(status="error", error=outcome.failure)
        return session.answer(outcome.stdout.strip() or None)


def bridge_command() -> list[str]:
    """The stdio MCP bridge's command line inside the sandbox ({mcp_stdio}): the standard library only."""
    return [interpreter(), "-I", "-S", STDIO_BRIDGE, UNIT_FILE]


def suite_files(url: str, token: str) -> dict[str, str | bytes]:
    """The suite's files for an agent of a unit: the stdio bridge and its unit file."""
    bridge = Path(__file__).with_name("mcp_stdio.py").read_bytes()
    return {STDIO_BRIDGE: bridge, UNIT_FILE: json.dumps({"url": url, "token": token})}


def _described(needs: Requirements | None) -> dict[str, Any] | None:
    if needs is None:
        return None
    return {"python": list(needs.python), "node": list(needs.node), **({"build": needs.build} if needs.build else {})}


def _inside(url: str, port: int) -> str:
    """A loopback URL of the suite's as the agent reaches it in its sandbox: the same path on its own port."""
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=f"127.0.0.1:{port}"))


def _port(url: str) -> int:
    port = urlsplit(url).port
    if port is None:
        raise ValueError(f"no port in {url!r}")
    return port


def host_stdio_command(workdir: Path, url: str, token: str) -> str:
    """The stdio bridge's command line for an agent on the host, its address in a private file."""
    unit_file = workdir / HOST_UNIT_FILE
    unit_file.touch(mode=0o600)
    unit_file.write_text(json.dumps({"url": url, "token": token}), encoding="utf-8")
    bridge = Path(__file__).with_name("mcp_stdio.py")
    return shlex.join([sys.executable, "-I", "-S", str(bridge), str(unit_file)])


def render(template: str, fields: Mapping[str, str], system: str, where: str) -> str:
    """One template with the unit's fields; an unknown field is the definition's error, named."""
    try:
        return template.format_map(dict(fields))
    except (KeyError, IndexError, ValueError, OverflowError, MemoryError) as wrong:
        known = ", ".join("{" + name + "}" for name in TEMPLATE_FIELDS)
        raise ExternalSystemError(
            f"system {system!r}: field {where}: {template!r}: {wrong!r} (known: {known})"
        ) from None


def check_templates(system: str, command: tuple[str, ...], env: dict[str, str], source: str) -> None:
    """Refuse a definition whose templates name an unknown field or format a field wrongly, before any unit."""
    sample = dict.fromkeys(TEMPLATE_FIELDS, "x")
    if not command:
        raise ExternalSystemError(f"{source}: system {system!r}: field 'command': empty")
    try:
        for part in command:
            _check_format(part, system, "command")
            render(part, sample, system, "command")
        for name, value in env.items():
            _check_format(value, system, f"env.{name}")
            render(value, sample, system, f"env.{name}")
    except ExternalSystemError as wrong:
        raise ExternalSystemError(f"{source}: {wrong}") from None


MAX_FORMAT_WIDTH = 4096  # a template's `{field:>N}` beyond this would build a huge string per unit


def _check_format(template: str, system: str, where: str) -> None:
    """Format specs are plain field names, or a short width: `{workdir:>99999999999}` would take the memory."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as wrong:
        raise ExternalSystemError(f"system {system!r}: field {where}: {template!r}: {wrong}") from None
    for _, field_name, spec, _ in parsed:
        widths = [int(number) for number in re.findall(r"\d+", spec or "")]
        if field_name is not None and any(width > MAX_FORMAT_WIDTH for width in widths):
            raise ExternalSystemError(
                f"system {system!r}: field {where}: {template!r}: "
                f"a width above {MAX_FORMAT_WIDTH} in {{{field_name}:{spec}}}"
            )


def external_system(
    name: str,
    command: list[str] | tuple[str, ...] | str,
    *,
    env: dict[str, str] | None = None,
    python: list[str] | None = None,
    node: list[str] | None = None,
    installer: str = "uv",
    build: str | None = None,
    agent_dir: str | Path | None = None,
    agent_files: list[str] | tuple[str, ...] = (),
    description: str = "",
    source: str = "<python>",
) -> type[ExternalSystem]:
    """Define and register an external system (the YAML route, or a plug-in in one call). `agent_dir` is the
    folder of its files, shown read-only in its sandbox at its own path (made absolute here)."""
    where = f"{source}: system {name!r}"
    try:
        argv = tuple(shlex.split(command) if isinstance(command, str) else command)
    except ValueError as wrong:  # an unclosed quote
        raise ExternalSystemError(
            f"{where}: field 'command': {command!r} cannot be split like a shell: {wrong}"
        ) from None
    variables = {str(k): str(v) for k, v in (env or {}).items()}
    check_templates(name, argv, variables, source)
    if installer not in ("uv", "pip"):
        raise ExternalSystemError(f"{where}: field 'installer': {installer!r} is not uv or pip")
    needs = Requirements(tuple(python or ()), tuple(node or ()), installer) if (python or node) else None  # type: ignore[arg-type]
    folder = Path(agent_dir).resolve() if agent_dir else None
    attributes = {
        "name": name,
        "command": argv,
        "env": variables,
        "requirements": needs,
        "build": build,
        "agent_dir": folder,
        "agent_files": tuple(agent_files),
        "description": description or f"external agent: {' '.join(argv)}",
        "__doc__": description or f"An external agent run as `{' '.join(argv)}`.",
        "__module__": source,  # `compare systems` says where it was defined
    }
    cls = type(f"External_{name}", (ExternalSystem,), attributes)
    return register_system(cls)
