"""A logging filter that keeps API keys out of the HTTP libraries' log records.

httpx, httpcore, h2 and hpack log requests, connections and (for HTTP/2) header tables at
``DEBUG``. Every adapter built with a key installs :class:`SecretsFilter` on those loggers
(:func:`install_secrets_filter`), so a record carrying a live adapter's key (or a long piece
of it, or its ``Bearer`` form) is rewritten with ``[redacted]`` before any handler sees it.
"""

from __future__ import annotations

import logging
import threading

from ._errors import redact
from ._keys import registered_secrets

__all__ = ["FILTERED_LOGGERS", "SecretsFilter", "install_secrets_filter"]

FILTERED_LOGGERS = (
    "httpx",
    "httpcore",
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
    "h2",
    "h2.connection",
    "hpack",
    "hpack.hpack",
    "hpack.table",
    "agentfsm.providers",
)
"""Loggers :func:`install_secrets_filter` filters. A filter on a logger applies only to
the records logged on that very logger (not to its children's), hence each one by name."""

_PREFIXES = ("httpx", "httpcore", "h2", "hpack", "h11")
_LOCK = threading.Lock()


class SecretsFilter(logging.Filter):
    """Redacts the key of every live adapter from a record's formatted message.

    A record whose message (``msg % args``) holds a key, or an 8+ character piece of one, has
    its ``msg`` replaced by the redacted message and its ``args`` cleared; other records
    pass unchanged. It never drops a record. The adapters install one on the HTTP libraries'
    loggers; attach it to your own handlers too to cover other loggers::

        handler.addFilter(SecretsFilter())
    """

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = registered_secrets()
        if not secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a record that does not format: the handler reports it
            return True
        clean = redact(message, secrets)
        if clean != message:
            record.msg = clean
            record.args = None
        return True


_FILTER = SecretsFilter()


def install_secrets_filter() -> SecretsFilter:
    """Attach the shared :class:`SecretsFilter` to each of :data:`FILTERED_LOGGERS` and to
    every logger of httpx, httpcore, h2, hpack and h11 that exists now (idempotent);
    returns it."""
    with _LOCK:
        names = set(FILTERED_LOGGERS)
        names.update(
            name
            for name in list(logging.root.manager.loggerDict)
            if name.split(".", 1)[0] in _PREFIXES
        )
        for name in sorted(names):
            logger = logging.getLogger(name)
            if _FILTER not in logger.filters:
                logger.addFilter(_FILTER)
    return _FILTER
