"""What a failed check points a provider author at: the known quirk behind it, the profile
field that works around it, the ``--capability`` that runs a skipped check, and when to run
``agentfsm conformance probe``.

A live failure that names no quirk (an error the adapter raised, say) is matched against
the error texts of :data:`SIGNATURES`; it carries a quirk's tag only when exactly one quirk
explains it. :data:`PROFILE_FIXES` are the quirks a quirk profile works around: a failure
that shows one of them, or a failure of a check ``probe`` verifies profiles with, makes the
report suggest ``probe``.
"""

from __future__ import annotations

import re
import shlex
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ._model import QUIRK_NOTES, Capabilities, CheckResult

__all__ = [
    "PROFILE_FIXES",
    "SIGNATURES",
    "capability_hint",
    "probe_suggestion",
    "public_url",
    "quirk_note",
    "quirks_in",
]

SIGNATURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Q4", re.compile(r"arguments\W.{0,40}(must be|expected|should be)\W+(a )?string", re.I)),
    ("Q6", re.compile(r"maximum length 40|tool_call_id.{0,60}(too long|maximum length)", re.I)),
    ("Q7", re.compile(r"duplicate value for .?tool_call_id", re.I)),
    ("Q14", re.compile(r"stream_options", re.I)),
    ("Q23", re.compile(r"invalid message content type|content.{0,40}\b(nil|null)\b", re.I)),
    ("Q33", re.compile(r"parallel_tool_calls", re.I)),
    ("Q50", re.compile(r"no connected db", re.I)),
)
"""A known quirk, and what the error text of a request it breaks says."""

PROFILE_FIXES: dict[str, str] = {
    "Q14": "stream_options=false",
    "Q23": "null_assistant_content=false",
    "Q37": "stream_with_tools=false",
    "Q38": "string_content=true",
    "Q39": "explicit_tool_choice=true",
}
"""Known quirks a quirk profile works around -> the ``--quirk`` that does (``probe`` finds
and verifies it)."""


_SECRET_PARAM = re.compile(r"key|token|secret|sig|auth|pass|credential|code", re.I)


def public_url(url: str) -> str:
    """``url`` as a report may show it: no password in its userinfo, and the value of every
    query parameter named like a secret (``key``, ``api_key``, ``token``, ``sig`` …) masked."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        return "(a URL that does not parse)"
    user = f"{parts.username}@" if parts.username else ""
    query = [
        (name, "***" if _SECRET_PARAM.search(name) else value)
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    netloc = f"{user}{host}{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="*"), ""))


def quirks_in(text: str) -> tuple[str, ...]:
    """The one known quirk whose error text ``text`` shows, or nothing (none, or several:
    then the text does not say which)."""
    found = tuple(quirk for quirk, pattern in SIGNATURES if pattern.search(text))
    return found if len(found) == 1 else ()


def quirk_note(quirks: tuple[str, ...]) -> str:
    """The pointer a failure's message ends with: the quirks' tags, where they are
    described, and the ``--quirk`` that works around them when a profile does."""
    if not quirks:
        return ""
    fixes = [f"--quirk {PROFILE_FIXES[q]}" for q in quirks if q in PROFILE_FIXES]
    fix = f"; a profile works around it: {', '.join(fixes)}" if fixes else ""
    return f" (known quirk: {', '.join(quirks)}; see {QUIRK_NOTES}{fix})"


def capability_hint(missing: list[str]) -> str:
    """A skipped check's message: the absent capabilities, and the ``--capability`` (or
    :class:`Capabilities` field) that runs it."""
    flags, fields = [], []
    for name in missing:
        value = getattr(Capabilities(), name, None)
        numeric = isinstance(value, int | type(None)) and not isinstance(value, bool)
        flags.append(f"--capability {name}=N" if numeric else f"--capability {name}")
        fields.append(f"{name}=N" if numeric else f"{name}=True")
    return (
        f"capability absent: {', '.join(missing)} (run it with {' '.join(flags)}; in code: "
        f"Capabilities({', '.join(fields)}))"
    )


def probe_suggestion(
    results: list[CheckResult],
    wire: str,
    base_url: str,
    model: str,
    decisive: tuple[str, ...],
    key_env: str | None = None,
) -> str:
    """The ``probe`` command line, with why, when the failures point at a quirk profile: a
    failure that shows a quirk a profile works around, or a failure of a check ``probe``
    verifies profiles with (``decisive``). Empty otherwise. ``key_env`` is the environment
    variable holding the key, when the caller knows it."""
    failed = [r for r in results if r.outcome == "fail"]
    quirks = sorted({q for r in failed for q in r.quirks if q in PROFILE_FIXES})
    checks = [r.check for r in failed if r.check in decisive or set(r.quirks) & set(quirks)]
    if not checks:
        return ""
    why = f"the failures of {', '.join(checks)}"
    why += f" show {', '.join(quirks)}" if quirks else " may come from a quirk profile"
    words = ["agentfsm", "conformance", "probe", "--base-url", base_url, "--model", model]
    words += ["--wire", wire] + (["--api-key-env", key_env] if key_env else [])
    hint = "" if key_env else " (add --api-key-env VAR if it needs a key)"
    return f"{why}: try {shlex.join(words)}{hint}"
