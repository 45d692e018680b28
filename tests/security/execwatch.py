"""Watching what a command line really executes: the ``shell`` tool's command for the line,
run in the bubblewrap sandbox under ``strace -f``, every ``execve`` of the process tree
read back with the program that made it.

The trace is the independent reading the rules' verdicts are checked against: it records
what bash and the programs did, whatever the rules thought the line said.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import tempfile
from collections import defaultdict
from pathlib import Path

from attrs import frozen

from agentfsm.adapters.tools._shell_tool import BASH, bash_command
from agentfsm.sandbox import BubblewrapSandbox

__all__ = ["Exec", "trace_line"]


@frozen
class Exec:
    """One successful ``execve`` under the line."""

    path: str
    """The program executed."""
    argv: tuple[str, ...]
    """Its arguments, ``argv[0]`` as the caller gave it."""
    chain: tuple[tuple[str, ...], ...]
    """The argv of each program above it, from the line's bash down to the one that ran it
    (only the bash: the line itself ran it)."""
    above: tuple[str, ...] = ()
    """The paths of the programs above it, the line's bash first."""

    @property
    def name(self) -> str:
        return os.path.basename(self.path)

    @property
    def direct(self) -> bool:
        """The line ran it (bash or a subshell of it made the call)."""
        return len(self.chain) == 1


_LINE = re.compile(r"^(\d+)\s+(.*)$")
_CALL = re.compile(r"^(execve|execveat|clone3?|v?fork)\(")
_RESUMED = re.compile(r"^<\.\.\. (\w+) resumed>")
_RESULT = re.compile(r"\)\s+=\s+(-?\d+)(?:\s+/\* (\d+) in strace's PID NS \*/)?")
_STRING = re.compile(r'"((?:\\x[0-9a-f]{2})*)"')


def _strings(text: str) -> list[str]:
    return [
        bytes.fromhex(raw.replace("\\x", "")).decode("utf-8", "surrogateescape")
        for raw in _STRING.findall(text)
    ]


def _events(trace: str) -> tuple[dict[int, list[tuple[str, object]]], int | None]:
    """Per pid, in order: ``("exec", argv with the path first)`` or ``("child", pid)``."""
    events: dict[int, list[tuple[str, object]]] = defaultdict(list)
    pending: dict[int, tuple[str, str]] = {}
    first: int | None = None
    for line in trace.splitlines():
        match = _LINE.match(line)
        if match is None:
            continue
        pid, rest = int(match.group(1)), match.group(2)
        first = pid if first is None else first
        resumed = _RESUMED.match(rest)
        if resumed is not None:
            if pid not in pending:
                continue
            call, head = pending.pop(pid)
            rest = head + rest[resumed.end() :]
        else:
            call_match = _CALL.match(rest)
            if call_match is None:
                continue
            call = call_match.group(1)
            if rest.endswith("<unfinished ...>"):
                pending[pid] = (call, rest[: -len("<unfinished ...>")])
                continue
        result = _RESULT.search(rest)
        if result is None or int(result.group(1)) < 0:
            continue
        if call.startswith("exec"):
            strings = _strings(rest[: result.start()])
            if strings:
                events[pid].append(("exec", tuple(strings)))
        else:
            child = int(result.group(2) or result.group(1))
            events[pid].append(("child", child))
    return events, first


def _execs(trace: str, line: str) -> list[Exec]:
    """The executions under the line's bash, each with the programs above it."""
    events, first = _events(trace)
    found: list[Exec] = []
    marker = ("--norc", "--noprofile", "-c", line)

    def visit(pid: int, chain: tuple[tuple[str, ...], ...], above: tuple[str, ...]) -> None:
        for kind, value in events.get(pid, ()):
            if kind == "child":
                assert isinstance(value, int)
                visit(value, chain, above)
                continue
            assert isinstance(value, tuple)
            path, argv = value[0], value[1:]
            if chain:
                found.append(Exec(path, argv, chain, above))
                chain, above = (*chain, argv), (*above, path)
            elif argv[1:] == marker:
                # the line's bash: what follows is the line's doing
                chain, above = (argv,), (path,)

    if first is not None:
        visit(first, (), ())
    return found


def trace_line(sandbox: BubblewrapSandbox, line: str, *, timeout: float = 30) -> list[Exec]:
    """Run ``line`` as the ``shell`` tool runs it, in ``sandbox`` (its root is the working
    folder), under ``strace -f``; every program the line's bash and its descendants
    executed. A line that outlives ``timeout`` is killed, and what it ran so far counts."""
    assert BASH is not None
    argv, env = sandbox.command(bash_command(line, BASH), sandbox.root)
    with tempfile.TemporaryDirectory(prefix="agentfsm-trace-") as folder:
        out = Path(folder) / "trace"
        command = [
            "strace",
            "-f",
            "-qq",
            "--pidns-translation",
            "-xx",
            "-s",
            "65536",
            "-e",
            "trace=execve,execveat,clone,clone3,fork,vfork",
            "-e",
            "signal=none",
            "-o",
            str(out),
            *argv,
        ]
        process = subprocess.Popen(
            command,
            env=dict(env),
            cwd=sandbox.root,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            pass
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        trace = out.read_text("utf-8", "replace") if out.exists() else ""
    return _execs(trace, line)
