"""The seccomp filter of the Python sandbox, as the classic-BPF program bubblewrap loads (`--seccomp FD`).

Written here as a handful of BPF instructions, so no libseccomp is needed. It refuses (EPERM)
what lets sandboxed code leave or widen its sandbox, or pin memory its rlimits do not count:
new namespaces (`unshare`, `setns`, namespace flags to `clone`), mounts, `ptrace` and reading
other processes' memory, `bpf`, `perf_event_open`, `userfaultfd`, keyrings, kernel modules and
kexec, `io_uring` (its operations bypass seccomp), file handles, `memfd_create` (its tmpfs pages
escape RLIMIT_AS), and the terminal-injecting `ioctl`s TIOCSTI and TIOCLINUX. `clone3` gets ENOSYS,
as under Docker and Flatpak: its flags sit in memory a filter cannot read, and libc then falls
back to `clone`, whose flags it can. Any other architecture's system calls (the 32-bit ABI
on x86_64, x32) are refused or kill the process. The syscall numbers are those of Linux's
arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h (aarch64).
"""

from __future__ import annotations

import errno
import platform
import struct

# seccomp_data: int nr; u32 arch; u64 instruction_pointer; u64 args[6] (little-endian: low word first)
_NR, _ARCH = 0, 4


def _arg_low(index: int) -> int:
    return 16 + 8 * index


AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000  # x86_64's x32 ABI: the same calls under other numbers
CLONE_NAMESPACES = 0x7E020080  # NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET | NEWTIME
TERMINAL_IOCTLS = (0x5412, 0x541C)  # TIOCSTI (type into the terminal), TIOCLINUX

DENIED = (
    "unshare", "setns", "mount", "umount2", "pivot_root", "open_tree", "move_mount", "fsopen", "fsconfig",
    "fsmount", "fspick", "mount_setattr", "ptrace", "process_vm_readv", "process_vm_writev", "kcmp",
    "pidfd_getfd", "process_madvise", "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key",
    "request_key", "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "name_to_handle_at", "open_by_handle_at",
    "memfd_create", "swapon", "swapoff", "reboot", "acct", "quotactl", "fanotify_init", "lookup_dcookie",
    "personality",
)  # fmt: skip
SYSCALLS = {
    "x86_64": {
        "ioctl": 16, "clone": 56, "ptrace": 101, "personality": 135, "pivot_root": 155, "acct": 163,
        "mount": 165, "umount2": 166, "swapon": 167, "swapoff": 168, "reboot": 169, "init_module": 175,
        "delete_module": 176, "quotactl": 179, "lookup_dcookie": 212, "kexec_load": 246, "add_key": 248,
        "request_key": 249, "keyctl": 250, "unshare": 272, "perf_event_open": 298, "fanotify_init": 300,
        "name_to_handle_at": 303, "open_by_handle_at": 304, "setns": 308, "process_vm_readv": 310,
        "process_vm_writev": 311, "kcmp": 312, "finit_module": 313, "memfd_create": 319,
        "kexec_file_load": 320, "bpf": 321, "userfaultfd": 323,
    },
    "aarch64": {
        "lookup_dcookie": 18, "ioctl": 29, "umount2": 39, "mount": 40, "pivot_root": 41, "quotactl": 60,
        "acct": 89, "personality": 92, "unshare": 97, "kexec_load": 104, "init_module": 105,
        "delete_module": 106, "ptrace": 117, "reboot": 142, "add_key": 217, "request_key": 218,
        "keyctl": 219, "clone": 220, "swapon": 224, "swapoff": 225, "perf_event_open": 241,
        "fanotify_init": 262, "name_to_handle_at": 264, "open_by_handle_at": 265, "setns": 268,
        "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "finit_module": 273,
        "memfd_create": 279, "bpf": 280, "userfaultfd": 282, "kexec_file_load": 294,
    },
}  # fmt: skip
CLONE_THREAD = 0x00010000
# Refused as well where no memory cgroup holds the sandbox (`single_process`); aarch64 has no fork/vfork.
SINGLE_PROCESS_DENIED = {"x86_64": ("fork", "vfork", "shmget"), "aarch64": ("shmget",)}
SINGLE_PROCESS_NUMBERS = {"x86_64": {"fork": 57, "vfork": 58, "shmget": 29}, "aarch64": {"shmget": 194}}
# Numbered alike on every architecture since Linux 5.1.
_COMMON = {
    "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "open_tree": 428,
    "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "clone3": 435,
    "pidfd_getfd": 438, "process_madvise": 440, "mount_setattr": 442,
}  # fmt: skip

# BPF opcodes (linux/filter.h) and seccomp return values (linux/seccomp.h)
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ, _JGE, _JSET = 0x15, 0x35, 0x45  # BPF_JMP | BPF_JEQ/JGE/JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_KILL_PROCESS = 0x80000000


class SeccompUnavailable(RuntimeError):
    """No filter for this machine's architecture."""


def seccomp_program(machine: str | None = None, single_process: bool = False) -> bytes:
    """The filter as bwrap's --seccomp reads it: struct sock_filter entries (u16 code, u8 jt,
    u8 jf, u32 k), native byte order. Raises SeccompUnavailable on an architecture without a table.

    `single_process` (where no memory cgroup can hold the sandbox, tools/sandbox_memory.py) also
    refuses new processes (fork, vfork, clone without CLONE_THREAD) and System V shared memory, so
    RLIMIT_AS of the one process is the sandbox's whole budget."""
    machine = machine or platform.machine()
    if machine not in SYSCALLS:
        raise SeccompUnavailable(f"no seccomp filter for the {machine} architecture (x86_64 and aarch64 have one)")
    numbers = {**SYSCALLS[machine], **_COMMON}
    denied = [*DENIED, *(SINGLE_PROCESS_DENIED[machine] if single_process else ())]
    code: list[tuple[int, int | str, int | str, int]] = [
        (_LD_ABS, 0, 0, _ARCH),
        (_JEQ, 0, "kill", AUDIT_ARCH[machine]),
        (_LD_ABS, 0, 0, _NR),
    ]
    if machine == "x86_64":
        code.append((_JGE, "deny", 0, X32_SYSCALL_BIT))
    code += [(_JEQ, "deny", 0, numbers.get(name, SINGLE_PROCESS_NUMBERS[machine].get(name))) for name in denied]
    code += [
        (_JEQ, "enosys", 0, numbers["clone3"]),
        (_JEQ, "clone", 0, numbers["clone"]),
        (_JEQ, "ioctl", 0, numbers["ioctl"]),
        (_RET, 0, 0, RET_ALLOW),
        ("clone", 0, 0, 0),
        (_LD_ABS, 0, 0, _arg_low(0)),  # clone's flags
        (_JSET, "deny", 0, CLONE_NAMESPACES),
        *([(_JSET, 0, "deny", CLONE_THREAD)] if single_process else []),  # a thread, not a process
        (_RET, 0, 0, RET_ALLOW),
        ("ioctl", 0, 0, 0),
        (_LD_ABS, 0, 0, _arg_low(1)),  # the request
        *[(_JEQ, "deny", 0, request) for request in TERMINAL_IOCTLS],
        (_RET, 0, 0, RET_ALLOW),
        ("deny", 0, 0, 0),
        (_RET, 0, 0, RET_ERRNO | errno.EPERM),
        ("enosys", 0, 0, 0),
        (_RET, 0, 0, RET_ERRNO | errno.ENOSYS),
        ("kill", 0, 0, 0),
        (_RET, 0, 0, RET_KILL_PROCESS),
    ]
    return _assemble(code)


def _assemble(code: list[tuple[int | str, int | str, int | str, int]]) -> bytes:
    """Instructions whose jump targets are label names (a label is an entry whose code is a string)."""
    labels: dict[str, int] = {}
    instructions: list[tuple[int, int | str, int | str, int]] = []
    for op, jt, jf, k in code:
        if isinstance(op, str):
            labels[op] = len(instructions)
        else:
            instructions.append((op, jt, jf, k))

    def offset(target: int | str, at: int) -> int:
        if isinstance(target, int):
            return target
        jump = labels[target] - at - 1
        assert 0 <= jump <= 255, f"jump to {target} out of range"
        return jump

    return b"".join(
        struct.pack("=HBBI", op, offset(jt, at), offset(jf, at), k) for at, (op, jt, jf, k) in enumerate(instructions)
    )
