"""A seccomp filter that keeps sandboxed commands from making setuid or setgid files.

A ``nosuid`` mount only stops a setuid file from running *inside* the sandbox; the bit stays
on the file, and the file runs with its owner's rights the next time someone starts it
outside. The filter refuses the bit where it is set: ``chmod``, ``fchmod``, ``fchmodat`` and
``fchmodat2`` with a mode holding ``S_ISUID`` or ``S_ISGID`` (06000), and ``open``,
``openat``, ``creat``, ``mknod`` and ``mknodat`` creating a file with such a mode, fail with
``EPERM`` (on files and folders alike). ``openat2`` (its mode sits in a struct the filter
cannot read) and io_uring (whose operations bypass seccomp) fail with ``ENOSYS``; glibc then
falls back to ``openat``. System calls of another ABI (32-bit ``int 0x80``, x32) fail with
``ENOSYS`` too, so the numbers checked are the only way in.

The program is classic BPF, built once per process for the machine's architecture (x86_64
or aarch64; another architecture gets no filter: :func:`setuid_filter` raises).
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import platform
import struct

__all__ = ["SECCOMP_ARCHITECTURES", "setuid_filter", "setuid_filter_fd", "setuid_filter_path"]

_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
SECCOMP_ARCHITECTURES = tuple(sorted(_AUDIT_ARCH))
"""The machines (``platform.machine()``) the setuid filter is built for."""
_MACHINE_ALIASES = {"amd64": "x86_64", "arm64": "aarch64"}

# name: (number, index of the mode argument, index of the flags argument or None)
_CHECKED: dict[str, dict[str, tuple[int, int, int | None]]] = {
    # arch/x86/entry/syscalls/syscall_64.tbl
    "x86_64": {
        "open": (2, 2, 1),
        "creat": (85, 1, None),
        "chmod": (90, 1, None),
        "fchmod": (91, 1, None),
        "mknod": (133, 1, None),
        "openat": (257, 3, 2),
        "mknodat": (259, 2, None),
        "fchmodat": (268, 2, None),
        "fchmodat2": (452, 2, None),
    },
    # include/uapi/asm-generic/unistd.h (aarch64 has no open, creat, chmod or mknod)
    "aarch64": {
        "mknodat": (33, 2, None),
        "fchmod": (52, 1, None),
        "fchmodat": (53, 2, None),
        "openat": (56, 3, 2),
        "fchmodat2": (452, 2, None),
    },
}
# io_uring_setup, io_uring_enter, io_uring_register, openat2: the same on both.
_REFUSED = (425, 426, 427, 437)
_X32_SYSCALL_BIT = 0x40000000

_O_CREAT = 0o100
_O_TMPFILE = 0o20000000  # without O_DIRECTORY: the bit the kernel tests
_SETID_BITS = 0o6000
_EPERM = 1
_ENOSYS = 38

_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6];
_NR = 0
_ARCH = 4


def _arg(index: int) -> int:
    return 16 + 8 * index  # the low 32 bits (little-endian): a mode and the flags fit there


class _Program:
    """Classic BPF with named jump targets, resolved when assembled."""

    def __init__(self) -> None:
        self.lines: list[tuple[int, str | int, str | int, int]] = []
        self.labels: dict[str, int] = {}

    def label(self, name: str) -> None:
        self.labels[name] = len(self.lines)

    def op(self, code: int, k: int, jt: str | int = 0, jf: str | int = 0) -> None:
        self.lines.append((code, jt, jf, k))

    def assemble(self) -> bytes:
        out = bytearray()
        for index, (code, jt, jf, k) in enumerate(self.lines):
            jumps = []
            for target in (jt, jf):
                offset = target if isinstance(target, int) else self.labels[target] - index - 1
                if not 0 <= offset <= 255:
                    raise ValueError(f"jump out of range at {index}")
                jumps.append(offset)
            out += struct.pack("<HBBI", code, jumps[0], jumps[1], k)
        return bytes(out)


def _machine(machine: str | None) -> str:
    name = (machine or platform.machine()).lower()
    return _MACHINE_ALIASES.get(name, name)


@functools.lru_cache(maxsize=4)
def setuid_filter(machine: str | None = None) -> bytes:
    """The filter's BPF program (``struct sock_filter[]``) for ``machine`` (default: this one).

    Raises:
        ValueError: no filter is written for that architecture.
    """
    name = _machine(machine)
    if name not in _AUDIT_ARCH:
        raise ValueError(
            f"no setuid filter for the {name!r} architecture "
            f"(supported: {', '.join(SECCOMP_ARCHITECTURES)})"
        )
    checked = _CHECKED[name]
    p = _Program()
    p.op(_LD_ABS, _ARCH)
    p.op(_JEQ, _AUDIT_ARCH[name], 0, "nosys")
    p.op(_LD_ABS, _NR)
    if name == "x86_64":
        p.op(_JGE, _X32_SYSCALL_BIT, "nosys", 0)
    for number in _REFUSED:
        p.op(_JEQ, number, "nosys", 0)
    for call, (number, _, _) in checked.items():
        p.op(_JEQ, number, call, 0)
    p.op(_RET, _RET_ALLOW)
    for call, (_, mode, flags) in checked.items():
        p.label(call)
        if flags is not None:
            p.op(_LD_ABS, _arg(flags))
            p.op(_JSET, _O_CREAT | _O_TMPFILE, 0, "allow")
        p.op(_LD_ABS, _arg(mode))
        p.op(_JSET, _SETID_BITS, "eperm", "allow")
    p.label("allow")
    p.op(_RET, _RET_ALLOW)
    p.label("eperm")
    p.op(_RET, _RET_ERRNO | _EPERM)
    p.label("nosys")
    p.op(_RET, _RET_ERRNO | _ENOSYS)
    return p.assemble()


_SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
_MEMFD: dict[int, int] = {}


def setuid_filter_path() -> str:
    """A path the filter can be read from while this process lives: a sealed, in-memory file
    (``/proc/<pid>/fd/<fd>``), made once per process (a forked child makes its own)."""
    pid = os.getpid()
    if pid not in _MEMFD:
        program = setuid_filter()
        fd = os.memfd_create("agentfsm-setuid-filter", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.write(fd, program)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
        _MEMFD[pid] = fd
    return f"/proc/{pid}/fd/{_MEMFD[pid]}"


def setuid_filter_fd() -> int:
    """A new descriptor of the filter, read from its start (close it): bubblewrap reads the
    descriptor it is given to its end, so each command gets its own."""
    return os.open(setuid_filter_path(), os.O_RDONLY | os.O_CLOEXEC)
