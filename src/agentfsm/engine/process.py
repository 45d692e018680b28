"""Running a shell command in its own process group, with a timeout and capped output.

Shared by the ``verify`` gate and the workspace ``shell`` tool. Cancelling the caller (an
interrupt) or a timeout kills the whole process group, so nothing is left behind.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import os
import signal
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

__all__ = ["CommandSandbox", "SandboxUnavailable", "run_command"]


class SandboxUnavailable(RuntimeError):
    """No OS sandbox works on this machine; the message says what to install or enable."""


@runtime_checkable
class CommandSandbox(Protocol):
    """Runs a shell command line confined by an OS mechanism (or, explicitly, not at all)."""

    @property
    def name(self) -> str:
        """The mechanism: ``"bubblewrap"``, … or ``"none"`` for the explicit opt-out."""
        ...

    def command(self, command: str, cwd: Path) -> tuple[list[str], Mapping[str, str]]:
        """The argv and environment that run ``sh -c command`` in ``cwd`` inside the sandbox."""
        ...

    def describe(self) -> dict[str, Any]:
        """What the sandbox allows, as JSON (recorded in the session)."""
        ...


async def _read_capped(stream: asyncio.StreamReader, limit: int) -> str:
    """Read a stream to its end; past ``limit`` characters keep only its head and tail."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    half = max(limit // 2, 1)
    kept = ""
    head: str | None = None
    tail = ""
    total = 0
    while True:
        chunk = await stream.read(65536)
        text = decoder.decode(chunk, final=not chunk)
        total += len(text)
        if head is None:
            kept += text
            if len(kept) > limit:
                head, tail, kept = kept[:half], kept[half:][-half:], ""
        else:
            tail = (tail + text)[-half:]
        if not chunk:
            break
    if head is None:
        return kept
    return f"{head}\n… [{total - len(head) - len(tail)} characters cut] …\n{tail}"


def _kill(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def run_command(
    command: str,
    cwd: str | Path,
    *,
    timeout: float,  # noqa: ASYNC109 - the command's own bound, enforced with a kill
    max_output: int,
) -> tuple[int | None, str]:
    """Run ``command`` in a shell in its own process group.

    Returns the exit code (``None`` when it timed out and was killed) and the captured
    output (stdout and stderr together, head and tail kept past ``max_output`` characters).
    Cancelling the caller kills the whole group.
    """
    process = await asyncio.create_subprocess_shell(
        command,
        cwd=str(cwd),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        stdin=asyncio.subprocess.DEVNULL,
        start_new_session=True,
    )
    assert process.stdout is not None
    reader = asyncio.ensure_future(_read_capped(process.stdout, max_output))
    code: int | None
    try:
        code = await asyncio.wait_for(process.wait(), timeout)
    except TimeoutError:
        _kill(process)
        await process.wait()
        code = None
    except BaseException:
        _kill(process)
        reader.cancel()
        raise
    output = await reader
    return code, output
