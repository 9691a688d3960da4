"""The suite beside Inspect AI on the same local server, paired: one model call per unit, replies after 200 ms,
N units at a time (default 64), two sizes so that each side's start-up cancels out of its CPU per unit.

    python -m venv /tmp/inspect-venv && /tmp/inspect-venv/bin/pip install inspect-ai openai
    .venv/bin/python tests/perf/measure_inspect.py [--inspect-python /tmp/inspect-venv/bin/python] [--in-flight 64]

The suite runs `compare` on DBGorilla queries (tool_use, the reply's tool call is the unit's prediction, scored);
Inspect runs a task of as many samples, `generate(tool_calls="none")` then `includes()`, with `max_connections`
and `max_samples` set to the same number in flight, twice: with its defaults, and with `log_realtime=False`
(its log written once at the end rather than as samples finish: its fastest setting, the fairest to it).
Inspect lives in its own virtual environment: its dependencies are not the suite's. Each side's process is
timed whole (wall and CPU of the child), against the server of `bench.py` (its own process)."""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # the fake server and the replicated queries of the benchmark script beside this one

INSPECT_TASK = textwrap.dedent(
    """
    import sys
    from inspect_ai import Task, eval as inspect_eval
    from inspect_ai.dataset import Sample
    from inspect_ai.scorer import includes
    from inspect_ai.solver import generate

    n, in_flight, log_dir, realtime = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4] == "realtime"
    samples = [Sample(input=f"Which restaurants are open now? ({i})", target="Restaurants") for i in range(n)]
    task = Task(dataset=samples, solver=generate(tool_calls="none"), scorer=includes())
    logs = inspect_eval(task, model="openai/fake", max_connections=in_flight, max_samples=in_flight,
                        log_dir=log_dir, display="none", model_args={"responses_api": False},
                        log_realtime=realtime)
    done = sum(1 for sample in (logs[0].samples or []) if not sample.error)
    if logs[0].status != "success" or done != n:
        sys.exit(f"inspect: {logs[0].status}, {done} of {n} samples")
    """
)
PROBE = (
    "import resource, subprocess, sys; done = subprocess.run(sys.argv[1:], capture_output=True, text=True);"
    " sys.stderr.write(done.stderr[-2000:]); u = resource.getrusage(resource.RUSAGE_CHILDREN);"
    " print(done.returncode, u.ru_utime + u.ru_stime)"
)


def timed_child(command: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall and CPU seconds of `command` in a child process; raises when it fails."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, *command], capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - start
    code, cpu = done.stdout.split()[-2:]
    if code != "0":
        raise RuntimeError(f"{command[0]} failed: {done.stderr[-2000:]}")
    return wall, float(cpu)


def suite(base_url: str, folder: Path, units: int, in_flight: int) -> tuple[float, float]:
    queries = bench.replicated_queries(folder, units)
    flags = ["--workflows", "tool_use", "--models", "openai-compatible:fake", "--base-url", base_url]
    flags += ["--benchmark", "dbgorilla", "--tasks-path", str(queries), "--concurrency", str(in_flight)]
    flags += ["--out", str(folder / f"suite-{units}")]
    return timed_child([*bench.compare_command(), *flags], dict(os.environ), folder)


def inspect(
    python: str, base_url: str, folder: Path, units: int, in_flight: int, realtime: bool = True
) -> tuple[float, float]:
    env = {**os.environ, "OPENAI_API_KEY": "sk-fake", "OPENAI_BASE_URL": base_url}
    logs = folder / f"inspect-{units}-{'realtime' if realtime else 'at-end'}"
    how = "realtime" if realtime else "at-end"
    return timed_child([python, "-c", INSPECT_TASK, str(units), str(in_flight), str(logs), how], env, folder)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--inspect-python", default="/tmp/inspect-venv/bin/python")
    parser.add_argument("--in-flight", type=int, default=64)
    parser.add_argument("--units", type=int, default=1024, help="the smaller run; the larger has twice as many")
    args = parser.parse_args()
    small, large = args.units, 2 * args.units
    found: dict[str, dict[int, tuple[float, float]]] = {"suite": {}, "inspect": {}, "inspect log_realtime=False": {}}
    with tempfile.TemporaryDirectory(prefix="vs-inspect-") as name, bench.fake_server(bench.LATENCY_S) as base_url:
        folder = Path(name)
        for units in (small, large):  # paired: the two sides one after the other at each size
            found["suite"][units] = suite(base_url, folder, units, args.in_flight)
            found["inspect"][units] = inspect(args.inspect_python, base_url, folder, units, args.in_flight)
            found["inspect log_realtime=False"][units] = inspect(
                args.inspect_python, base_url, folder, units, args.in_flight, realtime=False
            )
            print(f"{units} units: {found}, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
    ideal = args.in_flight / bench.LATENCY_S
    rates = {}
    for side, runs in found.items():
        wall, cpu = runs[large]
        extra_cpu_ms = 1e3 * (cpu - runs[small][1]) / (large - small)
        rates[side] = large / wall
        print(
            f"{side}: {large} units at {args.in_flight} in flight in {wall:.1f} s = {rates[side]:.0f} units/s "
            f"({rates[side] / ideal:.2f} of ideal, start-up included); CPU {1e3 * cpu / large:.1f} ms per unit "
            f"whole-process, {extra_cpu_ms:.1f} ms per extra unit"
        )
    fastest = rates["inspect log_realtime=False"]
    print(
        f"suite / Inspect throughput: {rates['suite'] / rates['inspect']:.1f}× its defaults, "
        f"{rates['suite'] / fastest:.1f}× with log_realtime=False; load {os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(4096, hard)), hard))
    main()
