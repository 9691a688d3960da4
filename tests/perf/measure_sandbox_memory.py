"""The Python sandbox's start-up cost with its memory cgroup against without (issue 26, item 4), in one run:
`print(1)` sandboxes alternated, the cgroup switched off for every other one; median wall time of each and
their ratio. Usage: python tests/perf/measure_sandbox_memory.py [runs per arm, default 15]"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time

from data_agent_compare.tools import python_sandbox
from data_agent_compare.tools.python_sandbox import run_sandboxed, sandbox_problem
from data_agent_compare.tools.sandbox_memory import memory_mode


def timed(with_cgroup: bool) -> float:
    original = python_sandbox.sandbox_cgroup
    if not with_cgroup:
        python_sandbox.sandbox_cgroup = lambda budget: contextlib.nullcontext(None)  # type: ignore[assignment]
    try:
        start = time.monotonic()
        run = run_sandboxed("print(1)", timeout_s=30, memory_mb=1024)
        elapsed = time.monotonic() - start
    finally:
        python_sandbox.sandbox_cgroup = original
    assert run.stdout == "1\n", run.stderr
    return elapsed


def main(runs: int) -> None:
    assert sandbox_problem() is None, sandbox_problem()
    timed(True)  # warm: the probe and the page cache
    arms: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(runs):
        for arm in (True, False):
            arms[arm].append(timed(arm))
    with_cgroup, without = statistics.median(arms[True]), statistics.median(arms[False])
    print(f"memory budget: {memory_mode()}; {runs} runs each, medians")
    ratio = with_cgroup / without
    print(f"with the cgroup {with_cgroup * 1000:.1f} ms, without {without * 1000:.1f} ms, ratio {ratio:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
