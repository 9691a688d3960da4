"""The seccomp filter as the kernel runs it, for every call it means to refuse: each name numbered by
libseccomp (the system's own table, not ours), and the filter program evaluated instruction by instruction
for that number. A call dropped from the filter, or numbered wrong, fails here even where the sandbox probes
(tests/tools/test_sandbox_seccomp.py) cannot tell a refusal from a missing privilege."""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import platform
import struct

import pytest

from data_agent_compare.tools import seccomp

MACHINE = platform.machine()
pytestmark = pytest.mark.skipif(MACHINE not in seccomp.SYSCALLS, reason=f"no filter for {MACHINE}")


# What the sandbox must refuse (docs/security.md), held here apart from the filter's own list: a name dropped
# from `seccomp.DENIED` is caught, not silently no longer checked.
MUST_REFUSE = {
    "unshare", "setns", "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "pidfd_getfd", "process_madvise", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key",
    "request_key", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "name_to_handle_at", "open_by_handle_at",
    "memfd_create", "swapon", "swapoff", "reboot", "acct", "quotactl", "fanotify_init", "lookup_dcookie",
    "personality",
}  # fmt: skip


def libseccomp_number(name: str) -> int:
    library = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    resolve = ctypes.CDLL(library).seccomp_syscall_resolve_name
    resolve.argtypes, resolve.restype = [ctypes.c_char_p], ctypes.c_int
    number = resolve(name.encode())
    assert number >= 0, f"libseccomp does not know the system call {name!r}"
    return number


def verdict(program: bytes, number: int, args: tuple[int, ...] = ()) -> int:
    """What the filter returns for system call `number` on this machine (classic BPF, the ops it uses)."""
    words = [*args, *[0] * (6 - len(args))]
    data = struct.pack("=iIQ6Q", number, seccomp.AUDIT_ARCH[MACHINE], 0, *words)
    code = [struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    accumulator, at = 0, 0
    while True:
        op, jt, jf, k = code[at]
        if op == 0x20:  # BPF_LD | BPF_W | BPF_ABS
            accumulator = struct.unpack_from("=I", data, k)[0]
        elif op == 0x06:  # BPF_RET | BPF_K
            return k
        elif op in (0x15, 0x35, 0x45):  # JEQ, JGE, JSET
            taken = {0x15: accumulator == k, 0x35: accumulator >= k, 0x45: bool(accumulator & k)}[op]
            at += jt if taken else jf
        else:
            raise AssertionError(f"instruction {op:#x} at {at}: not one the filter is known to use")
        at += 1


def test_every_refused_call_is_numbered_as_libseccomp_numbers_it() -> None:
    ours = {**seccomp.SYSCALLS[MACHINE], **seccomp._COMMON}
    for name in seccomp.DENIED:
        assert ours[name] == libseccomp_number(name), name


def test_the_filter_refuses_every_call_it_lists_and_lets_ordinary_calls_through() -> None:
    program = seccomp.seccomp_program()
    refused = seccomp.RET_ERRNO | errno.EPERM
    for name in sorted(MUST_REFUSE | set(seccomp.DENIED)):
        assert verdict(program, libseccomp_number(name)) == refused, f"{name} is let through"
    for name in ("read", "write", "openat", "mmap", "exit_group", "getpid"):
        assert verdict(program, libseccomp_number(name)) == seccomp.RET_ALLOW, name
    clone = libseccomp_number("clone")
    assert verdict(program, clone, (0x10000000 | 17,)) == refused  # CLONE_NEWUSER
    assert verdict(program, clone, (17,)) == seccomp.RET_ALLOW  # a plain fork
    assert verdict(program, libseccomp_number("ioctl"), (0, 0x5412)) == refused  # TIOCSTI
    assert verdict(program, libseccomp_number("clone3")) == seccomp.RET_ERRNO | errno.ENOSYS


def test_a_single_process_sandbox_also_refuses_new_processes() -> None:
    program = seccomp.seccomp_program(single_process=True)
    for name in seccomp.SINGLE_PROCESS_DENIED[MACHINE]:
        assert verdict(program, libseccomp_number(name)) == seccomp.RET_ERRNO | errno.EPERM, name
