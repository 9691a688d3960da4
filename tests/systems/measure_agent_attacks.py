"""Issue 35's attack list, before and after: the hostile agent (tests/systems/agents/hostile_agent.py) run on
two bundled tasks at once on the host (`--unsandboxed-agents`: how every external agent ran before the sandbox)
and in its sandbox; one line per attack, blocked or not. Usage: python tests/systems/measure_agent_attacks.py"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
from pathlib import Path

from data_agent_compare.core import QuestionType
from data_agent_compare.engine.runner import execute
from data_agent_compare.systems.external import external_system
from data_agent_compare.tools import agent_sandbox

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from helpers import ROOT, load_tasks, make_plan, processes_with, read_records, scripted_provider

AGENTS = Path(__file__).resolve().parent / "agents"
KEY = "sk-or-v1-measure-attacks"


def attempt(tmp: Path, sandboxed: bool) -> dict[str, bool]:
    """Which attacks succeeded (True) in one run of two hostile agents at once."""
    os.environ["OPENROUTER_API_KEY"] = KEY
    listener = socket.create_server(("127.0.0.1", 0))
    run_dir, marker = tmp / "run", f"2.{os.getpid()}{int(sandboxed)}"
    gold, source = ROOT / "tasks" / "bundled" / "tasks.jsonl", ROOT / "core" / "model.py"
    env = {
        "HOSTILE_READ": os.pathsep.join(map(str, [gold, source, Path.home()])),
        "HOSTILE_WRITE": os.pathsep.join(map(str, [run_dir / "planted", Path("/tmp") / f"dac-planted-{marker}"])),
        "HOSTILE_PORTS": str(listener.getsockname()[1]),
        "HOSTILE_MARKER": marker,
    }
    name = f"measure_hostile_{int(sandboxed)}"
    external_system(name, ["{python}", "{agent_dir}/hostile_agent.py", "probe"], agent_dir=AGENTS, env=env)
    if not sandboxed:
        agent_sandbox.agent_sandbox_problem = lambda: "switched off to measure the host"  # type: ignore[assignment]
    with scripted_provider() as install:
        model = install(lambda request, context: "no model")
        tasks = [t for t in load_tasks("bundled") if t.question_type == QuestionType.FACTOID][:2]
        tools = {"unsandboxed_agents": not sandboxed}
        execute(make_plan(tmp, tasks, model, [name], concurrency=2, tools=tools))
    records = read_records(run_dir)
    first, second = (json.loads(r.answer["text"] or "{}") for r in records)
    said = json.dumps(first)
    found = {
        "gold file read": first["reads"][str(gold)].startswith("read"),
        "suite source read": first["reads"][str(source)].startswith("read"),
        "home listed": "listed" in first["reads"][str(Path.home())] and ".pyenv," in first["reads"][str(Path.home())],
        "API key in a readable environment": KEY in said,
        "other unit's token read": second["env"]["DAC_TOKEN"] in said,
        "suite's processes visible": len(first["processes"]) > 3,
        "file planted in the run directory": (run_dir / "planted").exists(),
        "file planted in the host's /tmp": Path(f"/tmp/dac-planted-{marker}").exists(),
        "host loopback port reached": "connected" in first["ports"].values(),
        "setsid child outlived the unit": bool(processes_with(marker)),
    }
    listener.close()
    for pid in processes_with(marker):
        os.kill(pid, 9)
    Path(f"/tmp/dac-planted-{marker}").unlink(missing_ok=True)
    return found


def main() -> None:
    problem = agent_sandbox.agent_sandbox_problem
    with tempfile.TemporaryDirectory() as before, tempfile.TemporaryDirectory() as after:
        Path(before).chmod(0o755), Path(after).chmod(0o755)
        on_host = attempt(Path(before), sandboxed=False)
        agent_sandbox.agent_sandbox_problem = problem  # type: ignore[assignment]
        in_sandbox = attempt(Path(after), sandboxed=True)
    print("| attack | on the host (before) | in its sandbox (now) |\n|---|---|---|")
    for attack in on_host:
        print(f"| {attack} | {'succeeded' if on_host[attack] else 'blocked'} | "
              f"{'succeeded' if in_sandbox[attack] else 'blocked'} |")


if __name__ == "__main__":
    main()
