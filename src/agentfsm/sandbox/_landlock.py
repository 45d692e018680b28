"""Landlock scoping: a sandbox that shares the network reaches no abstract unix socket of
the host.

Abstract unix sockets (``@/tmp/.X11-unix/X0``, a D-Bus or ``systemd --user`` bus, an IDE's
helper) belong to the network namespace, not to the file system: a command that shares the
host's network (``allow_network``) could connect to them, type into the desktop or start a
service outside the sandbox. Landlock's scoping (Linux 6.12, ABI 6) refuses a connection
from a process of a Landlock domain to an abstract socket made outside it; the sockets the
command makes itself still work. :data:`SCOPE_SCRIPT` enters such a domain and becomes the
command (the agent's own interpreter runs it inside the sandbox, where ``bwrap`` has set
``no_new_privs``); every process the command starts inherits it.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import platform

__all__ = ["MIN_SCOPE_ABI", "SCOPE_SCRIPT", "landlock_abi", "scopes_abstract_sockets"]

MIN_SCOPE_ABI = 6
"""The first Landlock ABI that scopes abstract unix sockets (Linux 6.12)."""
_CREATE_RULESET = 444
"""``landlock_create_ruleset``: the same number on x86_64 and aarch64 (446: restrict_self)."""
_VERSION = 1
"""``LANDLOCK_CREATE_RULESET_VERSION``: asks for the ABI version."""
_MACHINES = ("x86_64", "amd64", "aarch64", "arm64")

SCOPE_SCRIPT = """\
import ctypes, os, struct, sys
c = ctypes.CDLL(None, use_errno=True)
c.syscall.restype = ctypes.c_long
L = ctypes.c_long
attr = ctypes.create_string_buffer(struct.pack("QQQ", 0, 0, 1), 24)
fd = c.syscall(L(444), attr, L(24), L(0))
if fd < 0 or c.syscall(L(446), L(fd), L(0)) != 0:
    sys.stderr.write("agentfsm: cannot scope the command's unix sockets (Landlock)\\n")
    sys.exit(126)
os.close(fd)
os.execv(sys.argv[1], sys.argv[1:])
"""
"""Run as ``python -I -S -c SCOPE_SCRIPT program args…``: a Landlock domain scoping
abstract unix sockets (no file system or network rules: ``bwrap`` bounds those), then
``program``; exit code 126 with one line when the domain cannot be entered."""


@functools.lru_cache(maxsize=1)
def landlock_abi() -> int:
    """The Landlock ABI version of this kernel (0: none, or not a machine this knows)."""
    if platform.machine().lower() not in _MACHINES:
        return 0
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        found = int(
            libc.syscall(
                ctypes.c_long(_CREATE_RULESET), None, ctypes.c_long(0), ctypes.c_long(_VERSION)
            )
        )
        return max(found, 0)
    return 0


def scopes_abstract_sockets() -> bool:
    """Whether this kernel can keep a command from the host's abstract unix sockets."""
    return landlock_abi() >= MIN_SCOPE_ABI
