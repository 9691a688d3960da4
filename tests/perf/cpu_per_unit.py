"""CPU per extra unit of the harness: two runs through `compare` (few and many epochs) against a fake
OpenAI-compatible server; the difference of the children's CPU over the difference of units, so start-up,
loading and the report's fixed part cancel out (best of --reps pairs).

    .venv/bin/python tests/perf/cpu_per_unit.py [--benchmark dbgorilla|bundled] [--script answer|sql]
        [--epochs 1,5] [--reps 2] [--concurrency 16] [--latency 0.001] [-- extra compare flags]

Run it against other code with PYTHONPATH pointing at that package (the `compare` child inherits it).

- dbgorilla: 315 queries (the 40-query sample replicated), bench.py's server: one call per unit.
- bundled: the 37 bundled tasks, `tool_use`; a stateless server that looks at the request: `--script answer`
  calls `answer` with {"answer": "A"} (["A"] where the tool takes a list) at once (one model call + the answer
  tool per unit); `--script sql`
  first calls `execute_sql` (`SELECT 1`) when the tool is offered and no tool result is in the messages yet,
  then `answer` (two model calls + two tools per unit).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def completion(name: str, arguments: dict[str, Any]) -> bytes:
    function = {"name": name, "arguments": json.dumps(arguments)}
    call = {"index": 0, "id": f"call_{name}", "type": "function", "function": function}
    message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
    return json.dumps({
        "id": "gen-bench", "object": "chat.completion", "created": 1732300000, "model": "fake",
        "system_fingerprint": None,
        "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": message}],
        "usage": {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320},
    }).encode()


def serve(port_file: Path, latency_s: float, script: str) -> None:
    answer = completion("answer", {"answer": "A"})
    answers = completion("answer", {"answer": ["A"]})  # a multiple-choice task's answer tool takes a list
    sql = completion("execute_sql", {"sql": "SELECT 1"})

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            request = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            offered = {t.get("function", {}).get("name"): t.get("function", {}) for t in request.get("tools") or []}
            schema = offered.get("answer", {}).get("parameters", {}).get("properties", {}).get("answer", {})
            body = answers if "array" in json.dumps(schema.get("type", "")) else answer
            if script == "sql":
                done = any(m.get("role") == "tool" for m in request.get("messages") or [])
                if "execute_sql" in offered and not done:
                    body = sql
            if latency_s:
                time.sleep(latency_s)
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                             + str(len(body)).encode() + b"\r\n\r\n" + body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        request_queue_size = 1024
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            if not isinstance(sys.exc_info()[1], ConnectionError):
                super().handle_error(request, client_address)

    server = Server(("127.0.0.1", 0), Handler)
    port_file.write_text(str(server.server_address[1]))
    server.serve_forever()


@contextmanager
def scripted_server(latency_s: float, script: str) -> Iterator[str]:
    with tempfile.TemporaryDirectory() as folder:
        port_file = Path(folder) / "port"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        child = subprocess.Popen([sys.executable, __file__, "--serve", str(port_file), "--latency", str(latency_s),
                                  "--script", script], env=env)
        try:
            while not port_file.exists() or not port_file.read_text():
                if child.poll() is not None:
                    raise RuntimeError("the fake server did not start")
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port_file.read_text()}/v1"
        finally:
            child.terminate()
            child.wait(10)


def run(flags: list[str], out: Path) -> tuple:
    probe = ("import resource, subprocess, sys; r=subprocess.run(sys.argv[1:], capture_output=True, text=True);"
             " u=resource.getrusage(resource.RUSAGE_CHILDREN); print(r.returncode, u.ru_utime+u.ru_stime);"
             " sys.stderr.write(r.stderr[-3000:])")
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", probe, sys.executable, "-m", "data_agent_compare.cli", *flags,
                           "--out", str(out)], capture_output=True, text=True)
    wall = time.perf_counter() - start
    rc, cpu = done.stdout.split()[-2:]
    results = out / "results.jsonl"
    rows = [json.loads(line) for line in results.open()] if results.exists() else []
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[str(row.get("status"))] = statuses.get(str(row.get("status")), 0) + 1
    return int(rc), float(cpu), wall, len(rows), done.stderr[-800:], statuses


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--benchmark", choices=["dbgorilla", "bundled"], default="dbgorilla")
    parser.add_argument("--script", choices=["answer", "sql"], default="answer")
    parser.add_argument("--epochs", default="1,5")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--latency", type=float, default=0.001)
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    args, extra = parser.parse_known_args()
    if args.serve:
        return serve(args.serve, args.latency, args.script)
    extra = [e for e in extra if e != "--"]
    low, high = (int(e) for e in args.epochs.split(","))
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as folder:
        folder = Path(folder)
        if args.benchmark == "dbgorilla":
            sys.path.insert(0, str(HERE))
            import bench

            queries = bench.replicated_queries(folder, 315)
            server = bench.fake_server(args.latency)
            base = ["--benchmark", "dbgorilla", "--tasks-path", str(queries)]
        else:
            server = scripted_server(args.latency, args.script)
            base = ["--benchmark", "bundled"]
        results: dict[int, list] = {}
        with server as url:
            for rep in range(args.reps):
                for epochs in (low, high):
                    flags = ["--workflows", "tool_use", "--models", "openai-compatible:fake", "--base-url", url,
                             *base, "--epochs", str(epochs), "--concurrency", str(args.concurrency), *extra]
                    r = run(flags, folder / f"e{epochs}r{rep}")
                    results.setdefault(epochs, []).append(r)
                    print(f"epochs={epochs} rc={r[0]} cpu={r[1]:.2f}s wall={r[2]:.2f}s units={r[3]} {r[5]}", flush=True)
                    if r[0] not in (0, 1) or not r[3]:
                        print(r[4])
    c1 = min(r[1] for r in results[low])
    c5 = min(r[1] for r in results[high])
    u1, u5 = results[low][0][3], results[high][0][3]
    print(f"CPU per extra unit: {(c5 - c1) / (u5 - u1) * 1000:.2f} ms; whole-process per unit ({high} epochs): "
          f"{c5 / u5 * 1000:.2f} ms; load before {load[0]:.2f} after {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
