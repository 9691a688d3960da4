"""The suite's speed, as ratios measured in one run; regenerates the table in docs/PERFORMANCE.md.

    .venv/bin/python tests/perf/bench.py [--quick] [--no-write] [--skip-local-model]

Every figure is measured here, in this run, against a local OpenAI-compatible server started in its own
process (`--serve`: headers and body in one write, TCP_NODELAY, a listen backlog of 1024), on the same
machine as the suite, so each is a ratio of two things measured under the same load:

- harness overhead per model call: `MeteredModel.generate` through the runner's provider wrapper (request
  keying, retries, deadline, trace step) minus a bare POST by the provider's own HTTP path (`post_json`, the
  same httpx client), interleaved call by call (the median of each call's difference from the POST before it),
  against a server that answers at once;
- throughput at 1, 8, 64 and 256 calls in flight (`--concurrency N`, the default executor: `auto` picks worker
  processes from 32 in flight) against a server that answers after 200 ms, as a fraction of the ideal
  N / 0.2 s, beside the bare client (N threads POSTing, each with an httpx client of its own) on the same server,
  and as a multiple of one task at a time (FDABench's reference harness runs tasks sequentially: the anchor);
- the thread and the process executor on 5,000 units at 64 and at 256 in flight (same server), and on 3,150
  units at 32 in flight against replies after 1 ms (the harness's CPU the limit): units per second each, and
  the bare client's beside;
- the harness's CPU per unit: two DBGorilla runs through `compare` (1 and 5 epochs of 315 queries, 16 in flight,
  a server answering in 1 ms), the difference of their CPU time over the difference of their units, so start-up,
  loading and the report's fixed part cancel out;
- a 10,000-unit DBGorilla run (315 queries × 32 epochs, the 40-query sample replicated under distinct ids)
  through the `compare` command: wall time, peak memory, size of the run directory;
- `compare --help` and `compare score` on 2,520 DBGorilla predictions (beyond start-up), each the median of 11
  runs interleaved with `python -c pass`;
- the embedded model's decode+sample speed through the suite (`LocalLlamaProvider`) as a fraction of
  llama-cpp-python called directly with the same prompt, grammar and settings.

Measurements that move with the machine's load are taken in interleaved pairs (the two sides one right after
the other, the order rotated from pair to pair): the table shows their median, their lowest and highest, and
the 1-minute load average over the pairs, never the best alone.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "PERFORMANCE.md"
SAMPLE = ROOT / "tests" / "fixtures" / "dbgorilla" / "queries-sample.json"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
LATENCY_S = 0.2
IN_FLIGHT = [1, 8, 64, 256]
WAVES = 16  # units per in-flight slot in a throughput run: ideal time = WAVES × LATENCY_S

# ---------------------------------------------------------------- the fake server (its own process)


def completion_body() -> bytes:
    """A complete chat completion that calls DBGorilla's `query_database` (the unit's prediction)."""
    arguments = json.dumps({"collection_name": "Restaurants", "search_query": "romantic dinner"})
    function = {"name": "query_database", "arguments": arguments}
    call = {"index": 0, "id": "call_0", "type": "function", "function": function}
    message = {"role": "assistant", "content": None, "refusal": None, "tool_calls": [call]}
    return json.dumps(
        {
            "id": "gen-bench",
            "object": "chat.completion",
            "created": 1732300000,
            "model": "fake",
            "system_fingerprint": None,
            "choices": [{"index": 0, "finish_reason": "tool_calls", "logprobs": None, "message": message}],
            "usage": {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320},
        }
    ).encode()


def serve(port_file: Path, latency_s: float) -> None:
    body = completion_body()
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
        + str(len(body)).encode()
        + b"\r\n\r\n"
        + body
    )

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if latency_s:
                time.sleep(latency_s)
            self.wfile.write(reply)  # status line, headers and body in one write

        def log_message(self, format: str, *args: Any) -> None:
            pass

    class Server(ThreadingHTTPServer):
        request_queue_size = 1024
        daemon_threads = True

        def handle_error(self, request: Any, client_address: Any) -> None:
            if not isinstance(sys.exc_info()[1], ConnectionError):  # a client closing its pool is no error
                super().handle_error(request, client_address)

    server = Server(("127.0.0.1", 0), Handler)
    port_file.write_text(str(server.server_address[1]))
    server.serve_forever()


@contextmanager
def fake_server(latency_s: float) -> Iterator[str]:
    """The base URL of a fake server in a child process, answering after `latency_s`."""
    with tempfile.TemporaryDirectory() as folder:
        port_file = Path(folder) / "port"
        child = subprocess.Popen([sys.executable, __file__, "--serve", str(port_file), "--latency", str(latency_s)])
        try:
            while not port_file.exists() or not port_file.read_text():
                if child.poll() is not None:
                    raise RuntimeError("the fake server did not start")
                time.sleep(0.05)
            yield f"http://127.0.0.1:{port_file.read_text()}/v1"
        finally:
            child.terminate()
            child.wait(10)


# ---------------------------------------------------------------- helpers


def replicated_queries(folder: Path, count: int) -> Path:
    """The 40-query DBGorilla sample replicated to `count` queries with distinct ids."""
    sample = json.loads(SAMPLE.read_text())
    rows = [{**sample[i % len(sample)], "index": 100_000 + i} for i in range(count)]
    path = folder / f"queries-{count}.json"
    path.write_text(json.dumps(rows))
    return path


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def timed(command: list[str], **options: Any) -> float:
    start = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True, **options)
    return time.perf_counter() - start


def compare_command() -> list[str]:
    return [str(Path(sys.executable).with_name("compare"))]


def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


# ---------------------------------------------------------------- 1. harness overhead per model call


def overhead(calls: int) -> dict[str, float]:
    from data_agent_compare.core import Budgets, Message, ModelConfig, Trace
    from data_agent_compare.core.model import MeteredModel, ModelRequest, ToolSpec
    from data_agent_compare.providers.cache import KeyedProvider
    from data_agent_compare.providers.http_deadline import post_json
    from data_agent_compare.providers.journal import UnitRecorder
    from data_agent_compare.providers.openai_http import OpenAIHTTPProvider
    from data_agent_compare.providers.openai_protocol import request_to_openai

    tool = ToolSpec(name="query_database", description="Query.", parameters={"type": "object", "properties": {}})
    messages = [Message(role="user", content="Which restaurants are open now? " * 20)]
    with fake_server(0.0) as base_url:
        config = ModelConfig(alias="fake", provider="openai-compatible", model_id="fake", base_url=base_url)
        provider = OpenAIHTTPProvider()
        body = request_to_openai(ModelRequest(messages=messages, tools=[tool]), "fake")
        url = base_url + "/chat/completions"
        direct, harness = [], []
        for index in range(calls + 50):  # the first 50 of each warm the connection and the code
            start = time.perf_counter()
            with provider._clients.lend() as client:
                reply = post_json(client, url, body, {})  # the provider's own HTTP path
            json.loads(reply.content)
            direct_s = time.perf_counter() - start
            trace = Trace(task_id="t", system="s", model="fake")
            recorder = UnitRecorder(trace, Budgets(), KeyedProvider(provider), None)
            model = MeteredModel(config, recorder.provider, recorder, system="s")
            start = time.perf_counter()
            model.generate(messages, [tool])
            harness_s = time.perf_counter() - start
            if index >= 50:
                direct.append(direct_s)
                harness.append(harness_s)
    return {
        "direct_median_ms": 1e3 * statistics.median(direct),
        "harness_median_ms": 1e3 * statistics.median(harness),
        # each call's overhead against the bare POST made just before it: the load each pair met cancels
        "overhead_median_ms": 1e3 * statistics.median(h - d for h, d in zip(harness, direct, strict=True)),
        "overhead_p99_ms": 1e3 * (percentile(harness, 99) - percentile(direct, 99)),
        "calls": calls,
        "load": os.getloadavg()[0],
    }


# ---------------------------------------------------------------- 2. throughput by calls in flight


def run_units(
    base_url: str, queries: Path, out: Path, concurrency: int, units: int, executor: str = "auto"
) -> tuple[float, float, str]:
    """Wall time of `units` DBGorilla units through the runner (the CLI's path without its start-up), the
    steady rate: units recorded per second from the first record to the last (the run's fixed start — git
    revision, manifest, the first wave's call — left out; the 10,000-unit run reports it in its wall time),
    and the executor that ran them (`auto`, the default, chooses one)."""
    from data_agent_compare.engine.config import load_run_config
    from data_agent_compare.engine.events import UnitFinished
    from data_agent_compare.engine.runner import execute, plan_run

    tasks = len(json.loads(queries.read_text()))
    epochs = -(-units // tasks)
    overrides = {
        "workflows": ["tool_use"],
        "models": ["openai-compatible:fake"],
        "base_url": base_url,
        "benchmark": "dbgorilla",
        "tasks_path": str(queries),
        "limit": min(tasks, units),
        "epochs": epochs,
        "concurrency": concurrency,
        "executor": executor,
        "out": str(out),
    }
    plan = plan_run(load_run_config(None, overrides))
    recorded: list[float] = []
    start = time.perf_counter()
    execute(plan, listeners=[lambda e: isinstance(e, UnitFinished) and recorded.append(time.perf_counter())])
    wall = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    return wall, (len(recorded) - 1) / (recorded[-1] - recorded[0]), plan.config.executor


def spread(values: list[float]) -> dict[str, float]:
    """The median of measurements taken in interleaved pairs, and their lowest and highest (never the best
    alone: a noisy machine's best is not what a user sees)."""
    return {"median": statistics.median(values), "low": min(values), "high": max(values), "n": len(values)}


def bare_calls(base_url: str, in_flight: int, waves: int) -> float:
    """Wall time of `in_flight` threads each POSTing `waves` times, each thread with an httpx client of its own
    (one kept-alive connection, the providers' deadline client): what this machine's client and server allow at
    that concurrency, without the harness. One client shared by all threads would check every idle connection
    on each request (a system call each): a lower ceiling than a user's own client reaches."""
    import httpx

    from data_agent_compare.providers.http_deadline import deadline_client

    tls = httpx.create_ssl_context()  # shared, as the providers' client pool shares it: made before the clock starts
    clients = [deadline_client(keepalive=1, verify=tls) for _ in range(in_flight)]
    body = {"model": "fake", "messages": [{"role": "user", "content": "Which restaurants are open now? " * 20}]}
    failed: list[BaseException] = []

    def worker(client: Any) -> None:
        for _ in range(waves):
            try:
                json.loads(client.post(base_url + "/chat/completions", json=body).content)
            except Exception as failure:  # a failed call would make the ceiling look higher than it is
                failed.append(failure)

    threads = [threading.Thread(target=worker, args=(client,)) for client in clients]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - start
    for client in clients:
        client.close()
    if failed:
        raise RuntimeError(f"the bare client failed {len(failed)} of {in_flight * waves} calls: {failed[0]!r}")
    return wall


def throughput(folder: Path, waves: int, pairs: int) -> list[dict[str, Any]]:
    """At each number in flight, `pairs` interleaved pairs of the suite (its default executor) and the bare
    client on the same server, the order rotated from pair to pair: medians, with their spread and the load."""
    queries = replicated_queries(folder, 315)
    rows = []
    with fake_server(LATENCY_S) as base_url:
        run_units(base_url, queries, folder / "warm", 8, 16)  # imports, connections
        for in_flight in IN_FLIGHT:
            units = in_flight * waves
            rates, bare_rates, loads, ran = [], [], [], ""
            for index in range(pairs):
                for side in ("suite", "bare") if index % 2 == 0 else ("bare", "suite"):
                    if side == "suite":
                        _, rate, ran = run_units(base_url, queries, folder / f"c{in_flight}", in_flight, units)
                        rates.append(rate)
                    else:
                        bare_rates.append(units / bare_calls(base_url, in_flight, waves))
                    loads.append(os.getloadavg()[0])
            ideal = in_flight / LATENCY_S
            rows.append(
                {
                    "in_flight": in_flight,
                    "units": units,
                    "executor": ran,
                    "units_per_s": spread(rates),
                    "bare_units_per_s": spread(bare_rates),
                    "fraction_of_ideal": statistics.median(rates) / ideal,
                    "bare_fraction_of_ideal": statistics.median(bare_rates) / ideal,
                    "of_bare": spread([r / b for r, b in zip(rates, bare_rates, strict=True)]),
                    "load": {"low": min(loads), "high": max(loads)},
                }
            )
    for row in rows:
        row["vs_one_at_a_time"] = row["units_per_s"]["median"] / rows[0]["units_per_s"]["median"]
    return rows


def executors(
    folder: Path, units: int, pairs: int, in_flight: int = 64, latency_s: float = LATENCY_S
) -> dict[str, Any]:
    """Units per second of the thread executor and of the process executor (one worker per core, each running
    its share of the units in flight on threads) in `pairs` interleaved pairs against the same server, the
    order rotated; and the bare client at the same number in flight on that server (the machine's ceiling)."""
    queries = replicated_queries(folder, 315)
    found: dict[str, Any] = {"units": units, "in_flight": in_flight, "workers": os.cpu_count() or 1}
    found["latency_s"] = latency_s
    rates: dict[str, list[float]] = {"thread": [], "process": []}
    loads = []
    with fake_server(latency_s) as base_url:
        for index in range(pairs):
            for executor in ("thread", "process") if index % 2 == 0 else ("process", "thread"):
                out = folder / f"x-{executor}-{in_flight}"
                rates[executor].append(run_units(base_url, queries, out, in_flight, units, executor)[1])
                loads.append(os.getloadavg()[0])
        waves = max(1, units // in_flight)
        bare = [in_flight * waves / bare_calls(base_url, in_flight, waves) for _ in range(pairs)]
    found |= {f"{executor}_units_per_s": spread(values) for executor, values in rates.items()}
    found["speed_up"] = spread([p / t for p, t in zip(rates["process"], rates["thread"], strict=True)])
    found["bare_units_per_s"] = spread(bare)
    found["load"] = {"low": min(loads), "high": max(loads)}
    return found


def executor_rows(folder: Path, units: int, pairs: int) -> list[dict[str, Any]]:
    """At 64 and 256 in flight against 200 ms replies; and where the harness's CPU is the limit (replies after
    1 ms, 32 in flight): there a second core is what the process executor adds."""
    rows = [executors(folder, units, pairs, in_flight) for in_flight in (64, 256)]
    return [*rows, executors(folder, units * 63 // 100, pairs, 32, 0.001)]


def cpu_per_unit(folder: Path, pairs: int) -> dict[str, Any]:
    """CPU seconds of a `compare` process per extra unit: a 1- and a 5-epoch run of 315 DBGorilla queries, 16 in
    flight, a server answering in 1 ms, one right after the other (the order rotated), their difference over
    the 1,260 extra units; the median over `pairs` pairs with its spread and the load (never the least CPU)."""
    queries = replicated_queries(folder, 315)
    probe = "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
    probe += " sys.stderr.write(done.stderr[-2000:]); done.returncode and sys.exit(done.returncode);"
    probe += " u = resource.getrusage(resource.RUSAGE_CHILDREN); print(u.ru_utime + u.ru_stime)"
    extra, per_extra, whole, loads = 315 * 4, [], [], []
    with fake_server(0.001) as base_url:
        for index in range(pairs):
            cpu: dict[int, float] = {}
            for epochs in (1, 5) if index % 2 == 0 else (5, 1):
                out = folder / f"cpu-{epochs}-{index}"
                flags = ["--workflows", "tool_use", "--models", "openai-compatible:fake", "--base-url", base_url]
                flags += ["--benchmark", "dbgorilla", "--tasks-path", str(queries), "--epochs", str(epochs)]
                flags += ["--concurrency", "16", "--executor", "thread", "--out", str(out)]
                done = subprocess.run([sys.executable, "-c", probe, *compare_command(), *flags], capture_output=True)
                if done.returncode != 0:
                    raise RuntimeError(f"the CPU-per-unit run failed: {done.stderr[-2000:]!r}")
                cpu[epochs] = float(done.stdout.split()[-1])
                loads.append(os.getloadavg()[0])
                shutil.rmtree(out)
            per_extra.append(1e3 * (cpu[5] - cpu[1]) / extra)
            whole.append(1e3 * cpu[5] / (315 * 5))
    load = {"low": min(loads), "high": max(loads)}
    return {"per_extra_unit_ms": spread(per_extra), "whole_process_per_unit_ms": spread(whole), "load": load}


# ---------------------------------------------------------------- 3. a 10,000-unit run through `compare`


def big_run(folder: Path, epochs: int, concurrency: int) -> dict[str, float]:
    queries = replicated_queries(folder, 315)
    out = folder / "big"
    with fake_server(LATENCY_S) as base_url:
        flags = ["--workflows", "tool_use", "--models", "openai-compatible:fake", "--base-url", base_url]
        flags += ["--benchmark", "dbgorilla", "--tasks-path", str(queries), "--epochs", str(epochs)]
        flags += ["--concurrency", str(concurrency), "--out", str(out)]
        probe = "import resource, subprocess, sys; subprocess.run(sys.argv[1:], check=True, capture_output=True);"
        probe += " print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", probe, *compare_command(), *flags], capture_output=True, text=True)
        wall = time.perf_counter() - start
    if done.returncode not in (0, 1) or not (out / "results.jsonl").exists():  # 1: some unit failed, counted
        raise RuntimeError(f"the 10,000-unit run failed: {done.stderr[-2000:]}")
    statuses = [json.loads(line)["status"] for line in (out / "results.jsonl").open()]
    units = len(statuses)
    manifest = json.loads((out / "manifest.json").read_text())
    started, finished = (datetime.fromisoformat(manifest[key]) for key in ("started_at", "finished_at"))
    run_s = (finished - started).total_seconds()
    return {
        "units": units,
        "concurrency": concurrency,
        "wall_s": wall,
        "run_s": run_s,
        "fraction_of_ideal": (units / run_s) / (concurrency / LATENCY_S),
        "peak_rss_mib": int(done.stdout.split()[-1]) / 1024,
        "run_dir_mib": dir_size(out) / 2**20,
        "files": sum(1 for p in out.rglob("*") if p.is_file()),
        "not_completed": sum(status != "completed" for status in statuses),
        "load": os.getloadavg()[0],
    }


# ---------------------------------------------------------------- 4. start-up and scoring


def startup_and_score(folder: Path, repeats: int) -> dict[str, float]:
    queries = replicated_queries(folder, 2520)
    rng = random.Random(0)
    rows = json.loads(queries.read_text())
    predictions = folder / "predictions.jsonl"
    with predictions.open("w") as sink:
        for row in rows:
            predicted = row["query"] if rng.random() < 0.6 else None
            sink.write(json.dumps({"task_id": f"dbgorilla-{row['index']}", "predicted_query": predicted}) + "\n")
    score = [*compare_command(), "score", "--benchmark", "dbgorilla", "--tasks", str(queries)]
    score += ["--predictions", str(predictions)]
    bare, help_, scoring = [], [], []
    for _ in range(repeats):  # interleaved, so that the machine's load falls on all three alike
        bare.append(timed([sys.executable, "-c", "pass"]))
        help_.append(timed([*compare_command(), "--help"]))
        scoring.append(timed(score, env={**os.environ, "COLUMNS": "200"}))
    return {
        "python_s": statistics.median(bare),
        "help_s": statistics.median(help_),
        "score_s": statistics.median(scoring),
        "score_beyond_startup_s": statistics.median(scoring) - statistics.median(help_),
        "load": os.getloadavg()[0],
    }


# ---------------------------------------------------------------- 5. the embedded model


def local_model(repeats: int, max_tokens: int, threads: int) -> dict[str, float]:
    """Decode+sample seconds per generated token: the provider's `complete` vs llama-cpp-python's
    `create_completion` with the same prompt, grammar (from the same JSON schema), temperature 0, seed and
    threads, both from an empty KV cache, alternating, on three bundled tasks; prompt evaluation
    (llama.cpp's own counter) subtracted."""
    import llama_cpp

    from data_agent_compare.core import Message, ModelConfig, ToolSettings
    from data_agent_compare.core.model import CallContext, ModelRequest
    from data_agent_compare.core.prompt import task_prompt
    from data_agent_compare.core.trace import Phase
    from data_agent_compare.providers import local
    from data_agent_compare.tasks.bundled import BundledBenchmark

    bench = BundledBenchmark()
    tasks = bench.prepare(bench.load())
    config = ModelConfig(alias="local", provider="local", model_id="gemma-3-270m", params={"n_threads": threads})
    provider = local.LocalLlamaProvider()
    llama = provider._load(config)
    context = CallContext(task_id="t", system="s", model="local", phase=Phase.DECISION)

    def decode_s(call: Callable[[], int]) -> tuple[float, int]:
        llama.reset()
        llama._ctx.kv_cache_clear()
        llama_cpp.llama_perf_context_reset(llama._ctx.ctx)
        start = time.perf_counter()
        tokens = call()
        total = time.perf_counter() - start
        return total - llama_cpp.llama_perf_context(llama._ctx.ctx).t_p_eval_ms / 1e3, tokens

    ours, theirs = [], []
    for task in (tasks[0], tasks[3], tasks[7]):
        specs = [tool.spec() for tool in bench.tools(task, ToolSettings())]
        messages = [Message(role="user", content=task_prompt(task.for_agent()))]
        request = ModelRequest(messages=messages, tools=specs, max_output_tokens=max_tokens, temperature=0.0)
        schema = local.output_schema(request)
        budget = llama.n_ctx() - max_tokens
        prompt = local.fit_prompt(local.render_blocks(request, schema), llama.count_tokens, budget)
        grammar = local._grammar(json.dumps(schema))

        def suite(request: ModelRequest = request) -> int:
            return provider.complete(request, config, timeout_s=600, context=context).usage.output_tokens

        def direct(prompt: str = prompt, grammar: Any = grammar) -> int:
            out = llama.create_completion(prompt, grammar=grammar, temperature=0.0, max_tokens=max_tokens, seed=0)
            return out["usage"]["completion_tokens"]

        for index in range(repeats + 1):  # the first pair warms caches and is not counted
            pair = (decode_s(suite), decode_s(direct))
            if index:
                ours.append(pair[0])
                theirs.append(pair[1])
    provider.close()
    suite_per_token = sum(s for s, _ in ours) / sum(n for _, n in ours)
    direct_per_token = sum(s for s, _ in theirs) / sum(n for _, n in theirs)
    return {
        "suite_ms_per_token": 1e3 * suite_per_token,
        "direct_ms_per_token": 1e3 * direct_per_token,
        "speed_ratio": direct_per_token / suite_per_token,
        "tokens": sum(n for _, n in ours),
        "threads": threads,
        "load": os.getloadavg()[0],
    }


# ---------------------------------------------------------------- the table


def verdict(met: bool) -> str:
    return "met" if met else "**not met**"


def table(results: dict[str, Any]) -> str:
    lines = ["| measure | result | target | | load |", "|---|---|---|---|---|"]
    o = results.get("overhead")
    if o:
        lines.append(
            f"| harness overhead per model call, median (p99) | {o['overhead_median_ms']:.2f} ms "
            f"({o['overhead_p99_ms']:.2f} ms) over a bare POST of {o['direct_median_ms']:.2f} ms | < 1 ms median "
            f"| {verdict(o['overhead_median_ms'] < 1)} | {o['load']:.1f} |"
        )
    for row in results.get("throughput", []):
        rate, bare, of_bare = row["units_per_s"], row["bare_units_per_s"], row["of_bare"]
        target, met = "–", ""
        if row["in_flight"] == 64:
            target, met = "≥ 0.9 of ideal", verdict(row["fraction_of_ideal"] >= 0.9)
        if row["in_flight"] == 256:
            target, met = "≥ 0.5 of the bare client", verdict(of_bare["median"] >= 0.5)
        lines.append(
            f"| throughput at {row['in_flight']} in flight (200 ms calls, {row['units']} units, default executor: "
            f"{row['executor']}) | {rate['median']:.1f} units/s ({ranged(rate, '.1f')}) = "
            f"{row['fraction_of_ideal']:.2f} of ideal, {row['vs_one_at_a_time']:.1f}× one task at a time; "
            f"**bare client: {bare['median']:.1f} units/s** ({row['bare_fraction_of_ideal']:.2f} of ideal): "
            f"{of_bare['median']:.2f} of it ({ranged(of_bare, '.2f')}) | {target} | {met} | {ranged(row['load'])} |"
        )
    for x in results.get("executors", []):
        process, thread, bare, speed = (
            x[k] for k in ("process_units_per_s", "thread_units_per_s", "bare_units_per_s", "speed_up")
        )
        lines.append(
            f"| process vs thread executor, {x['units']:,} units at {x['in_flight']} in flight "
            f"({x['latency_s'] * 1000:.0f} ms calls) | {process['median']:.0f} vs {thread['median']:.0f} units/s "
            f"= {speed['median']:.2f}× ({ranged(speed, '.2f')}; {x['workers']} workers, one per core); "
            f"**bare client: {bare['median']:.0f} units/s**, process {process['median'] / bare['median']:.2f} "
            f"and thread {thread['median'] / bare['median']:.2f} of it | > 1× on {x['workers']} cores "
            f"| {verdict(speed['median'] > 1)} | {ranged(x['load'])} |"
        )
    c = results.get("cpu_per_unit")
    if c:
        per, whole = c["per_extra_unit_ms"], c["whole_process_per_unit_ms"]
        lines.append(
            f"| harness CPU per DBGorilla unit (1 call, 16 in flight, 1 ms server): 5- minus 1-epoch run | "
            f"{per['median']:.2f} ms per extra unit ({ranged(per, '.2f')}; {whole['median']:.2f} ms over the "
            f"whole 1,575-unit process) | ≤ 3 ms | {verdict(per['median'] <= 3)} | {ranged(c['load'])} |"
        )
    b = results.get("big_run")
    if b:
        lines.append(
            f"| {b['units']:,}-unit DBGorilla run, {b['concurrency']} in flight (200 ms calls) | "
            f"{b['wall_s']:.0f} s wall ({b['run_s']:.0f} s in the run, {b['fraction_of_ideal']:.2f} of ideal), "
            f"peak {b['peak_rss_mib']:.0f} MiB, run directory {b['run_dir_mib']:.0f} MiB in {b['files']:,} files, "
            f"{b['not_completed']} unit(s) not completed "
            f"| < 1 GiB | {verdict(b['peak_rss_mib'] < 1024)} | {b['load']:.1f} |"
        )
    s = results.get("startup")
    if s:
        lines.append(
            f"| `compare --help` | {s['help_s']:.2f} s ({s['help_s'] / s['python_s']:.1f}× a bare "
            f"`python -c pass`, {s['python_s']:.2f} s) | < 0.5 s | {verdict(s['help_s'] < 0.5)} | {s['load']:.1f} |"
        )
        lines.append(
            f"| `compare score`, 2,520 DBGorilla predictions, beyond start-up | {s['score_beyond_startup_s']:.2f} s "
            f"({s['score_s']:.2f} s in all) | < 0.5 s | {verdict(s['score_beyond_startup_s'] < 0.5)} "
            f"| {s['load']:.1f} |"
        )
    m = results.get("local_model")
    if m:
        lines.append(
            f"| embedded model, decode+sample through the suite vs llama-cpp-python directly (same grammar) | "
            f"{m['speed_ratio']:.2f}× its speed ({m['suite_ms_per_token']:.0f} vs {m['direct_ms_per_token']:.0f} "
            f"ms/token over {m['tokens']} tokens, {m['threads']} thread) | ≥ 0.95 "
            f"| {verdict(m['speed_ratio'] >= 0.95)} | {m['load']:.1f} |"
        )
    machine = results["machine"]
    lines += [
        "",
        f"Measured {machine['date']} by `tests/perf/bench.py` on {machine['cores']} cores, {machine['python']}, "
        f"load average {machine['load_before']} before and {machine['load_after']} after ({machine['seconds']:.0f} s); "
        "the load column is the 1-minute load average when each figure was taken. "
        f"{machine['note']}",
    ]
    return "\n".join(lines)


def ranged(measured: dict[str, float], form: str = ".1f") -> str:
    """`2.4–3.1, 3 pairs`: the spread of measurements (their median is shown beside)."""
    pairs = f", {measured['n']} {'pair' if measured['n'] == 1 else 'pairs'}" if "n" in measured else ""
    return f"{measured['low']:{form}}–{measured['high']:{form}}{pairs}"


def write_doc(text: str) -> None:
    document = DOC.read_text(encoding="utf-8")
    pattern = re.compile(re.escape(BEGIN) + ".*?" + re.escape(END), re.S)
    DOC.write_text(pattern.sub(lambda _: f"{BEGIN}\n{text}\n{END}", document), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--serve", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--latency", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="fewer calls, waves and epochs (a smoke run)")
    parser.add_argument("--no-write", action="store_true", help="print the table, leave docs/PERFORMANCE.md")
    parser.add_argument("--skip-local-model", action="store_true")
    parser.add_argument(
        "--model-threads", type=int, default=1, help="llama.cpp threads, both sides (2 stall at random on 2 busy cores)"
    )
    parser.add_argument("--note", default="The machine is shared: other jobs ran beside this one.")
    parser.add_argument("--steps", help="only these steps, comma-separated (e.g. cpu_per_unit,big_run)")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.latency)
        return
    started, load_before = time.perf_counter(), os.getloadavg()
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-") as name:
        folder = Path(name)
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("startup", lambda: startup_and_score(folder, 3 if args.quick else 11)),
            ("overhead", lambda: overhead(200 if args.quick else 2000)),
            ("throughput", lambda: throughput(folder, 2 if args.quick else WAVES, 1 if args.quick else 2)),
            ("executors", lambda: executor_rows(folder, 512 if args.quick else 5000, 1 if args.quick else 2)),
            ("cpu_per_unit", lambda: cpu_per_unit(folder, 1 if args.quick else 4)),
            ("big_run", lambda: big_run(folder, 2 if args.quick else 32, 64)),
        ]
        if not args.skip_local_model:
            steps.append(("local_model", lambda: local_model(1 if args.quick else 3, 64, args.model_threads)))
        if args.steps:
            steps = [(key, step) for key, step in steps if key in args.steps.split(",")]
        for key, step in steps:
            print(f"bench: {key} ...", file=sys.stderr, flush=True)
            results[key] = step()
            print(json.dumps(results[key], indent=1), file=sys.stderr, flush=True)
            shutil.rmtree(folder / "big", ignore_errors=True)
    load_after = os.getloadavg()
    results["machine"] = {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cores": os.cpu_count(),
        "python": f"Python {platform.python_version()}",
        "load_before": f"{load_before[0]:.1f}",
        "load_after": f"{load_after[0]:.1f}",
        "seconds": time.perf_counter() - started,
        "note": args.note,
    }
    text = table(results)
    print(text)
    if not args.no_write:
        write_doc(text)
        print(f"wrote {DOC}", file=sys.stderr)


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)  # 256 in flight: sockets and trace files at once
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(4096, hard)), hard))
    main()
