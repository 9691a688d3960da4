"""Issue 26, item 4: one memory budget for the whole Python sandbox. Forked children, System V shared
memory and socket buffers all count against python_memory_mb together (a memory cgroup per sandbox);
where no cgroup can be made, forking and shared memory are refused so one process is the budget."""

from __future__ import annotations

import os

import pytest

from data_agent_compare.tools import python_sandbox, sandbox_memory
from data_agent_compare.tools.python_sandbox import run_sandboxed, sandbox_problem
from data_agent_compare.tools.sandbox_memory import memory_mode

BUDGET_MB = 1024
SLACK = 64 << 20  # page tables and the kernel's own bookkeeping beyond the limit

pytestmark = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox: {sandbox_problem()}")

FIVE_FORKED_CHILDREN = """
import os, time
children = []
for _ in range(5):
    pid = os.fork()
    if pid == 0:
        block = bytearray(500 << 20)  # touched: every page is resident
        time.sleep(3)
        os._exit(0)
    children.append(pid)
held = sum(os.waitpid(pid, 0)[1] == 0 for pid in children)
print(held)
"""

SIX_SHARED_SEGMENTS = """
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
libc.shmat.restype = ctypes.c_void_p
made = 0
for _ in range(6):
    segment = libc.shmget(0, 512 << 20, 0o1600)  # IPC_PRIVATE, IPC_CREAT
    if segment < 0:
        print("shmget refused", ctypes.get_errno()); break
    address = libc.shmat(segment, None, 0)
    ctypes.memset(address, 1, 512 << 20)
    made += 1
print("segments", made)
"""

SOCKET_BUFFERS = """
import socket
pairs, queued = [], 0
for _ in range(192):
    a, b = socket.socketpair()
    a.setblocking(False)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 64 << 20)
    try:
        while True:
            queued += a.send(b"x" * 65536)
    except BlockingIOError:
        pass
    pairs.append((a, b))
print("queued MB", queued >> 20)
"""


def run(code: str):
    return run_sandboxed(code, timeout_s=60, memory_mb=BUDGET_MB)


def within_budget(result) -> None:
    if memory_mode() == "single process":
        return
    assert result.memory_peak_bytes is not None
    assert result.memory_peak_bytes <= (BUDGET_MB << 20) + SLACK, result.memory_peak_bytes >> 20


def test_five_forked_children_share_one_budget():
    result = run(FIVE_FORKED_CHILDREN)
    if memory_mode() == "single process":
        assert "os.fork is not allowed" in result.stderr
        return
    assert result.exit_status == 0, result.stderr
    assert int(result.stdout) <= 2  # 5 x 500 MB cannot all be held under 1024 MB
    within_budget(result)


def test_six_512_mb_shared_memory_segments_stay_inside_the_budget():
    result = run(SIX_SHARED_SEGMENTS)
    if memory_mode() == "single process":
        assert "shmget refused" in result.stdout
        return
    assert "segments 6" not in result.stdout, result.stdout
    within_budget(result)


def test_socket_buffers_count_against_the_budget():
    result = run(SOCKET_BUFFERS)
    within_budget(result)
    assert result.memory_peak_bytes is None or result.memory_peak_bytes > 0


def test_the_memory_cgroup_is_removed_after_the_run():
    if memory_mode() == "single process":
        pytest.skip("no memory cgroup here")
    parent = sandbox_memory._parent_cgroup()
    assert parent is not None
    run("print(1)")
    assert not list(parent[1].glob(f"{sandbox_memory.PREFIX}-{os.getpid()}-*"))


def test_the_single_process_budget_refuses_fork_and_shared_memory(monkeypatch):
    monkeypatch.setattr(python_sandbox, "memory_mode", lambda: "single process")
    monkeypatch.setattr(sandbox_memory, "memory_mode", lambda: "single process")
    forked = run("import os\nprint(os.fork())")
    assert "os.fork is not allowed" in forked.stderr
    raw = run("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\nprint(libc.syscall(57), ctypes.get_errno())")
    assert raw.stdout.split() == ["-1", "1"]  # fork(2) itself: EPERM from the seccomp filter
    shm = run(SIX_SHARED_SEGMENTS)
    assert "shmget refused 1" in shm.stdout
    threads = run("import threading\nt = threading.Thread(target=print, args=('thread ok',)); t.start(); t.join()")
    assert threads.stdout == "thread ok\n"


def test_a_sandbox_killed_at_its_budget_says_so():
    if memory_mode() == "single process":
        pytest.skip("no memory cgroup here")
    from data_agent_compare.tools import ToolSettings
    from data_agent_compare.tools.python_sandbox import PythonTool

    result = PythonTool(ToolSettings(python_memory_mb=256)).run({"code": SOCKET_BUFFERS})
    assert not result.success
    assert "killed by SIGKILL (all its processes together reached the 256 MB memory limit)" in result.content


def test_the_manifest_says_which_memory_budget_is_in_force():
    from data_agent_compare.tools import ToolSettings
    from data_agent_compare.tools.python_sandbox import sandbox_memory_budget

    line = sandbox_memory_budget(ToolSettings(python_memory_mb=768))
    assert line is not None and line.startswith("768 MB per sandbox: ")
    assert memory_mode() in line or "one process" in line
