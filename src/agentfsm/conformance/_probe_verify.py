"""A suggested quirk profile, verified: the decisive checks re-run with the adapter built
under it (and under a few neighbours when it fails), and the verified profile saved in a
workspace's settings."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from attrs import evolve, frozen

from agentfsm.adapters.providers import (
    AnthropicQuirks,
    OpenAIQuirks,
    QuirkProfile,
    ResponsesQuirks,
    WireName,
    changed_quirks,
)
from agentfsm.adapters.tools import SETTINGS_FILE

from ._checks import by_id
from ._context import LiveContext, LiveTarget
from ._model import CheckResult
from ._probe import _line
from ._runner import run_check

__all__ = [
    "DECISIVE",
    "Verification",
    "candidates",
    "profile_text",
    "settings_path",
    "verify",
    "write_settings",
]

DECISIVE: dict[WireName, tuple[str, ...]] = {
    "openai-chat": ("A1", "A4", "T15", "T16"),
    "anthropic": ("A4", "T15", "T16"),
    "openai-responses": ("A1", "A4", "T15", "T16"),
}
"""The checks a profile must pass: a plain answer, a tool-call history accepted, the agent
loop's two turns (a tool call, then an answer to its result) and a streamed automatic tool
choice, all through the adapter built under the profile. (Anthropic's A1 measures the text
blocks the default adapter sends, which ``string_content`` replaces; T15 covers the answer.)"""

_PASSED = ("pass", "pass-normalized")


def profile_text(profile: QuirkProfile) -> str:
    """``OpenAIQuirks(explicit_tool_choice=True)``: the fields that differ from the defaults."""
    fields = ", ".join(f"{name}={value!r}" for name, value in changed_quirks(profile).items())
    return f"{type(profile).__name__}({fields})"


def candidates(profile: QuirkProfile) -> list[QuirkProfile]:
    """The profiles to try, the suggestion first: then with tools always named in
    ``tool_choice`` and sent unstreamed (and Anthropic text as strings), the usual fixes a
    server's answers can hide."""
    tries: list[QuirkProfile] = [profile]
    variants: list[dict[str, Any]] = [
        {"explicit_tool_choice": True},
        {"stream_with_tools": False},
        {"explicit_tool_choice": True, "stream_with_tools": False},
    ]
    if isinstance(profile, AnthropicQuirks):
        variants.append({"explicit_tool_choice": True, "stream_with_tools": False})
        variants[-1]["string_content"] = True
    for change in variants:
        variant = evolve(profile, **change)
        if variant not in tries:
            tries.append(variant)
    return tries


@frozen
class Verification:
    """What re-running the decisive checks showed."""

    verified: QuirkProfile | None
    """The first profile under which every decisive check passed; ``None``: no profile."""
    tried: tuple[tuple[QuirkProfile, tuple[CheckResult, ...]], ...]
    """Each profile tried, with the results of its checks (the run stops at a failure, not
    at a skip)."""

    def _never_passed(self, outcomes: tuple[str, ...]) -> list[str]:
        passed = {r.check for _, results in self.tried for r in results if r.outcome in _PASSED}
        first: dict[str, str] = {}
        for _, results in self.tried:
            for result in results:
                if result.check not in passed and result.outcome in outcomes:
                    first.setdefault(result.check, f"{result.outcome}: {_line(result.message)}")
        return [f"{check} ({why})" for check, why in first.items()]

    def failing(self) -> list[str]:
        """The decisive checks that never passed and failed (``T16 (fail: …)``)."""
        return self._never_passed(("fail", "xfail"))

    def unshown(self) -> list[str]:
        """The decisive checks that never passed nor failed: skipped, their message says
        why (``T15 (skip: model behaviour: …)``)."""
        failing = {entry.split(" ", 1)[0] for entry in self.failing()}
        shown = self._never_passed(("skip", "model"))
        return [e for e in shown if e.split(" ", 1)[0] not in failing]


def _target(
    base_url: str, model: str, wire: WireName, api_key: str | None, profile: QuirkProfile
) -> LiveTarget:
    if isinstance(profile, OpenAIQuirks):
        return LiveTarget(base_url, model, wire, api_key, quirks=profile)
    if isinstance(profile, ResponsesQuirks):
        return LiveTarget(base_url, model, wire, api_key, responses_quirks=profile)
    return LiveTarget(base_url, model, wire, api_key, anthropic_quirks=profile)


async def verify(
    base_url: str,
    model: str,
    profile: QuirkProfile,
    api_key: str | None = None,
    *,
    wire: WireName = "openai-chat",
    checks: Sequence[str] | None = None,
    progress: Callable[[QuirkProfile, CheckResult], object] | None = None,
    trying: Callable[[QuirkProfile], object] | None = None,
) -> Verification:
    """Re-run the decisive checks (``checks``, default :data:`DECISIVE`) under ``profile``
    and, while one fails, under the next of :func:`candidates`. A check verifies when it
    passes (``pass`` or ``pass-normalized``); a skip shows nothing and does not.
    ``trying`` hears of each profile before its checks, ``progress`` of each result."""
    chosen = [by_id(check_id) for check_id in (checks or DECISIVE[wire])]
    tried: list[tuple[QuirkProfile, tuple[CheckResult, ...]]] = []
    for candidate in candidates(profile):
        if trying is not None:
            trying(candidate)
        target = _target(base_url, model, wire, api_key, candidate)
        live = LiveContext(target)
        results: list[CheckResult] = []
        for check in chosen:
            result = await run_check(check, target, live)
            results.append(result)
            if progress is not None:
                progress(candidate, result)
            if result.outcome in ("fail", "xfail"):
                break  # a skip shows nothing, but the checks after it still show something
        tried.append((candidate, tuple(results)))
        if len(results) == len(chosen) and all(r.outcome in _PASSED for r in results):
            return Verification(candidate, tuple(tried))
    return Verification(None, tuple(tried))


def settings_path(where: str | Path) -> Path:
    """The settings file for ``where``: a workspace folder (its ``.agentfsm/settings.json``)
    or the file itself."""
    path = Path(where)
    return path / SETTINGS_FILE if path.is_dir() else path


def write_settings(where: str | Path, profile: QuirkProfile) -> Path:
    """Put ``profile`` in the settings' ``provider.quirks`` (replacing the profile there,
    keeping every other setting) and return the file written.

    Raises:
        ValueError: the file exists and is not a JSON object (it is left as it was).
        OSError: it cannot be read or written.
    """
    path = settings_path(where)
    data: dict[str, Any] = {}
    if path.exists():
        try:
            loaded = json.loads(path.read_text("utf-8"))
        except (UnicodeDecodeError, ValueError) as error:
            raise ValueError(f"{path} is not valid JSON ({error}); not changed") from None
        if not isinstance(loaded, dict):
            raise ValueError(f"{path} does not hold a JSON object; not changed")
        data = loaded
    provider = data.get("provider")
    if provider is not None and not isinstance(provider, dict):
        raise ValueError(f"{path}: provider is not an object; not changed")
    data["provider"] = {**(provider or {}), "quirks": changed_quirks(profile)}
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".settings-", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(json.dumps(data, indent=2) + "\n")
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path
