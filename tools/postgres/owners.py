"""Who owns a cluster folder or a per-run reader role (host, pid, process start time), and
whether that owner is gone, so that a later run reaps what an earlier one left behind."""

from __future__ import annotations

import os
import socket
from pathlib import Path


def owner_tag(pid: int | None = None) -> str:
    """Who owns a cluster or reader: host, pid and the process's start time (pids are reused)."""
    pid = os.getpid() if pid is None else pid
    return f"{socket.gethostname()} {pid} {_process_start(pid)}"


def owner_alive(tag: str) -> bool:
    """False only when the tag names a process of this host that is gone."""
    host, _, rest = tag.strip().partition(" ")
    pid, _, start = rest.partition(" ")
    if host != socket.gethostname() or not pid.isdigit():
        return True  # another machine's (or unreadable): not ours to judge
    return _process_start(int(pid)) == start


def _process_start(pid: int) -> str:
    try:  # field 22 of /proc/PID/stat, counted after the command name's closing parenthesis
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[19]
    except (OSError, IndexError):
        return "gone"
