"""Running checks against a target and collecting a :class:`Report`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime

import httpx
from attrs import asdict, evolve

from agentfsm._version import __version__
from agentfsm.adapters.providers import endpoint_url
from agentfsm.testing import FakeProviderServer

from ._context import WIRES, LiveContext, LiveTarget, RecordedContext, RecordedTarget, Wire
from ._hints import capability_hint, probe_suggestion, public_url, quirk_note, quirks_in
from ._model import (
    Check,
    CheckFailed,
    CheckResult,
    CheckSkipped,
    Mode,
    ModelBehaviour,
    Normalized,
    Outcome,
    Report,
)
from ._record import scrub

__all__ = ["run_check", "run_checks"]


def _text(error: BaseException, target: RecordedTarget | LiveTarget) -> str:
    secrets = (target.api_key or "",) if isinstance(target, LiveTarget) else ()
    return scrub(str(error), secrets)


def _text_url(target: RecordedTarget | LiveTarget) -> str | None:
    """A live target's base URL as reports show it (its key, anything shaped like one, a
    password and secret-named query values left out); ``None`` in recorded mode."""
    if not isinstance(target, LiveTarget):
        return None
    return public_url(_text(ValueError(target.base_url), target))


def _result(
    check: Check,
    mode: Mode,
    outcome: Outcome,
    seconds: float,
    message: str = "",
    expected: str | None = None,
    got: str | None = None,
    quirks: tuple[str, ...] = (),
) -> CheckResult:
    return CheckResult(
        check.id,
        check.name,
        check.group,
        mode,
        outcome,
        message=message,
        expected=expected,
        got=got,
        quirks=quirks,
        seconds=round(seconds, 3),
    )


def _shown(text: str, mode: Mode) -> tuple[str, ...]:
    """Live, the one known quirk an error text shows (see :mod:`._hints`); recorded, the
    scripted bytes already say (:func:`_scripted`)."""
    return quirks_in(text) if mode == "live" else ()


def _scripted(check: Check, mode: Mode) -> tuple[str, ...]:
    """The quirks a failure shows when it names none: in recorded mode the scripted bytes
    are the check's quirks; live, nothing was seen, so nothing is blamed."""
    return check.quirks if mode == "recorded" else ()


async def run_check(
    check: Check, target: RecordedTarget | LiveTarget, live: LiveContext | None = None
) -> CheckResult:
    """One check on one target; never raises. Its message, expected and got texts never
    hold the target's API key."""
    result = await _run_check(check, target, live)
    secrets = (target.api_key or "",) if isinstance(target, LiveTarget) else ()
    return evolve(
        result,
        message=scrub(result.message, secrets),
        expected=scrub(result.expected, secrets) if result.expected is not None else None,
        got=scrub(result.got, secrets) if result.got is not None else None,
    )


async def _run_check(
    check: Check, target: RecordedTarget | LiveTarget, live: LiveContext | None
) -> CheckResult:
    mode: Mode = "recorded" if isinstance(target, RecordedTarget) else "live"
    started = time.monotonic()
    missing = [need for need in check.needs if not target.capabilities.has(need)]
    if missing:
        return _result(check, mode, "skip", 0.0, message=capability_hint(missing))
    if target.wire == "openai-responses" and mode not in check.responses:
        message = f"no {mode} procedure for the {target.wire} wire"
        return _result(check, mode, "skip", 0.0, message=message)
    procedure = check.recorded if mode == "recorded" else check.live
    if procedure is None:
        return _result(check, mode, "skip", 0.0, message=f"no {mode} procedure")
    xfail_reason = target.xfail.get(check.id)
    try:
        if isinstance(target, RecordedTarget):
            with FakeProviderServer() as server:
                verdict = await procedure(RecordedContext(server, target))  # type: ignore[arg-type]
        else:
            assert live is not None
            verdict = await procedure(live)  # type: ignore[arg-type]
    except CheckSkipped as skip:
        outcome_of_skip: Outcome = "model" if isinstance(skip, ModelBehaviour) else "skip"
        seconds = time.monotonic() - started
        return _result(check, mode, outcome_of_skip, seconds, message=str(skip))
    except CheckFailed as failure:
        outcome: Outcome = "xfail" if xfail_reason else "fail"
        quirks = failure.quirks or _scripted(check, mode) or _shown(failure.got, mode)
        message = f"expected {failure.expected}; got {failure.got}{quirk_note(quirks)}"
        if xfail_reason:
            message += f"; xfail: {xfail_reason}"
        return _result(
            check,
            mode,
            outcome,
            time.monotonic() - started,
            message=message,
            expected=failure.expected,
            got=failure.got,
            quirks=quirks,
        )
    except Exception as error:  # an adapter that raises where it should not
        outcome = "xfail" if xfail_reason else "fail"
        text = _text(error, target)
        quirks = _scripted(check, mode) or _shown(text, mode)
        return _result(
            check,
            mode,
            outcome,
            time.monotonic() - started,
            message=f"unexpected {type(error).__name__}: {text[:300]}{quirk_note(quirks)}",
            quirks=quirks,
        )
    seconds = time.monotonic() - started
    if isinstance(verdict, Normalized):
        return _result(
            check, mode, "pass-normalized", seconds, message=verdict.note, quirks=verdict.quirks
        )
    message = f"passes although marked xfail ({xfail_reason})" if xfail_reason else ""
    return _result(check, mode, "pass", seconds, message=message)


_PING = {"messages": [{"role": "user", "content": "Reply with the single word PONG."}]}


async def _status(live: LiveContext, wire: Wire) -> tuple[int, str] | str:
    """The status and a body excerpt of a plain request on ``wire`` (not recorded: it is no
    check's), or what kept it from an HTTP answer (refused, no such host, no answer in
    time)."""
    ctx = LiveContext(evolve(live.target, wire=wire, record_dir=None, recorder=None))
    try:
        raw = await ctx.raw({**_PING, "max_tokens": 16}, name=f"endpoint-{wire}")
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        if isinstance(error, httpx.TimeoutException):
            return f"no answer in {live.target.timeouts.first_byte:g} s"
        return f"{type(error).__name__}: {' '.join(str(error).split())[:120]}"
    return raw.status, " ".join(raw.text.split())[:120]


async def endpoint_verdict(live: LiveContext) -> str:
    """One verdict when the server cannot be checked on the target's wire at all, ``""``
    otherwise: a plain request gets no HTTP answer (nothing listening, a name that does not
    resolve, no answer in time), is refused its key (401, 403), or finds no endpoint (404,
    405; the verdict names the wires whose endpoints do answer)."""
    wire = live.target.wire
    answer = await _status(live, wire)
    url = public_url(_text(ValueError(endpoint_url(live.target.base_url, wire)), live.target))
    if isinstance(answer, str):
        said = _text(ValueError(answer), live.target)
        return (
            f"no answer from POST {url}: {said}; no check ran; is the server running, "
            "and the base URL right?"
        )
    said = _text(ValueError(answer[1]), live.target)
    if answer[0] in (401, 403):
        return (
            f"POST {url} answered {answer[0]} ({said}); no check ran; the server refuses "
            "the key: check --api-key-env (in code: LiveTarget(api_key=…))"
        )
    if answer[0] not in (404, 405):
        return ""
    served = []
    for other in WIRES:
        if other != wire:
            got = await _status(live, other)
            if not isinstance(got, str) and got[0] not in (404, 405):
                served.append(f"{other} ({got[0]})")
    if served:
        where = f"it answers on {', '.join(served)}: run with --wire {served[0].split()[0]}"
    else:
        where = "no other wire's endpoint answers either: is the base URL (or the model) right?"
    return f"no {wire} endpoint: POST {url} answered {answer[0]} ({said}); no check ran; {where}"


async def run_checks(
    target: RecordedTarget | LiveTarget,
    checks: Iterable[Check] | None = None,
    *,
    groups: Sequence[str] | None = None,
    progress: Callable[[CheckResult], object] | None = None,
) -> Report:
    """Run ``checks`` (all of them by default) against ``target``."""
    from ._checks import ALL_CHECKS

    chosen = list(checks) if checks is not None else list(ALL_CHECKS)
    if groups:
        chosen = [c for c in chosen if c.group in groups]
    mode: Mode = "recorded" if isinstance(target, RecordedTarget) else "live"
    chosen = [c for c in chosen if (c.recorded if mode == "recorded" else c.live) is not None]
    label = target.name if isinstance(target, RecordedTarget) else target.label
    if isinstance(target, LiveTarget) and target.name is None:
        label = f"{target.model} @ {_text_url(target)}"
    report = Report(
        label,
        mode,
        started=datetime.now(UTC).isoformat(timespec="seconds"),
        wire=target.wire,
        version=__version__,
        base_url=_text_url(target),
        capabilities=asdict(target.capabilities),
    )
    live = LiveContext(target) if isinstance(target, LiveTarget) else None
    if live is not None:
        report.verdict = await endpoint_verdict(live)
        if report.verdict:
            chosen = []
    for check in chosen:
        if live is not None:
            live.check = check.id  # what its recordings are named after
        result = await run_check(check, target, live)
        report.results.append(result)
        if progress is not None:
            progress(result)
    if isinstance(target, LiveTarget) and report.base_url is not None:
        from ._probe_verify import DECISIVE

        decisive = DECISIVE.get(target.wire, ())
        report.suggestion = probe_suggestion(
            report.results, target.wire, report.base_url, target.model, decisive
        )
    if live is not None and isinstance(target, LiveTarget) and target.record_dir is not None:
        from ._record import save_recordings

        save_recordings(target, live.recordings)
    return report
