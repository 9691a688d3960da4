"""setup.sh never goes quiet: while it waits for one slow job it says every TICK_S seconds (20 in a real set-up)
what each running job is doing, and another job's end is said when it ends, not when the set-up gets round to
waiting for it; a job that fails stops the set-up with the end of its log. Checked on the script's own loop
with fake jobs (sleeps), the tick shortened to 2 s."""

from __future__ import annotations

import itertools
import re
import subprocess
import time
from pathlib import Path

from helpers import ROOT

SCRIPT = ROOT / "setup.sh"


def run_jobs(tmp_path: Path, body: str) -> tuple[int, list[tuple[float, str]]]:
    """Run `body` after setup.sh's functions (tick 2 s); each line of output with when it came (s)."""
    script = f'set -euo pipefail\nSETUP_FUNCTIONS_ONLY=1 SETUP_TICK_S=2 source "{SCRIPT}"\ncd "{tmp_path}"\n{body}\n'
    started = time.monotonic()
    process = subprocess.Popen(["bash", "-c", script], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = [(time.monotonic() - started, line.rstrip("\n")) for line in process.stdout or []]
    return process.wait(timeout=60), lines


def test_a_real_set_up_says_something_every_20_seconds() -> None:
    assert "TICK_S=${SETUP_TICK_S:-20}" in SCRIPT.read_text()


def test_a_slow_job_gets_a_line_every_tick_and_another_jobs_end_is_said_when_it_ends(tmp_path: Path) -> None:
    code, lines = run_jobs(
        tmp_path,
        'start_job slow slow.log bash -c "echo warming; sleep 7"\n'
        'start_job quick quick.log bash -c "echo fetched; sleep 3"\n'
        "wait_for slow\nwait_for quick",  # the quick one already ended, and was said: waiting for it is a no-op
    )
    assert code == 0, lines
    said = [text for _, text in lines]
    times = [at for at, _ in lines]
    assert max(later - earlier for earlier, later in itertools.pairwise(times)) < 3.5, lines
    running = [text for text in said if "running:" in text]
    assert len(running) >= 2 and "slow: warming" in running[0]
    quick_done = next(at for at, text in lines if text.endswith("done: quick"))
    assert 2.5 < quick_done < 5.5, lines  # at its end (3 s), not after the slow job's (7 s)
    assert (
        said[-1].endswith("done: slow")
        and sum(text.endswith("done: quick") for text in said) == 1
        and re.match(r"setup: \[0m0\ds\] started: slow", said[0])
    )


def test_a_failing_job_stops_the_set_up_with_the_end_of_its_log(tmp_path: Path) -> None:
    code, lines = run_jobs(
        tmp_path,
        'start_job broken broken.log bash -c "echo the reason; exit 3"\n'
        "start_job slow slow.log sleep 30\n"
        "wait_for slow\necho never",
    )
    said = "\n".join(text for _, text in lines)
    assert code == 1 and "broken failed; the end of broken.log" in said and "the reason" in said
    assert "never" not in said and lines[-1][0] < 10
