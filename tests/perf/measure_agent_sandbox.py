"""What an external agent's sandbox costs per unit (issue 35), in one run, interleaved:

1. start-up: the same agent command started on the host (`run_unsandboxed`, the --unsandboxed-agents path)
   and in its sandbox (`run_in_sandbox`, with the relay serving its two ports), for `sh -c true` and for the
   suite's Python starting (`python -c pass`); medians of each arm and their ratio;
2. compiled bytecode: an agent environment's import of its framework (`import agents`, the OpenAI Agents SDK)
   in the sandbox from the environment as built (bytecode compiled at build) and from a copy without any
   `__pycache__` (what every unit paid before, its environment read-only).

Usage: python tests/perf/measure_agent_sandbox.py [runs per arm, default 15]"""

from __future__ import annotations

import os
import shutil
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

from data_agent_compare.core.tool import ToolSettings
from data_agent_compare.systems.environments import Requirements, ensure_environment
from data_agent_compare.systems.unsandboxed_agent import run_unsandboxed
from data_agent_compare.tools.agent_network import agent_network
from data_agent_compare.tools.agent_sandbox import (
    GATEWAY_PORT,
    MCP_PORT,
    AgentBox,
    agent_limits,
    agent_sandbox_problem,
    run_in_sandbox,
)

ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/scratch", "LANG": "C.UTF-8"}


def on_host(argv: list[str]) -> float:
    with tempfile.TemporaryDirectory() as scratch:
        start = time.perf_counter()
        outcome = run_unsandboxed(argv, {**ENV, "HOME": scratch}, Path(scratch), 60)
        elapsed = time.perf_counter() - start
    assert outcome.returncode == 0, outcome.stderr_tail
    return elapsed


def in_sandbox(argv: list[str], read_only: list[Path] | None = None, upstream: int = 0) -> float:
    box = AgentBox(argv, ENV, read_only=read_only or [], ports=(GATEWAY_PORT, MCP_PORT))
    relay = agent_network()
    start = time.perf_counter()
    outcome = run_in_sandbox(
        box, agent_limits(ToolSettings()), 60, lambda listeners: relay.relay(dict.fromkeys(listeners, upstream))
    )
    elapsed = time.perf_counter() - start
    assert outcome.returncode == 0, outcome.stderr_tail
    return elapsed


def paired(name: str, first, second, runs: int) -> None:
    arms: dict[str, list[float]] = {"a": [], "b": []}
    first(), second()  # warm
    for _ in range(runs):
        arms["a"].append(first())
        arms["b"].append(second())
    a, b = statistics.median(arms["a"]), statistics.median(arms["b"])
    print(f"{name}: {a * 1000:.1f} ms vs {b * 1000:.1f} ms (ratio {b / a:.2f}, +{(b - a) * 1000:.1f} ms)")


def main(runs: int) -> None:
    assert agent_sandbox_problem() is None, agent_sandbox_problem()
    upstream = socket.create_server(("127.0.0.1", 0)).getsockname()[1]
    print(f"load {os.getloadavg()[0]:.1f}; {runs} interleaved runs per arm, medians; host vs sandbox")
    for argv in (["sh", "-c", "true"], [sys.executable, "-c", "pass"]):
        paired(" ".join(argv[-2:]), lambda a=argv: on_host(a), lambda a=argv: in_sandbox(a, upstream=upstream), runs)
    built = ensure_environment(Requirements(python=("openai-agents==0.24.0",)))
    with tempfile.TemporaryDirectory(dir=built.path.parent) as copy:
        bare = Path(copy) / built.path.name
        shutil.copytree(built.path, bare, symlinks=True)
        for cache in list(bare.rglob("__pycache__")):
            shutil.rmtree(cache)
        Path(copy).chmod(0o755)
        python = [str(built.python), "-c", "import agents"]
        without = [str(bare / "venv" / "bin" / "python"), "-c", "import agents"]
        print(f"load {os.getloadavg()[0]:.1f}")
        paired(
            "import agents, compiled bytecode vs none",
            lambda: in_sandbox(python, [built.path]),
            lambda: in_sandbox(without, [bare]),
            runs,
        )


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
