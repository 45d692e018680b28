"""The log file of a durable or exporting command: DBOS's and the OpenTelemetry SDK's
warnings (and, for ``batch`` and ``worker``, each task's own) go to a file under the state
folder instead of the terminal, unless ``--verbose``; what the command reports itself (one
line per failed task, the summary) stays on stderr.

The file is created at the first record (a command that logs nothing leaves nothing) and
``batch`` and ``worker`` print its path then. It is bounded: rotated at :data:`MAX_BYTES`
(one older part kept, ``.log.1``), and the folder keeps the :data:`KEEP` newest files, the
older ones removed when a new one starts.
"""

from __future__ import annotations

import contextlib
import logging
import logging.handlers
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from agentfsm.adapters.sessions import state_home

from ._database_url import hide_secrets
from ._terminal import sanitize

__all__ = [
    "KEEP",
    "KEY_ENVS",
    "LIBRARY_LOGGERS",
    "MAX_BYTES",
    "SDK_LOGGERS",
    "log_folder",
    "logs_to_file",
]

SDK_LOGGERS = ("dbos", "opentelemetry")
"""Loggers of the libraries under a durable or exporting command."""
LIBRARY_LOGGERS = ("agentfsm",)
"""agentfsm's own loggers: a task's retries and failures, which ``batch`` reports itself."""


MAX_BYTES = 2_000_000
"""A log file is rotated at this size: the file and one older part, at most twice this."""
KEEP = 50
"""Log files the folder keeps: when a new one starts, the oldest beyond these are removed."""


def log_folder() -> Path:
    """``<state folder>/agentfsm/logs``."""
    return state_home() / "agentfsm" / "logs"


KEY_ENVS: set[str] = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}
"""Environment variables whose values never reach a log file (a run's ``--api-key-env``
is added when its provider is built)."""


class _Formatter(logging.Formatter):
    """One record, sanitized for a terminal, its traceback included, with every API key
    (of a live adapter, or in a variable of :data:`KEY_ENVS`) redacted, and every password
    of a database URL or connection string quoted in it (:func:`hide_secrets`)."""

    def format(self, record: logging.LogRecord) -> str:
        from agentfsm.adapters.providers import Secret, redact, registered_secrets

        secrets: list[str | Secret] = list(registered_secrets())
        secrets += [os.environ.get(name, "") for name in sorted(KEY_ENVS)]
        return hide_secrets(redact(sanitize(super().format(record)), secrets))


class _LogFile(logging.handlers.RotatingFileHandler):
    """Rotated at :data:`MAX_BYTES`; created, with its folder, at the first record, when the
    folder is pruned and ``announce`` (a line on stderr naming the file) is printed. A file
    that cannot be written (a full disk, a folder that cannot be made) is said in one line,
    and the records from then on go to stderr: none is lost, no traceback is printed."""

    def __init__(self, path: Path, announce: str | None) -> None:
        super().__init__(
            path,
            maxBytes=MAX_BYTES,
            backupCount=1,
            encoding="utf-8",
            errors="backslashreplace",
            delay=True,
        )
        self.announce = announce
        self.started = False
        self.failed = False

    def _open(self) -> Any:
        if not self.started:
            self.started = True
            Path(self.baseFilename).parent.mkdir(parents=True, exist_ok=True)
            _prune(Path(self.baseFilename))
            if self.announce is not None:
                print(self.announce, file=sys.stderr, flush=True)
        return super()._open()

    def emit(self, record: logging.LogRecord) -> None:
        if self.failed:
            self._to_stderr(record)
        else:
            super().emit(record)

    def handleError(self, record: logging.LogRecord) -> None:
        error = sys.exc_info()[1]
        if not isinstance(error, OSError):
            super().handleError(record)
            return
        self.failed = True
        stream, self.stream = self.stream, None
        if stream is not None:
            with contextlib.suppress(OSError, ValueError):
                stream.close()  # what it holds cannot be written either
        reason = error.strerror or str(error)
        with contextlib.suppress(OSError, ValueError):
            print(
                sanitize(
                    f"agentfsm: cannot write the log file {self.baseFilename} ({reason}); "
                    "its records go to stderr"
                ),
                file=sys.stderr,
                flush=True,
            )
        self._to_stderr(record)

    def _to_stderr(self, record: logging.LogRecord) -> None:
        with contextlib.suppress(Exception):
            print(self.format(record), file=sys.stderr, flush=True)


def _prune(keep: Path) -> None:
    """Remove the oldest log files of ``keep``'s folder beyond the :data:`KEEP` newest."""
    try:
        found = [
            (entry.stat().st_mtime, entry)
            for entry in keep.parent.iterdir()
            if entry.suffix == ".log" and entry.is_file() and entry != keep
        ]
    except OSError:
        return
    found.sort(reverse=True)
    for _, old in found[KEEP - 1 :]:
        for part in (old, old.with_name(old.name + ".1")):
            with contextlib.suppress(OSError):
                part.unlink()


_active: list[tuple[Path, logging.Handler]] = []
"""The log file of the command running now (a command inside another one shares it)."""


@contextlib.contextmanager
def logs_to_file(
    command: str,
    *,
    verbose: bool,
    loggers: tuple[str, ...] = SDK_LOGGERS,
    announce: bool = False,
) -> Iterator[Path | None]:
    """While the block runs, the warnings of ``loggers`` go to a new file of
    :func:`log_folder` (its path yielded; the file is created at the first record, and
    with ``announce`` its path printed then), not to the terminal. With ``verbose``, or
    when the folder cannot be created, nothing changes (yields ``None``). Inside another
    such block, the outer file is used."""
    if verbose:
        yield None
        return
    if _active:
        path, handler = _active[-1]
        if announce and isinstance(handler, _LogFile) and handler.announce is None:
            handler.announce = f"agentfsm {command}: logs go to {path}"
        with _attached(handler, loggers):
            yield path
        return
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = log_folder() / f"{command.replace(' ', '-')}-{stamp}-{os.getpid()}.log"
    announced = f"agentfsm {command}: logs go to {path}" if announce else None
    handler = _LogFile(path, announced)  # the folder is made at the first record
    handler.setFormatter(_Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    _active.append((path, handler))
    try:
        with _attached(handler, loggers):
            yield path
    finally:
        _active.pop()
        handler.close()


@contextlib.contextmanager
def _attached(handler: logging.Handler, loggers: tuple[str, ...]) -> Iterator[None]:
    """``handler`` the only handler of ``loggers`` (WARNING and up, not propagated), then
    their own handlers, propagation and level back."""
    saved: list[tuple[logging.Logger, list[logging.Handler], bool, int]] = []
    for name in loggers:
        logger = logging.getLogger(name)
        if handler in logger.handlers:
            continue
        saved.append((logger, list(logger.handlers), logger.propagate, logger.level))
        # DBOS adds its console handler at configuration only when its logger has none.
        logger.handlers = [handler]
        logger.propagate = False
        if logger.level == logging.NOTSET or logger.level > logging.WARNING:
            logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, handlers, propagate, level in reversed(saved):
            logger.handlers = handlers
            logger.propagate = propagate
            logger.setLevel(level)
