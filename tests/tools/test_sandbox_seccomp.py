"""The sandbox's seccomp filter and memory accounting, probed from inside: no new namespaces, mounts,
ptrace or memfd; tmpfs mounts bounded inside the memory budget; /proc/1/cmdline without host folders."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import data_agent_compare.tools.python_sandbox as sandbox
from data_agent_compare.tools import ToolError, ToolSettings
from data_agent_compare.tools.python_sandbox import PythonTool, run_sandboxed, sandbox_problem
from data_agent_compare.tools.seccomp import SeccompUnavailable, seccomp_program

needs_bubblewrap = pytest.mark.skipif(sandbox_problem() is not None, reason=f"no sandbox: {sandbox_problem()}")

# Each probe prints "<name> <outcome>": "ok", or the errno's name.
PROBES = r"""
import ctypes, errno, json, os, threading
libc = ctypes.CDLL(None, use_errno=True)
def call(name, *args):
    return "ok" if getattr(libc, name)(*args) >= 0 else errno.errorcode[ctypes.get_errno()]
outcomes = {
    "unshare(CLONE_NEWUSER)": call("unshare", 0x10000000),
    "unshare(CLONE_NEWNET)": call("unshare", 0x40000000),
    "clone(CLONE_NEWUSER)": call("syscall", 56, 0x10000000 | 17, 0, 0, 0, 0),  # 17: SIGCHLD
    "clone3": call("syscall", 435, 0, 0),
    "mount": call("mount", b"none", b"/scratch", b"tmpfs", 0, None),
    "ptrace(TRACEME)": call("ptrace", 0, 0, 0, 0),
    "bpf": call("syscall", 321, 0, 0, 0),
    "userfaultfd": call("syscall", 323, 0),
    "keyctl": call("syscall", 250, 0, 0, 0, 0, 0),
}
try:
    os.memfd_create("filler")
    outcomes["memfd_create"] = "ok"
except OSError as error:
    outcomes["memfd_create"] = errno.errorcode[error.errno]
child = os.fork()
if child == 0:
    os._exit(7)
outcomes["fork"] = "ok" if os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 7 else "failed"
worker = threading.Thread(target=lambda: None)
worker.start()
worker.join()
outcomes["thread"] = "ok"
print(json.dumps(outcomes))
"""


@needs_bubblewrap
def test_namespaces_mounts_ptrace_and_kernel_interfaces_are_refused_while_fork_and_threads_work() -> None:
    run = run_sandboxed(PROBES, timeout_s=30, memory_mb=1024)
    assert run.exit_status == 0, run.stderr
    outcomes = json.loads(run.stdout)
    print(outcomes)
    refused = {name: outcome for name, outcome in outcomes.items() if name not in ("clone3", "fork", "thread")}
    assert refused == dict.fromkeys(refused, "EPERM")
    assert outcomes["clone3"] == "ENOSYS"  # libc falls back to clone, whose flags the filter sees
    assert outcomes["fork"] == outcomes["thread"] == "ok"


@needs_bubblewrap
def test_shared_memory_cannot_be_filled_past_the_memory_budget() -> None:
    # the attack that held 1.44 GB under a 1 GB limit: six 240 MB memfd buffers, then /dev/shm
    code = """
import os
try:
    os.memfd_create("buffer")
    print("memfd created")
except OSError as error:
    print("memfd refused:", error.strerror)
written = 0
try:
    with open("/dev/shm/filler", "wb") as file:
        for _ in range(6 * 240):
            file.write(b"x" * (1 << 20))
            written += 1
except OSError as error:
    print("shm full after", written, "MB:", error.strerror)
"""
    run = run_sandboxed(code, timeout_s=30, memory_mb=1024)
    assert "memfd refused: Operation not permitted" in run.stdout
    scratch, shm = sandbox.tmpfs_sizes(1024)
    assert f"shm full after {shm >> 20} MB: No space left on device" in run.stdout
    assert scratch + shm <= (1024 << 20) // 2  # both inside the budget; RLIMIT_AS is shrunk by them


@needs_bubblewrap
def test_proc_1_cmdline_shows_no_host_folder(tmp_path: Path) -> None:
    data = tmp_path / "task-data"
    data.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    code = "print(open('/proc/1/cmdline', 'rb').read().replace(b'\\0', b' ').decode())"
    run = run_sandboxed(code, timeout_s=30, memory_mb=512, data_dir=data, read_only=[Path(sandbox.__file__).parent])
    assert run.exit_status == 0, run.stderr
    cmdline = run.stdout
    assert re.match(r"(\S*/)?bwrap --args ", cmdline), cmdline  # by path where the cgroup launcher execs it
    assert str(tmp_path) not in cmdline and "--ro-bind" not in cmdline and "--tmpfs" not in cmdline


def test_an_architecture_without_a_filter_refuses_execute_python_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(SeccompUnavailable, match="riscv64"):
        seccomp_program("riscv64")
    monkeypatch.setattr("platform.machine", lambda: "riscv64")
    sandbox_problem.cache_clear()
    try:
        with pytest.raises(ToolError) as refused:
            PythonTool(ToolSettings()).run({"code": "print(1)"})
    finally:
        monkeypatch.undo()
        sandbox_problem.cache_clear()
    assert "execute_python is refused" in str(refused.value)
    assert "no seccomp filter for the riscv64 architecture" in str(refused.value)


@pytest.fixture
def both_architectures() -> Iterator[dict[str, bytes]]:
    yield {machine: seccomp_program(machine) for machine in ("x86_64", "aarch64")}


def test_the_filter_program_is_whole_bpf_instructions_ending_in_returns(both_architectures: dict[str, bytes]) -> None:
    for program in both_architectures.values():
        assert len(program) % 8 == 0 and 10 < len(program) // 8 < 256  # BPF_MAXINSNS is 4096; jumps reach 255
        assert program[-8:-6] == (0x06).to_bytes(2, "little")  # the last instruction returns
    assert both_architectures["x86_64"] != both_architectures["aarch64"]
