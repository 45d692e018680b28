"""Which model a session talked to, so that ``agentfsm run --resume`` talks to it again.

``agentfsm run`` writes one ``provider`` meta record into its session file as the run
starts: the provider, the base URL and model given (or the provider's default model), and
the *name* of the variable given with ``--api-key-env``. Never a key, never a header; a
base URL with a user, password, query or fragment (where keys hide) is left out.
``--resume`` reads the last such record of the session it continues and fills in each of
those options the command line leaves out.
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentfsm.adapters.sessions import SessionHandle, iter_session_records
from agentfsm.engine import AgentEmitter, TurnStartEvent

__all__ = ["adopt_session_provider", "record_provider", "recordable_url"]

_PROVIDERS = ("openai", "anthropic", "openai-compatible", "local")


def recordable_url(url: str | None) -> str | None:
    """``url`` if it may be written into a session: no user or password, no query, no
    fragment (any of them may carry a key); else ``None``."""
    if url is None:
        return None
    try:
        parts = urlsplit(url)
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            return None
    except ValueError:
        return None
    return None if parts.query or parts.fragment or "?" in url or "#" in url else url


def record_provider(
    emitter: AgentEmitter, handle: SessionHandle, provider: dict[str, str | None]
) -> Callable[[], None]:
    """Write ``provider`` into the session once its run has started (after ``run_start``,
    at the first turn); returns the unsubscribe callable."""
    meta = {"event": "provider", **provider}
    unsubscribe: list[Callable[[], None]] = []

    def on_turn_start(event: TurnStartEvent) -> None:
        for stop in unsubscribe:
            stop()
        with contextlib.suppress(OSError):  # kept as handle.error, reported when the run ends
            handle.write_meta(meta)

    unsubscribe.append(emitter.on("turn_start", on_turn_start))
    return unsubscribe[0]


def _recorded(path: Path) -> dict[str, Any] | None:
    """The last ``provider`` record of the session file, if it has a usable one."""
    found: dict[str, Any] | None = None
    for record in iter_session_records(path, contains=b'"provider"'):
        meta = record.get("meta") if isinstance(record, dict) else None
        if isinstance(meta, dict) and meta.get("event") == "provider":
            found = meta
    if found is None or found.get("provider") not in _PROVIDERS:
        return None
    return found


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value and value.isprintable() else None


def adopt_session_provider(args: argparse.Namespace, session: Path) -> list[str]:
    """Fill ``args``'s provider options from the session ``--resume`` continues: the
    provider and base URL unless either is given, the model and ``--api-key-env`` unless
    given (and only for the same provider). Returns the options filled in.

    Raises:
        ValueError: the session's server is not known (its URL was not recorded), and the
            command line does not name one.
    """
    try:
        recorded = _recorded(session)
    except (OSError, ValueError):
        return []
    if recorded is None:
        return []
    filled: list[str] = []
    if args.provider is None and args.base_url is None:
        url = _text(recorded.get("base_url"))
        if url is None or not url.startswith(("http://", "https://")) or not recordable_url(url):
            url = None
            if recorded["provider"] == "openai-compatible":
                raise ValueError(
                    "the resumed session talked to an OpenAI-compatible server whose URL was "
                    "not recorded (it may have held a key): give --base-url and --model"
                )
        args.provider = recorded["provider"]
        filled.append("--provider")
        if url is not None:
            args.base_url = url
            filled.append("--base-url")
    provider = args.provider or ("openai-compatible" if args.base_url else None)
    if provider != recorded["provider"]:
        return filled
    for option, name in (("--model", "model"), ("--api-key-env", "api_key_env")):
        value = _text(recorded.get(name))
        if getattr(args, name) is None and value is not None:
            setattr(args, name, value)
            filled.append(option)
    return filled
