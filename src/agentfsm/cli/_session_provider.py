"""Which model a session talked to, so that ``agentfsm run --resume`` talks to it again.

``agentfsm run`` writes one ``provider`` meta record into its session file as the run
starts: the provider, the base URL and model given (or the provider's default model), and
the *name* of the variable given with ``--api-key-env``. Never a key, never a header; a
base URL with a user, password, query or fragment (where keys hide) is left out.
``--resume`` reads the last such record of the session it continues and fills in the
provider, base URL and model the command line leaves out, never the key variable (see
:func:`adopt_session_provider`).
"""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from agentfsm.adapters.sessions import SessionHandle, read_session
from agentfsm.engine import AgentEmitter, TurnStartEvent

__all__ = ["adopt_session_provider", "record_provider", "recordable_url"]

_PROVIDERS = ("openai", "anthropic", "openai-compatible", "local")
SERVICES = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
"""Each hosted provider's own service (its default base URL), where its standard key goes."""


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


def _recorded(path: Path) -> Mapping[str, Any] | None:
    """The last ``provider`` record of the session file, if it has a usable one."""
    found = read_session(path).last.get("provider")
    if found is None or found.fields.get("provider") not in _PROVIDERS:
        return None
    return found.fields


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value and value.isprintable() else None


def adopt_session_provider(args: argparse.Namespace, session: Path) -> list[str]:
    """Fill ``args``'s provider options from the session ``--resume`` continues: the
    provider and base URL unless either is given, the model unless given (and only for the
    same provider). Returns what to tell the user before any request.

    A session file may come from elsewhere, so it never chooses a secret nor where one goes:
    its ``--api-key-env`` is never adopted (the user names it again; the returned line says
    so), and a hosted provider's standard key (``OPENAI_API_KEY``, ``ANTHROPIC_API_KEY``)
    is withheld (``args.withhold_key``) when the session, not the command line, chose a base
    URL other than that provider's own service.

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
    said: list[str] = []
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
        if url is not None:
            args.base_url = url
            if url.rstrip("/") != SERVICES.get(args.provider, url).rstrip("/"):
                args.withhold_key = True  # the file chose the host: no key unless named
    provider = args.provider or ("openai-compatible" if args.base_url else None)
    if provider != recorded["provider"]:
        return said
    model = _text(recorded.get("model"))
    if args.model is None and model is not None:
        args.model = model
    key_env = _text(recorded.get("api_key_env"))
    if args.api_key_env is None and key_env is not None:
        said.append(
            f"the resumed session used --api-key-env {key_env[:100]}; pass it to use it again"
        )
    return said
