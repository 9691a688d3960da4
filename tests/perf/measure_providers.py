"""Harness overhead per model call of the HTTP providers, against a local OpenAI-compatible server.

    .venv/bin/python tests/perf/measure_providers.py [--calls 300]

Each call goes through `MeteredModel.generate` (budget check, retry policy, timing, pricing, trace)
to the provider (`openai-compatible` on httpx; `openrouter` on the official SDK), and is compared
with the same request sent by a plain httpx client, interleaved call by call so that the machine's
noise falls on all three alike. The server answers at once (TCP_NODELAY, backlog 256); it runs in
this process, so its own work shares the GIL with all three ways alike, and wall times are noisy on a
shared machine: the calling thread's CPU time per call is the steadier measure of our own work.
Reported: median and p99 per call, and the medians over plain httpx. Providers are prepared first
(`ModelProvider.prepare`), as the runner does before any task's clock.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' helpers

from data_agent_compare.core import Budgets, MeteredModel, ModelConfig, ModelProvider, Trace, TraceRecorder
from data_agent_compare.providers.openai_http import OpenAIHTTPProvider
from data_agent_compare.providers.openrouter import OpenRouterProvider

from helpers import KEY, QUESTION, FakeOpenAIServer, text_response


def metered_call(provider: ModelProvider, config: ModelConfig) -> Callable[[], object]:
    """One call of a fresh task run (a trace of one step, as a task's first call)."""
    provider.prepare(config)

    def call() -> object:
        recorder = TraceRecorder(Trace(task_id="t", system="s", model=config.alias), Budgets())
        return MeteredModel(config, provider, recorder, system="s").generate(QUESTION)

    return call


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    calls = parser.parse_args().calls
    os.environ.setdefault("OPENROUTER_API_KEY", KEY)
    with FakeOpenAIServer(default=text_response("ok")) as server:
        plain = httpx.Client()
        body = {"model": "m", "messages": [{"role": m.role, "content": m.content} for m in QUESTION]}
        compatible = ModelConfig(alias="m", provider="openai-compatible", model_id="m", base_url=server.base_url)
        openrouter = compatible.model_copy(update={"provider": "openrouter"})
        ways: dict[str, Callable[[], object]] = {
            "plain httpx": lambda: plain.post(f"{server.base_url}/chat/completions", json=body).json(),
            "openai-compatible": metered_call(OpenAIHTTPProvider(), compatible),
            "openrouter (SDK)": metered_call(OpenRouterProvider(), openrouter),
        }
        seconds: dict[str, list[float]] = {name: [] for name in ways}
        cpu: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(calls):
            for name, call in ways.items():
                start, start_cpu = time.perf_counter(), time.thread_time()
                call()
                cpu[name].append(time.thread_time() - start_cpu)  # the calling thread's own work
                seconds[name].append(time.perf_counter() - start)
    base, base_cpu = statistics.median(seconds["plain httpx"]), statistics.median(cpu["plain httpx"])
    print(f"{calls} calls each; CPU = the calling thread's CPU time (the server's work is not in it)")
    print("| way | median ms | p99 ms | over plain httpx, ms | CPU median ms | CPU over plain httpx, ms |")
    print("|---|---|---|---|---|---|")
    for name, values in seconds.items():
        values.sort()
        median, p99 = statistics.median(values), values[int(0.99 * (len(values) - 1))]
        used = statistics.median(cpu[name])
        print(
            f"| {name} | {median * 1e3:.2f} | {p99 * 1e3:.2f} | {(median - base) * 1e3:+.2f} | "
            f"{used * 1e3:.2f} | {(used - base_cpu) * 1e3:+.2f} |"
        )


if __name__ == "__main__":
    main()
