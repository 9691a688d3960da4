"""`compare view`: serves the runs under a folder on loopback and prints its address; bound elsewhere it needs
the token it prints; a folder that is not there, a bad port or a port taken is exit 2 naming it; Ctrl-C ends it."""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import pytest

from helpers import compare_command


def _serving(*arguments: str) -> tuple[subprocess.Popen[str], str, list[str]]:
    """`compare view ARGUMENTS` running, and the address it printed."""
    process = subprocess.Popen(compare_command("view", *arguments), stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(process.stderr or []), daemon=True).start()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and process.poll() is None:
        for line in list(lines):
            found = re.search(r"viewer: (http://\S+)", line)
            if found:
                return process, found.group(1), lines
        time.sleep(0.05)
    process.kill()
    raise AssertionError("no address printed:\n" + "".join(lines))


def _stopped(process: subprocess.Popen[str]) -> int:
    process.send_signal(signal.SIGINT)
    return process.wait(timeout=20)


def test_it_serves_the_folder_on_loopback_until_ctrl_c(tmp_path: Path) -> None:
    process, address, _ = _serving(str(tmp_path), "--port", "0")
    try:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", address)
        listed = httpx.get(address + "api/runs", timeout=10)
        assert listed.status_code == 200 and listed.json() == {"folders": [str(tmp_path.resolve())], "runs": []}
        assert httpx.post(address + "api/runs", timeout=10).status_code == 405
    finally:
        assert _stopped(process) == 0


def test_bound_elsewhere_it_prints_a_token_that_every_request_needs(tmp_path: Path) -> None:
    process, address, lines = _serving(str(tmp_path), "--host", "0.0.0.0", "--port", "0")
    try:
        found = re.fullmatch(r"http://0\.0\.0\.0:(\d+)/\?token=(\S+)", address)
        assert found, address
        port, token = found.groups()
        assert any("anyone who can reach it and has the token" in line for line in lines)
        base = f"http://127.0.0.1:{port}/"
        assert httpx.get(base + "api/runs", timeout=10).status_code == 401
        with httpx.Client(follow_redirects=True, timeout=10) as browser:
            assert browser.get(base, params={"token": token}).status_code == 200
            assert browser.get(base + "api/runs").status_code == 200  # the cookie carries the token
    finally:
        assert _stopped(process) == 0


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["{missing}"], "no such folder: {missing}"),
        (["{folder}", "--port", "70000"], "--port 70000: a port is 0 to 65535"),
        (["{folder}", "--port", "{taken}"], "127.0.0.1:{taken} is taken"),
    ],
)
def test_what_it_cannot_serve_is_exit_2_naming_it(tmp_path: Path, arguments: list[str], said: str) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        taken = str(holder.getsockname()[1])
        values = {"missing": str(tmp_path / "nope"), "folder": str(tmp_path), "taken": taken}
        given = [argument.format(**values) for argument in arguments]
        done = subprocess.run(compare_command("view", *given), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert said.format(**values) in done.stderr and "Traceback" not in done.stderr
