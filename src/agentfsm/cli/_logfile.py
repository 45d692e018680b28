"""The log file of a durable or exporting command: DBOS's and the OpenTelemetry SDK's logs
(and, for ``batch`` and ``worker``, each task's own warnings) go to a file under the state
folder instead of the terminal, unless ``--verbose``. The command prints the file's path
once; what it reports itself (one line per failed task, the summary) stays on stderr.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from agentfsm.adapters.sessions import state_home

from ._terminal import sanitize

__all__ = ["KEY_ENVS", "LIBRARY_LOGGERS", "SDK_LOGGERS", "log_folder", "logs_to_file"]

SDK_LOGGERS = ("dbos", "opentelemetry")
"""Loggers of the libraries under a durable or exporting command."""
LIBRARY_LOGGERS = ("agentfsm",)
"""agentfsm's own loggers: a task's retries and failures, which ``batch`` reports itself."""


def log_folder() -> Path:
    """``<state folder>/agentfsm/logs``."""
    return state_home() / "agentfsm" / "logs"


KEY_ENVS: set[str] = {"OPENAI_API_KEY", "ANTHROPIC_API_KEY"}
"""Environment variables whose values never reach a log file (a run's ``--api-key-env``
is added when its provider is built)."""


class _Formatter(logging.Formatter):
    """One record, sanitized for a terminal, its traceback included, with every API key
    (of a live adapter, or in a variable of :data:`KEY_ENVS`) redacted."""

    def format(self, record: logging.LogRecord) -> str:
        from agentfsm.adapters.providers import Secret, redact, registered_secrets

        secrets: list[str | Secret] = list(registered_secrets())
        secrets += [os.environ.get(name, "") for name in sorted(KEY_ENVS)]
        return redact(sanitize(super().format(record)), secrets)


_active: list[tuple[Path, logging.FileHandler]] = []
"""The log file of the command running now (a command inside another one shares it)."""


@contextlib.contextmanager
def logs_to_file(
    command: str, *, verbose: bool, loggers: tuple[str, ...] = SDK_LOGGERS
) -> Iterator[Path | None]:
    """While the block runs, the records of ``loggers`` go to a new file of
    :func:`log_folder` (yielded), not to the terminal; the command prints the path. With
    ``verbose``, or when the file cannot be created, nothing changes (yields ``None``).
    Inside another such block, the outer file is used."""
    if verbose:
        yield None
        return
    if _active:
        path, handler = _active[-1]
        with _attached(handler, loggers):
            yield path
        return
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = log_folder() / f"{command.replace(' ', '-')}-{stamp}-{os.getpid()}.log"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # Created at the first record: a command that logs nothing leaves no empty file.
        handler = logging.FileHandler(path, encoding="utf-8", errors="backslashreplace", delay=True)
    except OSError as error:
        print(
            f"agentfsm {command}: cannot write a log file ({error.strerror or error}); "
            "logging to the terminal",
            file=sys.stderr,
        )
        yield None
        return
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
    """``handler`` the only handler of ``loggers`` (INFO and up, not propagated), then
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
        if logger.level == logging.NOTSET or logger.level > logging.INFO:
            logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        for logger, handlers, propagate, level in reversed(saved):
            logger.handlers = handlers
            logger.propagate = propagate
            logger.setLevel(level)
