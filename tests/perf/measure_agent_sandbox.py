"""What an external agent's sandbox costs per unit (issue 35), in one run, interleaved:

1. start-up: the same agent command started on the host (`run_unsandboxed`, the --unsandboxed-agents path)
   and in its sandbox (`run_in_sandbox`, with the relay serving its two ports), for `sh -c true` and for the
   suite's Python starting (`python -c pass`); medians of each arm and their ratio;
2. a request through the relay: a 4 KB POST on a keep-alive connection to a loopback HTTP server, from the host
   directly and from inside a sandbox through its relayed port (medians of 300, five times each);
3. compiled bytecode: an agent environment's import of its framework (`import agents`, the OpenAI Agents SDK)
   in the sandbox from the environment as built (bytecode compiled at build) and from a copy without any
   `__pycache__` (what every unit paid before, its environment read-only).

Usage: python tests/perf/measure_agent_sandbox.py [runs per arm, default 15]"""

from __future__ import annotations

import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
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


ECHO_CLIENT = r"""
import http.client, json, sys, time
port, calls, body = int(sys.argv[1]), int(sys.argv[2]), b"x" * 4000
connection, times = http.client.HTTPConnection("127.0.0.1", port), []
for _ in range(calls):
    start = time.perf_counter()
    connection.request("POST", "/", body, {"Content-Type": "application/json"})
    connection.getresponse().read()
    times.append(time.perf_counter() - start)
print(json.dumps(sorted(times)[calls // 2]))
"""


class _Echo(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


def relayed_requests(rounds: int = 5, calls: int = 300) -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port, relay = server.server_address[1], agent_network()
    direct, relayed = [], []
    client = [sys.executable, "-I", "-S", "-c", ECHO_CLIENT]
    for _ in range(rounds):
        done = subprocess.run([*client, str(port), str(calls)], capture_output=True, text=True, check=True)
        direct.append(json.loads(done.stdout))
        box = AgentBox([*client, str(GATEWAY_PORT), str(calls)], ENV, ports=(GATEWAY_PORT, MCP_PORT))
        outcome = run_in_sandbox(box, agent_limits(ToolSettings()), 60, lambda ls: relay.relay(dict.fromkeys(ls, port)))
        relayed.append(json.loads(outcome.stdout))
    a, b = statistics.median(direct), statistics.median(relayed)
    print(
        f"4 KB POST, keep-alive: {a * 1000:.3f} ms direct vs {b * 1000:.3f} ms through the relay "
        f"(+{(b - a) * 1000:.3f} ms)"
    )
    server.shutdown()


def main(runs: int) -> None:
    assert agent_sandbox_problem() is None, agent_sandbox_problem()
    upstream = socket.create_server(("127.0.0.1", 0)).getsockname()[1]
    print(f"load {os.getloadavg()[0]:.1f}; {runs} interleaved runs per arm, medians; host vs sandbox")
    for argv in (["sh", "-c", "true"], [sys.executable, "-c", "pass"]):
        paired(" ".join(argv[-2:]), lambda a=argv: on_host(a), lambda a=argv: in_sandbox(a, upstream=upstream), runs)
    relayed_requests()
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
