"""Escapes from the Python sandbox (bubblewrap), each tried for real and refused.

Every test runs real processes under the real sandbox; none mocks it. Network, file and process
attempts go through ctypes or _posixsubprocess where the audit hook would otherwise stop them
first, so what is tested is the kernel boundary. Processes are observed from the host: a sandboxed
process renames itself (prctl PR_SET_NAME) with a unique marker and the test looks for that name
in the host's /proc.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from data_agent_compare.core import ToolError, ToolSettings
from data_agent_compare.core.tool import ToolResult
from data_agent_compare.tools.python_sandbox import (
    PROCESS_LIMIT,
    UNSAFE_NOTE,
    PythonTool,
    sandbox_mode,
    sandbox_problem,
)

from helpers import DELIVER_CTRL_C, FIXTURES, ROOT

needs_bubblewrap = pytest.mark.skipif(
    sandbox_problem() is not None, reason=f"bubblewrap cannot run here: {sandbox_problem()}"
)

# Raw libc calls, past the audit hook: what they reach is what the kernel allows.
LIBC = """
import ctypes, os, socket, struct
libc = ctypes.CDLL(None, use_errno=True)

def outcome(result):
    return "ok" if result >= 0 else os.strerror(ctypes.get_errno())

def raw_socket(kind):
    fd = libc.socket(socket.AF_INET, kind, 0)
    print("socket:", outcome(fd))
    return fd

def inet(host, port):
    return struct.pack("=HH4s8x", socket.AF_INET, socket.htons(port), socket.inet_aton(host))
"""

# A child that leaves the session and sleeps, renamed so the host can find it.
SETSID_CHILD = """
import ctypes, os, time
if os.fork() == 0:
    os.setsid()
    ctypes.CDLL(None).prctl(15, {marker!r}.encode(), 0, 0, 0)  # PR_SET_NAME
    time.sleep(300)
    os._exit(0)
print("child started", flush=True)
"""


def run(code: str, data_dir: Path | None = None, **settings: object) -> ToolResult:
    return PythonTool(ToolSettings(**settings), data_dir).run({"code": code})


def new_marker() -> str:
    return f"sbx{uuid.uuid4().hex[:12]}"  # a process name holds 15 characters


def processes_named(name: str) -> list[int]:
    """Host pids whose name is `name`."""
    found = []
    for comm in Path("/proc").glob("[0-9]*/comm"):
        try:
            if comm.read_text().strip() == name:
                found.append(int(comm.parent.name))
        except OSError:  # ended while we looked
            continue
    return found


def wait_until(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


@pytest.fixture
def data_dir(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    root.mkdir(mode=0o755)
    (root / "notes.txt").write_text("hello data\n")
    return root


@pytest.fixture
def host_secret() -> Iterator[str]:
    """A secret in this process's real environment (os.environ sets it with putenv), as an API key is."""
    name, value = "DAC_SANDBOX_TEST_API_KEY", f"sk-secret-{uuid.uuid4().hex}"
    os.environ[name] = value
    try:
        yield value
    finally:
        del os.environ[name]


# ---------------------------------------------------------------- network


@needs_bubblewrap
def test_code_cannot_connect_to_a_tcp_server_on_the_hosts_loopback() -> None:
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.setblocking(False)
        port = server.getsockname()[1]
        code = (
            LIBC
            + f"""
fd = raw_socket(socket.SOCK_STREAM)
address = inet("127.0.0.1", {port})
print("connect:", outcome(libc.connect(fd, address, len(address))))
"""
        )
        result = run(code)
        with pytest.raises(BlockingIOError):  # nothing ever reached the server
            server.accept()
    assert "socket: ok" in result.content  # the hook was bypassed: the kernel refused
    assert "connect: Connection refused" in result.content


@needs_bubblewrap
def test_code_cannot_send_udp_to_the_host_or_out() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as receiver:
        receiver.bind(("127.0.0.1", 0))
        receiver.settimeout(0.5)
        port = receiver.getsockname()[1]
        code = (
            LIBC
            + f"""
fd = raw_socket(socket.SOCK_DGRAM)
for host, port in [("127.0.0.1", {port}), ("8.8.8.8", 53)]:
    address = inet(host, port)
    print("sendto", host, outcome(libc.sendto(fd, b"escaped", 7, 0, address, len(address))))
"""
        )
        result = run(code)
        with pytest.raises(TimeoutError):
            receiver.recvfrom(100)
    assert "socket: ok" in result.content
    assert "sendto 8.8.8.8 Network is unreachable" in result.content  # no route out at all


@needs_bubblewrap
def test_code_can_neither_see_nor_reach_the_hosts_unix_sockets(tmp_path: Path) -> None:
    path, abstract = tmp_path / "service.sock", f"\0dac-sandbox-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX) as on_disk, socket.socket(socket.AF_UNIX) as in_abstract:
        on_disk.bind(str(path))
        in_abstract.bind(abstract)
        for server in (on_disk, in_abstract):
            server.listen()
            server.setblocking(False)
        code = f"""
import os, socket
print("visible:", os.path.exists({str(path)!r}))
for address in [{str(path)!r}, {abstract!r}]:
    try:
        socket.socket(socket.AF_UNIX).connect(address)
        print("connected")
    except OSError as error:
        print("refused:", type(error).__name__)
"""
        result = run(code)
        for server in (on_disk, in_abstract):
            with pytest.raises(BlockingIOError):
                server.accept()
    assert result.success, result.content
    assert "visible: False" in result.content and "connected" not in result.content
    assert "refused: FileNotFoundError" in result.content and "refused: ConnectionRefusedError" in result.content


# ---------------------------------------------------------------- files


@needs_bubblewrap
def test_code_sees_no_system_accounts_no_project_files_and_cannot_import_the_suite(data_dir: Path) -> None:
    gold = ROOT / "tasks" / "bundled" / "tasks.jsonl"
    ground_truth = FIXTURES / "dab" / "query_bookreview" / "query1" / "ground_truth.csv"
    assert gold.is_file() and ground_truth.is_file()  # they exist on the host
    code = f"""
import importlib.util, os
for path in ["/etc/passwd", {str(gold)!r}, {str(ground_truth)!r}, {str(ROOT / "README.md")!r}]:
    print(path, "exists" if os.path.exists(path) else "missing")
print("checkout:", sorted(os.listdir({str(ROOT)!r})))
print("suite importable:", importlib.util.find_spec("data_agent_compare") is not None)
print("data:", os.listdir(os.environ["DATA_DIR"]))
"""
    result = run(code, data_dir)
    assert result.success, result.content
    assert "exists" not in result.content
    assert "checkout: ['.venv']" in result.content  # only the interpreter and site-packages of it
    assert "suite importable: False" in result.content
    assert "data: ['notes.txt']" in result.content
    failed = run("import data_agent_compare")
    assert not failed.success and "No module named 'data_agent_compare'" in failed.content


@needs_bubblewrap
def test_code_writes_only_in_its_scratch_folder(data_dir: Path) -> None:
    before = sorted(data_dir.iterdir())
    code = f"""
import os
targets = [os.path.join(os.environ["DATA_DIR"], "notes.txt"), os.path.join(os.environ["DATA_DIR"], "new.txt"),
           "/usr/new.txt", "/tmp/new.txt", "/new.txt", {str(ROOT / "new.txt")!r}]
for path in targets:
    try:
        with open(path, "w") as file:
            file.write("overwritten")
        print("WROTE", path)
    except OSError as error:
        print("refused", path, error.strerror)
with open("mine.txt", "w") as file:
    file.write("kept")
print("scratch:", os.getcwd(), open("mine.txt").read())
"""
    result = run(code, data_dir)
    assert result.success, result.content
    assert "WROTE" not in result.content and result.content.count("refused") == 6
    assert "scratch: /scratch kept" in result.content
    assert sorted(data_dir.iterdir()) == before and (data_dir / "notes.txt").read_text() == "hello data\n"
    assert not (ROOT / "new.txt").exists()


@needs_bubblewrap
def test_scratch_folder_is_size_limited() -> None:
    code = """
chunk = b"x" * (1 << 20)
for name in ("a.bin", "b.bin"):
    try:
        with open(name, "wb") as file:
            for _ in range(200):
                file.write(chunk)
        print("wrote", name)
    except OSError as error:
        print("full at", name, error.strerror)
"""
    result = run(code)
    assert "wrote a.bin" in result.content and "full at b.bin No space left on device" in result.content


@needs_bubblewrap
def test_programs_started_past_the_audit_hook_have_no_effect_outside(tmp_path: Path, data_dir: Path) -> None:
    targets = [tmp_path / "escaped-by-fork-exec", data_dir / "escaped-by-fork-exec"]
    targets += [tmp_path / "escaped-by-system", data_dir / "escaped-by-system"]
    inside = [str(targets[0]), "/data/escaped-by-fork-exec", str(targets[2]), "/data/escaped-by-system"]
    code = f"""
import _posixsubprocess, ctypes, os
script = "echo fork_exec ran; touch {inside[0]} {inside[1]}"
errors_read, errors_write = os.pipe()
# Python 3.11's signature; subprocess would raise the audit event this call skips
pid = _posixsubprocess.fork_exec(
    [b"/bin/sh", b"-c", script.encode()], [b"/bin/sh"], True, (), None, None,
    -1, -1, -1, -1, -1, -1, errors_read, errors_write, False, False, -1, None, None, None, -1, None, False)
os.close(errors_write)
os.waitpid(pid, 0)
ctypes.CDLL(None).system(b"echo system ran; touch {inside[2]} {inside[3]}")
"""
    result = run(code, data_dir)
    assert "fork_exec ran" in result.content and "system ran" in result.content  # both programs did run...
    assert not [target for target in targets if target.exists()]  # ...with no effect outside


# ---------------------------------------------------------------- processes


@needs_bubblewrap
def test_a_fork_loop_hits_the_process_limit_and_leaves_nothing_behind() -> None:
    marker = new_marker()
    code = f"""
import ctypes, os, time
children = 0
try:
    for _ in range(400):
        if os.fork() == 0:
            ctypes.CDLL(None).prctl(15, {marker!r}.encode(), 0, 0, 0)
            time.sleep(60)
            os._exit(0)
        children += 1
except OSError as error:
    print(f"stopped after {{children}} forks: {{type(error).__name__}}")
"""
    result = run(code)
    assert "forks: BlockingIOError" in result.content, result.content
    forks = int(result.content.split("stopped after ")[1].split()[0])
    assert 0 < forks < PROCESS_LIMIT
    assert processes_named(marker) == []


@needs_bubblewrap
@pytest.mark.parametrize(
    ("ending", "settings"),
    [("import time\ntime.sleep(2)", {}), ("while True:\n    pass", {"python_timeout_s": 2})],
    ids=["program-ends", "program-times-out"],
)
def test_a_child_that_left_the_session_is_gone_when_the_call_returns(ending: str, settings: dict) -> None:
    marker = new_marker()
    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(run, SETSID_CHILD.format(marker=marker) + ending, **settings)
        assert wait_until(lambda: bool(processes_named(marker)), 10)  # the host sees it while it runs
        result = call.result()
    assert "child started" in result.content
    assert processes_named(marker) == []


@needs_bubblewrap
@pytest.mark.parametrize("interruption", [signal.SIGKILL, signal.SIGINT], ids=["parent-killed", "ctrl-c"])
def test_nothing_of_the_sandbox_outlives_its_caller(interruption: signal.Signals) -> None:
    marker = new_marker()
    code = SETSID_CHILD.format(marker=marker) + "import time\ntime.sleep(120)"
    caller_script = (
        DELIVER_CTRL_C + "from data_agent_compare.core import ToolSettings\n"
        "from data_agent_compare.tools.python_sandbox import PythonTool\n"
        f"PythonTool(ToolSettings(python_timeout_s=120)).run({{'code': {code!r}}})\n"
    )
    leftovers = set(Path(tempfile.gettempdir()).glob("sandbox-*"))
    caller = subprocess.Popen([sys.executable, "-c", caller_script], start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: bool(processes_named(marker)), 20)
        caller.send_signal(interruption)
        caller.wait(timeout=10)
    finally:
        caller.kill()
        caller.wait()
    if interruption == signal.SIGINT:  # the caller tore the sandbox down before exiting
        assert processes_named(marker) == []
    assert wait_until(lambda: not processes_named(marker), 5)  # killed: --die-with-parent
    assert set(Path(tempfile.gettempdir()).glob("sandbox-*")) == leftovers  # no scratch folder left


@needs_bubblewrap
def test_a_huge_allocation_fails_with_memory_error() -> None:
    result = run("block = bytearray(10 << 30)\nprint('allocated')")
    assert not result.success and "MemoryError" in result.content and "allocated\n" not in result.content


@needs_bubblewrap
def test_an_infinite_loop_is_killed_at_the_timeout() -> None:
    start = time.perf_counter()
    result = run("while True:\n    pass", python_timeout_s=2)
    assert not result.success and result.data["timed_out"] and "timed out after 2s" in result.content
    assert time.perf_counter() - start < 4


# ---------------------------------------------------------------- environment


@needs_bubblewrap
def test_code_cannot_read_the_callers_secrets(host_secret: str) -> None:
    code = f"""
import glob, os
print(dict(os.environ))
for path in ["/proc/self/environ", "/proc/1/environ", f"/proc/{{os.getppid()}}/environ",
             "/proc/{os.getpid()}/environ", *glob.glob("/proc/[0-9]*/environ")]:
    try:
        print(path, open(path, "rb").read().decode(errors="replace"))
    except OSError as error:
        print(path, error.strerror)
"""
    result = run(code)
    assert result.success and "HOME=/scratch" in result.content  # reading environ works...
    assert host_secret not in result.content and host_secret not in str(result.data)  # ...but holds no secret
    assert "'LANG': 'C.UTF-8'" in result.content and "DAC_SANDBOX_TEST_API_KEY" not in result.content


@needs_bubblewrap
def test_numpy_from_the_virtualenv_works_in_the_sandbox() -> None:
    result = run("import numpy\nprint(numpy.linalg.inv(numpy.eye(3) * 2).sum())")
    assert result.success and result.content.startswith("1.5\n") and result.data["sandbox"] == "bubblewrap"


# ---------------------------------------------------------------- without bubblewrap


@pytest.fixture
def without_bubblewrap(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    monkeypatch.setenv("PATH", str(tmp_path))  # a PATH without bwrap: the probe finds none
    sandbox_problem.cache_clear()
    yield
    sandbox_problem.cache_clear()  # probed again, with the real PATH, by the next test


def test_without_bubblewrap_execute_python_refuses_and_says_how_to_fix_it(without_bubblewrap: None) -> None:
    assert "bubblewrap (bwrap) is not installed" in (sandbox_problem() or "")
    assert sandbox_mode(ToolSettings()) == "unavailable"
    with pytest.raises(ToolError) as refused:
        run("print(6 * 7)")
    message = str(refused.value)
    assert "apt-get install bubblewrap" in message and "--unsafe-python" in message


def test_without_bubblewrap_unsafe_python_runs_unsandboxed_and_says_so(without_bubblewrap: None) -> None:
    settings = ToolSettings(unsafe_python=True)
    assert sandbox_mode(settings) == "unsafe"
    result = PythonTool(settings).run({"code": "print(6 * 7)"})
    assert result.success and result.content.startswith("42\n") and UNSAFE_NOTE in result.content
    assert result.data["sandbox"] == "unsafe"


@needs_bubblewrap
def test_unsafe_python_never_switches_a_working_sandbox_off() -> None:
    settings = ToolSettings(unsafe_python=True)
    assert sandbox_mode(settings) == "bubblewrap"
    assert PythonTool(settings).run({"code": "print(1)"}).data["sandbox"] == "bubblewrap"
