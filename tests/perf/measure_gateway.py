"""The gateway under a hostile body, and its per-call overhead, measured in one run (issue 35).

    .venv/bin/python tests/perf/measure_gateway.py attack [--mb 64]
    .venv/bin/python tests/perf/measure_gateway.py overhead [--calls 400] [--load 2]

`attack`: a child process plays the runner (a `GatewayServer` with one open session, nothing else); this process
sends it one `[[],[],...]` body of `--mb` MB (Content-Length declared, the body sent after the headers) and
reads the reply. The child's resident memory is read from /proc before the attack and its peak (VmHWM) after:
the growth is what the attack cost the runner.

`overhead`: one scripted test model answering at once, called in turn in-process (`MeteredModel.generate`) and
through the gateway by an httpx client on one keep-alive connection, in interleaved pairs (the order rotated
from pair to pair); the gateway's overhead per call is the median of each pair's difference. `--load N` runs N
busy processes meanwhile (the machine shared, as during a run); the 1-minute load average is printed.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/helpers.py

QUESTION = [{"role": "user", "content": "How many customers are there? " * 20}]


def _memory_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def _runner(conn: Any) -> None:
    """The child: a gateway with one session, its address sent to the parent; runs until told to stop."""
    from data_agent_compare.core import Budgets, Message, MeteredModel, Trace, TraceRecorder
    from data_agent_compare.providers.endpoint import GatewayServer
    from data_agent_compare.providers.scripted import ScriptedProvider

    from helpers import SCRIPTED

    recorder = TraceRecorder(Trace(task_id="t", system="s", model=SCRIPTED.alias), Budgets(wall_time_s=3600))
    model = MeteredModel(
        SCRIPTED, ScriptedProvider(lambda r, c: Message(role="assistant", content="42")), recorder, system="s"
    )
    with GatewayServer() as gateway, gateway.open_session(model) as endpoint:
        conn.send((endpoint.base_url, endpoint.api_key))
        conn.recv()


def attack(megabytes: int) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    parent, child = context.Pipe()
    process = context.Process(target=_runner, args=(child,), daemon=True)
    process.start()
    base_url, key = parent.recv()
    time.sleep(0.5)
    before = _memory_kb(process.pid, "VmRSS")
    body = b"[" + b"[]," * (megabytes * (1 << 20) // 3 - 1) + b"[]]"
    host, port = base_url.split("//", 1)[1].split("/", 1)[0].split(":")
    path = "/" + base_url.split("//", 1)[1].split("/", 1)[1] + "/chat/completions"
    head = (
        f"POST {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    ).encode()
    started = time.perf_counter()
    with socket.create_connection((host, int(port)), timeout=600) as sock:
        sock.sendall(head)
        sent = 0
        try:
            view = memoryview(body)
            while sent < len(body):
                sent += sock.send(view[sent : sent + (1 << 20)])
        except OSError as error:  # the server answered and closed without reading the body
            stopped = type(error).__name__
        else:
            stopped = None
        reply = b""
        try:
            while b"\r\n\r\n" not in reply and (chunk := sock.recv(65536)):
                reply += chunk
        except OSError:
            pass
    seconds = time.perf_counter() - started
    peak = _memory_kb(process.pid, "VmHWM")
    parent.send("stop")
    process.join(10)
    return {
        "body_mb": megabytes,
        "status_line": reply.split(b"\r\n", 1)[0].decode(errors="replace"),
        "body_bytes_sent": sent,
        "send_stopped_by": stopped,
        "runner_rss_before_mb": round(before / 1024, 1),
        "runner_peak_rss_mb": round(peak / 1024, 1),
        "runner_growth_mb": round((peak - before) / 1024, 1),
        "seconds_to_reply": round(seconds, 2),
    }


def _burn() -> None:
    while True:
        pass


def overhead(calls: int, load: int) -> dict[str, Any]:
    import httpx

    from data_agent_compare.core import Budgets, Message, MeteredModel, Trace, TraceRecorder
    from data_agent_compare.providers.endpoint import GatewayServer
    from data_agent_compare.providers.openai_protocol import message_from_openai
    from data_agent_compare.providers.scripted import ScriptedProvider

    from helpers import SCRIPTED

    burners = [multiprocessing.get_context("spawn").Process(target=_burn, daemon=True) for _ in range(load)]
    for burner in burners:
        burner.start()
    recorder = TraceRecorder(
        Trace(task_id="t", system="s", model=SCRIPTED.alias),
        Budgets(wall_time_s=36000, max_steps=10**6, max_tokens=10**9),
    )
    provider = ScriptedProvider(lambda r, c: Message(role="assistant", content="42"))
    model = MeteredModel(SCRIPTED, provider, recorder, system="s")
    recorder.start()
    messages = [message_from_openai(m) for m in QUESTION]
    body = {"model": "m", "messages": QUESTION, "temperature": 0.2, "stop": ["\nObservation:"]}
    differences, direct, gateway_s = [], [], []
    try:
        with GatewayServer() as gateway, gateway.open_session(model) as endpoint:
            client = httpx.Client(headers={"Authorization": f"Bearer {endpoint.api_key}"}, timeout=60, trust_env=False)
            url = f"{endpoint.base_url}/chat/completions"
            for _ in range(20):  # warm-up
                client.post(url, json=body).raise_for_status()
                model.generate(messages)
            for number in range(calls):
                pair = {}
                for side in ("direct", "gateway") if number % 2 else ("gateway", "direct"):
                    started = time.perf_counter()
                    if side == "direct":
                        model.generate(messages)
                    else:
                        client.post(url, json=body).raise_for_status()
                    pair[side] = time.perf_counter() - started
                direct.append(pair["direct"])
                gateway_s.append(pair["gateway"])
                differences.append(pair["gateway"] - pair["direct"])
            client.close()
    finally:
        for burner in burners:
            burner.kill()
    quartiles = statistics.quantiles(differences, n=4)
    return {
        "calls": calls,
        "busy_processes": load,
        "load_average_1m": round(os.getloadavg()[0], 2),
        "direct_median_ms": round(statistics.median(direct) * 1e3, 3),
        "gateway_median_ms": round(statistics.median(gateway_s) * 1e3, 3),
        "gateway_overhead_median_ms": round(statistics.median(differences) * 1e3, 3),
        "overhead_quartiles_ms": [round(q * 1e3, 3) for q in (quartiles[0], quartiles[2])],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    verbs = parser.add_subparsers(dest="verb", required=True)
    verbs.add_parser("attack").add_argument("--mb", type=int, default=64)
    measured = verbs.add_parser("overhead")
    measured.add_argument("--calls", type=int, default=400)
    measured.add_argument("--load", type=int, default=0)
    args = parser.parse_args()
    result = attack(args.mb) if args.verb == "attack" else overhead(args.calls, args.load)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
