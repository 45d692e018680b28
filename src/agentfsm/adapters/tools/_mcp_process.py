"""The stdio MCP servers' side channels: their stderr and the lines they print that are not
JSON-RPC.

* :class:`ErrlogPump` feeds a server's stderr into a stream that has no file descriptor
  (``io.StringIO``, a captured ``sys.stderr``), through a pipe read by a daemon thread, at
  most :data:`MAX_ERRLOG_BYTES` per server.
* :func:`quiet_garbage` makes the MCP SDK report a stdout line that is not JSON-RPC in one
  log line, without a traceback, and at most :data:`MAX_GARBAGE_REPORTS` times per start.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import IO, Any, TextIO

__all__ = ["MAX_ERRLOG_BYTES", "MAX_GARBAGE_REPORTS", "ErrlogPump", "fileno", "quiet_garbage"]

MAX_ERRLOG_BYTES = 1024 * 1024
"""stderr copied from one server into a stream without a file descriptor (1 MiB)."""
MAX_GARBAGE_REPORTS = 20
"""Unparsable stdout lines reported per :meth:`McpTools.start`; the rest are dropped."""

_SDK_LOGGER = "mcp.client.stdio"
_SDK_MESSAGE = "Failed to parse JSONRPC message from server"


def fileno(stream: Any) -> int | None:
    """The stream's file descriptor, or ``None`` when it has none."""
    try:
        fileno = int(stream.fileno())
    except (AttributeError, OSError, ValueError):
        return None
    return fileno if fileno >= 0 else None


class ErrlogPump:
    """A pipe whose write end a server gets as stderr; a daemon thread copies what comes
    out of it into ``target`` (bounded), until every holder of the write end is gone."""

    def __init__(self, target: TextIO, name: str) -> None:
        self.target = target
        self.name = name
        read_fd, write_fd = os.pipe()
        self._reader: IO[bytes] = os.fdopen(read_fd, "rb", buffering=0)
        self.writer: IO[str] = os.fdopen(write_fd, "w")
        self._thread = threading.Thread(target=self._copy, name=f"mcp-stderr:{name}", daemon=True)

    def start(self) -> None:
        """Close this process's write end (the server has its own) and start copying."""
        self.writer.close()
        self._thread.start()

    def _copy(self) -> None:
        left = MAX_ERRLOG_BYTES
        with contextlib.suppress(Exception), self._reader:
            while chunk := self._reader.read(65536):
                if left <= 0:
                    continue  # keep draining so the server never blocks on a full pipe
                piece, left = chunk[:left], left - len(chunk)
                self.target.write(piece.decode("utf-8", errors="replace"))
                if left <= 0:
                    self.target.write(f"\n[… further stderr of MCP server {self.name!r} dropped]\n")
                with contextlib.suppress(Exception):
                    self.target.flush()

    def close(self) -> None:
        """Close the write end if the server never started (the thread ends at EOF)."""
        if not self.writer.closed:
            self.writer.close()
            self._reader.close()


class _GarbageFilter(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.reported = 0
        self.lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.msg != _SDK_MESSAGE:
            return True
        with self.lock:
            self.reported += 1
            count = self.reported
        if count > MAX_GARBAGE_REPORTS:
            return False
        error = record.exc_info[1] if record.exc_info else None
        first = str(error).strip().splitlines()[0][:200] if error is not None else ""
        last = "; further such lines are not reported" if count == MAX_GARBAGE_REPORTS else ""
        record.msg = "an MCP server printed a line that is not JSON-RPC (%s)%s"
        record.args = (first or type(error).__name__, last)
        record.exc_info = None
        record.exc_text = None
        return True


_FILTER = _GarbageFilter()


def quiet_garbage() -> None:
    """Install (once) the SDK log filter and reset its count."""
    logger = logging.getLogger(_SDK_LOGGER)
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    with _FILTER.lock:
        _FILTER.reported = 0
