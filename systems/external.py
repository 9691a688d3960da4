"""Any agent as a system under test, unchanged and in any language: a command the suite runs per unit.

    class MyAgent(ExternalSystem):
        name = "my_agent"
        command = ("{python}", "{agent_dir}/agent.py", "{question_file}")
        requirements = Requirements(python=("openai-agents==0.24.0",))   # optional: its own environment

or, without Python, a YAML file given to `--plugin` (`load_external_systems`):

    systems:
      my_agent:
        command: [node, agent.js, "{question_file}"]
        env: {MY_SETTING: "1"}
        node: ["openai@6"]

Per unit the suite writes the task's question to a file, opens the metered model endpoint (the gateway's
OpenAI-compatible session) and serves the unit's tools over MCP (`mcp_server.py`), both opened by one
token, the unit's; then it runs the command in a scratch folder, as a process group of its own, with only
the environment below (no variable of the suite's, no API key, reaches it). The agent's model calls are
metered, budgeted (HTTP 402) and traced like every system's; its tool calls are tool steps of the trace.

Template fields (and environment variables): {question_file} DAC_QUESTION_FILE, {mcp_url} DAC_MCP_URL,
{model_base_url} DAC_MODEL_BASE_URL and OPENAI_BASE_URL, {model} DAC_MODEL and OPENAI_MODEL, {token}
DAC_TOKEN and OPENAI_API_KEY, {task_id} DAC_TASK_ID, {workdir} DAC_WORKDIR, {deadline_s} DAC_DEADLINE_S,
{python} (its environment's interpreter, else the suite's), {agent_dir} (where a shipped agent's files are),
{node_modules} NODE_PATH (its Node environment), {system_prompt_file} DAC_SYSTEM_PROMPT_FILE (the tool-use
workflow's system prompt, as every framework adapter has it), {max_steps} DAC_MAX_STEPS, {mcp_stdio}
DAC_MCP_STDIO (a command line serving the same tools over stdio, for agents that start their MCP servers).

The unit's wall-time limit is the process's: at the deadline the whole group (the agent and every child it
started) is killed and the unit ends `time_limit`; groups still running when the process exits are killed
too. The answer is what the agent gave to the `answer` tool; else its standard output (the last model call
becomes GENERATE); an agent that exits non-zero without answering (or is killed) makes the unit `error`.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from ..core import Answer, RunContext, System, Task, register_system
from ..core.system import SystemSetup
from .bridge import FRAMEWORK_SYSTEM, AgentSession
from .environments import BuiltEnvironment, EnvironmentBuildError, Requirements, ensure_environment
from .mcp_server import shared_tool_server
from .mcp_stdio import UNIT_FILE

QUESTION_FILE = "question.md"
SYSTEM_PROMPT_FILE = "system_prompt.md"  # the tool-use workflow's system prompt, as every framework adapter has it
OUTPUT_LIMIT = 200_000  # characters of stdout read as the answer
STDERR_TAIL = 1_500
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


# ---------------------------------------------------------------- the agent's process


@dataclass(frozen=True)
class AgentOutcome:
    """How the agent's process ended."""

    returncode: int | None  # None: killed at the deadline
    stdout: str
    stderr_tail: str
    timed_out: bool
    seconds: float

    @property
    def failure(self) -> str | None:
        """Why the process failed (a non-zero status, a signal), or None when it exited cleanly."""
        if self.timed_out or self.returncode == 0:
            return None
        code = self.returncode or 0
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        tail = f"; its stderr ends: …{self.stderr_tail}" if self.stderr_tail else ""
        return f"the agent {how}{tail}"


_live_groups: set[int] = set()
_live_lock = threading.Lock()


def kill_group(pgid: int) -> None:
    """SIGKILL every process of the group (the agent and the children it started); gone ones are fine."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def kill_live_groups() -> None:
    """Kill every agent group still running (the run stops: Ctrl-C, SIGTERM, the end of the process)."""
    with _live_lock:
        groups = list(_live_groups)
    for pgid in groups:
        kill_group(pgid)


def run_agent(argv: list[str], env: dict[str, str], cwd: Path, timeout_s: float) -> AgentOutcome:
    """Run the agent as its own process group; kill the group at the deadline and when it exits."""
    out_path, err_path = cwd / ".agent-stdout", cwd / ".agent-stderr"
    start = time.perf_counter()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        # setpriv: the agent dies with this process even when it is killed (-9) and no cleanup runs
        process = subprocess.Popen(
            [*_die_with_parent(), *argv],
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
        )
    with _live_lock:
        _live_groups.add(process.pid)
    watcher, lifeline = _watch_for_our_death(process.pid)
    timed_out = False
    try:
        process.wait(timeout=max(0.0, timeout_s))
    except subprocess.TimeoutExpired:
        timed_out = True
    finally:
        kill_group(process.pid)  # at the deadline, and the children an agent that exited left behind
        process.wait()
        with _live_lock:
            _live_groups.discard(process.pid)
        _stop_watching(watcher, lifeline)
    seconds = time.perf_counter() - start
    stdout = out_path.read_text("utf-8", errors="replace")[:OUTPUT_LIMIT]
    stderr = err_path.read_text("utf-8", errors="replace").strip()[-STDERR_TAIL:]
    return AgentOutcome(None if timed_out else process.returncode, stdout, stderr, timed_out, seconds)


def _watch_for_our_death(pgid: int) -> tuple[subprocess.Popen[bytes] | None, int]:
    """A watcher that kills the agent's group when this process ends however it ends (`kill -9`, or the CLI's
    `os._exit` at Ctrl-C, which runs no exit hook): it waits on a pipe whose only writer is this process, and
    reads end-of-file when the process is gone. Returns the watcher and the pipe's write end."""
    readable, lifeline = os.pipe()  # close-on-exec: no agent or other child inherits the write end
    try:
        watcher = subprocess.Popen(
            ["sh", "-c", f"read _; kill -9 -{pgid} 2>/dev/null"],  # the pipe is its stdin (dash: no `--`)
            stdin=readable,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # Ctrl-C of the run's terminal must not stop it before the agent
        )
    except OSError:
        watcher = None
    finally:
        os.close(readable)
    return watcher, lifeline


def _stop_watching(watcher: subprocess.Popen[bytes] | None, lifeline: int) -> None:
    if watcher is not None:
        watcher.kill()  # before closing the pipe: the group is already gone, its number must not be reused
        watcher.wait()
    os.close(lifeline)


def _die_with_parent() -> list[str]:
    return ["setpriv", "--pdeathsig", "KILL", "--"] if Path("/usr/bin/setpriv").is_file() else []


def _register_exit_hook() -> None:
    """Kill the agents before the interpreter waits for the unit threads at exit (which wait for the agents):
    threading's exit hooks run before those joins; `atexit` would run after them."""
    register = getattr(threading, "_register_atexit", None)
    if register is not None:
        register(kill_live_groups)
    import atexit

    atexit.register(kill_live_groups)


_register_exit_hook()


# ---------------------------------------------------------------- the system


class ExternalSystem(System):
    """An agent run as a command per unit, with the task's tools over MCP and the model through the gateway."""

    kind: ClassVar[str] = "external"
    command: ClassVar[tuple[str, ...]] = ()  # a template of argv (module docstring: the fields)
    env: ClassVar[dict[str, str]] = {}  # extra environment variables, templates too
    requirements: ClassVar[Requirements | None] = None  # its own environment; None: the suite's Python
    agent_dir: ClassVar[Path | None] = None  # where its files are ({agent_dir}; default: the scratch folder)
    # files of agent_dir copied into the scratch folder per unit: a Node ES module resolves its imports from
    # where it lies, and the scratch folder links the environment's node_modules
    agent_files: ClassVar[tuple[str, ...]] = ()
    system_prompt: ClassVar[str] = FRAMEWORK_SYSTEM

    def __init__(self) -> None:
        self._environment: BuiltEnvironment | None = None
        self._environment_lock = threading.Lock()
        self.build_error: str | None = None  # its environment could not be built: every unit says why

    def environment(self) -> BuiltEnvironment | None:
        """Its own environment, built once (cached across runs by the requirements' hash); None without
        requirements, or when the build failed (`build_error`)."""
        if self.requirements is None:
            return None
        with self._environment_lock:
            if self._environment is None and self.build_error is None:
                try:
                    self._environment = ensure_environment(self.requirements)
                except EnvironmentBuildError as failed:
                    self.build_error = str(failed)
        return self._environment

    def prepare(self, tasks: list[Task], setup: SystemSetup) -> list[dict[str, Any]]:
        self.environment()  # before any task's clock: a cold build takes a while
        return []

    def describe(self) -> dict[str, Any]:
        built = self.environment()
        return {
            **super().describe(),
            "command": list(self.command),
            "requirements": {"python": list(self.requirements.python), "node": list(self.requirements.node)}
            if self.requirements
            else None,
            "environment": built.describe() if built else None,
            **({"environment_error": self.build_error} if self.build_error else {}),
        }

    def run(self, task: Task, ctx: RunContext) -> Answer:
        self.environment()
        if self.build_error is not None:
            return Answer(status="error", error=f"{self.name}: its environment could not be built: {self.build_error}")
        session = AgentSession(task, ctx)
        with tempfile.TemporaryDirectory(prefix="dac-agent-") as scratch:
            workdir = Path(scratch)
            self.stage(workdir, ctx)
            with ctx.openai_endpoint() as endpoint, shared_tool_server().open_unit(session, endpoint.api_key) as mcp:
                fields = self.fields(task, workdir, ctx.model.recorder.remaining_s())
                fields["max_steps"] = str(ctx.budgets.max_steps)
                fields |= {"mcp_url": mcp.url, "model_base_url": endpoint.base_url, "model": endpoint.model}
                fields["token"] = endpoint.api_key
                fields["mcp_stdio"] = stdio_command(workdir, mcp.url, mcp.token)
                argv = [render(part, fields, self.name, "command") for part in self.command]
                outcome = run_agent(argv, self.process_environment(fields), workdir, float(fields["deadline_s"]))
        return self.answer(session, ctx, outcome)

    def stage(self, workdir: Path, ctx: RunContext) -> None:
        """The unit's scratch folder: the question, the system prompt, the agent's files, its node_modules."""
        (workdir / QUESTION_FILE).write_text(ctx.task_prompt(), encoding="utf-8")
        (workdir / SYSTEM_PROMPT_FILE).write_text(self.system_prompt, encoding="utf-8")
        for name in self.agent_files:
            shutil.copy2((self.agent_dir or workdir) / name, workdir / name)
        built = self.environment()
        if built is not None and built.node_modules is not None:
            (workdir / "node_modules").symlink_to(built.node_modules, target_is_directory=True)

    def fields(self, task: Task, workdir: Path, remaining_s: float) -> dict[str, str]:
        built = self.environment()
        python = built.python if built and built.python else Path(sys.executable)
        node_modules = built.node_modules if built and built.node_modules else ""
        return {
            "question_file": str(workdir / QUESTION_FILE),
            "task_id": task.id,
            "workdir": str(workdir),
            "deadline_s": f"{max(0.0, remaining_s):.3f}",
            "python": str(python),
            "agent_dir": str(self.agent_dir or workdir),
            "node_modules": str(node_modules),
            "system_prompt_file": str(workdir / SYSTEM_PROMPT_FILE),
        }

    def process_environment(self, fields: dict[str, str]) -> dict[str, str]:
        """The agent's whole environment: the fields, the offline switches, its own variables; nothing of ours."""
        built = self.environment()
        path = [str(folder) for folder in (built.bin_dirs if built else [])] + ["/usr/local/bin", "/usr/bin", "/bin"]
        env = {
            "PATH": os.pathsep.join(path),
            "HOME": fields["workdir"],
            "TMPDIR": fields["workdir"],
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
            return Answer(status="time_limit", error=f"{limit}: the agent was killed with its children")
        if outcome.failure is not None:
            return Answer(status="error", error=outcome.failure)
        return session.answer(outcome.stdout.strip() or None)


def stdio_command(workdir: Path, url: str, token: str) -> str:
    """The command line of the unit's tools over stdio (systems/mcp_stdio.py), its address in a private file."""
    unit_file = workdir / UNIT_FILE
    unit_file.touch(mode=0o600)
    unit_file.write_text(json.dumps({"url": url, "token": token}), encoding="utf-8")
    return shlex.join([sys.executable, "-m", "data_agent_compare.systems.mcp_stdio", "--unit-file", str(unit_file)])


def render(template: str, fields: dict[str, str], system: str, where: str) -> str:
    """One template with the unit's fields; an unknown field is the definition's error, named."""
    try:
        return template.format_map(fields)
    except (KeyError, IndexError, ValueError) as wrong:
        known = ", ".join("{" + name + "}" for name in TEMPLATE_FIELDS)
        raise ExternalSystemError(f"system {system!r}: field {where}: {template!r}: {wrong} (known: {known})") from None


def check_templates(system: str, command: tuple[str, ...], env: dict[str, str], source: str) -> None:
    """Refuse a definition whose templates name an unknown field, before any unit runs."""
    sample = dict.fromkeys(TEMPLATE_FIELDS, "x")
    if not command:
        raise ExternalSystemError(f"{source}: system {system!r}: field 'command': empty")
    try:
        for part in command:
            render(part, sample, system, "command")
        for name, value in env.items():
            render(value, sample, system, f"env.{name}")
    except ExternalSystemError as wrong:
        raise ExternalSystemError(f"{source}: {wrong}") from None


def external_system(
    name: str,
    command: list[str] | tuple[str, ...] | str,
    *,
    env: dict[str, str] | None = None,
    python: list[str] | None = None,
    node: list[str] | None = None,
    installer: str = "uv",
    agent_dir: str | Path | None = None,
    description: str = "",
    source: str = "<python>",
) -> type[ExternalSystem]:
    """Define and register an external system (the YAML route, or a plug-in in one call)."""
    argv = tuple(shlex.split(command) if isinstance(command, str) else command)
    variables = {str(k): str(v) for k, v in (env or {}).items()}
    check_templates(name, argv, variables, source)
    if installer not in ("uv", "pip"):
        raise ExternalSystemError(f"{source}: system {name!r}: field 'installer': {installer!r} is not uv or pip")
    needs = Requirements(tuple(python or ()), tuple(node or ()), installer) if (python or node) else None  # type: ignore[arg-type]
    attributes = {
        "name": name,
        "command": argv,
        "env": variables,
        "requirements": needs,
        "agent_dir": Path(agent_dir) if agent_dir else None,
        "description": description or f"external agent: {' '.join(argv)}",
        "__doc__": description or f"An external agent run as `{' '.join(argv)}`.",
        "__module__": source,  # `compare systems` says where it was defined
    }
    cls = type(f"External_{name}", (ExternalSystem,), attributes)
    return register_system(cls)


def load_external_systems(path: Path) -> list[str]:
    """Register the systems a YAML file defines (`systems: {name: {command, env, python, node, ...}}`);
    returns their names. A wrong entry raises ExternalSystemError naming the file, system and field."""
    import yaml

    from ..core.safe_load import DocumentTooComplex, load_yaml

    try:
        data = load_yaml(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError, DocumentTooComplex) as unreadable:
        why = unreadable.strerror if isinstance(unreadable, OSError) else str(unreadable).splitlines()[0]
        raise ExternalSystemError(f"{path}: cannot be read as YAML: {why}") from None
    systems = data.get("systems") if isinstance(data, dict) else None
    if not isinstance(systems, dict) or not systems:
        raise ExternalSystemError(f"{path}: field 'systems': expected a mapping of system names to definitions")
    allowed = {"command", "env", "python", "node", "installer", "agent_dir", "description"}
    for name, entry in systems.items():
        if not isinstance(entry, dict):
            raise ExternalSystemError(f"{path}: system {name!r}: expected a mapping (command, env, python, node)")
        unknown = sorted(set(entry) - allowed)
        if unknown:
            raise ExternalSystemError(
                f"{path}: system {name!r}: field {unknown[0]!r} is unknown ({', '.join(sorted(allowed))})"
            )
        for field in ("python", "node"):
            if field in entry and not (
                isinstance(entry[field], list) and all(isinstance(x, str) for x in entry[field])
            ):
                raise ExternalSystemError(f"{path}: system {name!r}: field {field!r}: expected a list of strings")
        if not isinstance(entry.get("command"), list | str):
            raise ExternalSystemError(
                f"{path}: system {name!r}: field 'command': expected a list of strings or a string"
            )
        if not isinstance(entry.get("env", {}), dict):
            raise ExternalSystemError(f"{path}: system {name!r}: field 'env': expected a mapping")
        agent_dir = entry.get("agent_dir")
        external_system(
            str(name),
            entry["command"],
            env=entry.get("env"),
            python=entry.get("python"),
            node=entry.get("node"),
            installer=str(entry.get("installer", "uv")),
            agent_dir=(path.parent / agent_dir) if agent_dir else path.parent,
            description=str(entry.get("description", "")),
            source=str(path),
        )
    return [str(name) for name in systems]
