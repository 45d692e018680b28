"""The kit's vocabulary: checks, outcomes, capabilities, results and reports."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from attrs import asdict, define, field, frozen

if TYPE_CHECKING:
    from ._context import LiveContext, RecordedContext
    from ._exchange import RecordedExchange, Verdict

__all__ = [
    "GROUPS",
    "QUIRK_NOTES",
    "Capabilities",
    "Check",
    "CheckFailed",
    "CheckResult",
    "CheckSkipped",
    "Group",
    "ModelBehaviour",
    "Mode",
    "Normalized",
    "Outcome",
    "Report",
]

Outcome: TypeAlias = Literal["pass", "fail", "pass-normalized", "skip", "xfail", "model"]
Group: TypeAlias = Literal["wire", "answers", "tools", "usage", "errors", "control"]
Mode: TypeAlias = Literal["recorded", "live"]
GROUPS: tuple[Group, ...] = ("wire", "answers", "tools", "usage", "errors", "control")

QUIRK_NOTES = "docs/conformance.md#known-quirks"
"""Where every known quirk a check can cite (``Q1`` …) is described."""


@frozen
class Capabilities:
    """What a provider offers. Checks that need something absent are skipped.

    Defaults are conservative on purpose: a new check that needs a capability a profile
    does not mention degrades to a skip rather than a failure.
    """

    streaming: bool = True
    """Server-sent-event streaming."""
    tools: bool = True
    """Native tool calling."""
    parallel_tools: bool = False
    """Several tool calls in one reply."""
    tool_choice: bool = False
    """``tool_choice`` (named or required)."""
    usage: bool = True
    """Token usage in unstreamed responses."""
    stream_usage: bool = False
    """Token usage at the end of streams."""
    cache_reporting: bool = False
    """Prompt-cache counts in usage."""
    reasoning: bool = False
    """Reasoning text or reasoning token counts."""
    max_tokens: bool = True
    """Honours ``max_tokens`` with a ``length`` finish."""
    context_window: int | None = None
    """The model's window, for overflow checks."""
    silent_truncation: bool = False
    """Known to cut over-long prompts without an error."""

    def has(self, name: str) -> bool:
        value = getattr(self, name, False)
        return bool(value) if not isinstance(value, int) or isinstance(value, bool) else True


class CheckFailed(AssertionError):
    """A check's assertion did not hold; ``quirks`` are the known quirks seen in this run
    (none when nothing points at one)."""

    def __init__(self, expected: str, got: str, *, quirks: tuple[str, ...] = ()) -> None:
        super().__init__(f"expected {expected}; got {got}")
        self.expected = expected
        self.got = got
        self.quirks = quirks


class CheckSkipped(Exception):
    """The check cannot run here (the message says why)."""


class ModelBehaviour(CheckSkipped):
    """The protocol held, and the model (not the server) did not do what the check needs: a
    small model that answers a tool request in text, invents arguments, stops early. The
    outcome is ``model``, never counted against the server; the message starts with
    ``model behaviour:`` and says what was measured (the prompt tokens that show the tools
    reached the prompt, the answer the model gave)."""

    def __init__(self, what: str) -> None:
        super().__init__(f"model behaviour: {what}")


@frozen
class Normalized:
    """The wire deviated but the adapter absorbed it."""

    quirks: tuple[str, ...]
    """Which known quirks were seen (``Q5`` …)."""
    note: str
    """What deviated."""


CheckFn = Callable[[Any], Awaitable[Normalized | None]]


@frozen
class Check:
    """One conformance check."""

    id: str
    """Short id, e.g. ``T3``."""
    name: str
    """Dotted name, e.g. ``tools.no_index``."""
    group: Group
    sends: str
    """What the check sends (or, recorded, what the server answers)."""
    asserts: str
    """What must hold."""
    needs: tuple[str, ...] = ()
    """Capabilities required (names of :class:`Capabilities` fields)."""
    quirks: tuple[str, ...] = ()
    """Known quirks this check can observe. A live result carries only the ones its run saw
    (a :class:`CheckFailed` or :class:`Normalized` names them; a plain error names none); in
    recorded mode the scripted bytes are these quirks, so a failure that names none has them."""
    recorded: Callable[[RecordedContext], Awaitable[Normalized | None]] | None = None
    """The recorded-mode procedure (scripted bytes), if the check has one."""
    live: Callable[[LiveContext], Awaitable[Normalized | None]] | None = None
    """The live-mode procedure, if the check has one."""
    corpus: Callable[[RecordedExchange], Verdict | None] | None = None
    """The check's invariant on one exchange of a recorded corpus (see :mod:`.exchange`), if
    it has one: a verdict, or ``None`` when the exchange does not exercise the check."""
    responses: tuple[Mode, ...] = ()
    """The modes whose procedure speaks the OpenAI Responses wire too (every procedure
    speaks Chat Completions and Messages). A procedure that only calls the adapter speaks
    every wire; one that scripts a wire's bytes or sends raw bodies in a wire's shape knows
    the wires it was written for. On the Responses wire the others are skipped."""

    @property
    def modes(self) -> tuple[Mode, ...]:
        modes: list[Mode] = []
        if self.recorded is not None:
            modes.append("recorded")
        if self.live is not None:
            modes.append("live")
        return tuple(modes)


@frozen
class CheckResult:
    """How one check went."""

    check: str
    name: str
    group: Group
    mode: Mode
    outcome: Outcome
    message: str = ""
    expected: str | None = None
    got: str | None = None
    quirks: tuple[str, ...] = ()
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["quirks"] = list(self.quirks)
        return data


@define
class Report:
    """All the results of one run of the kit against one target."""

    target: str
    """The provider, model and URL (never a key)."""
    mode: Mode
    results: list[CheckResult] = field(factory=list)
    started: str = ""
    wire: str = "openai-chat"
    version: str = ""
    """The agentfsm version that ran the checks."""
    base_url: str | None = None
    """The live URL checked (never a key); ``None`` in recorded mode."""
    capabilities: dict[str, Any] = field(factory=dict)
    """The capabilities declared for the run (the fields of :class:`Capabilities`)."""
    suggestion: str = ""
    """What to run next when the failures point at a quirk profile (``agentfsm conformance
    probe …``, with why); empty otherwise."""
    verdict: str = ""
    """Why no check ran, when the server cannot be checked on this wire at all (nothing
    answers, it refuses the key, or it has no such endpoint: one verdict saying so, instead
    of a failure per check); empty otherwise."""

    @property
    def failed(self) -> list[CheckResult]:
        return [r for r in self.results if r.outcome == "fail"]

    @property
    def ok(self) -> bool:
        """No check failed, and the server could be checked at all (no :attr:`verdict`)."""
        return not self.failed and not self.verdict

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for result in self.results:
            out[result.outcome] = out.get(result.outcome, 0) + 1
        return out

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "mode": self.mode,
            "wire": self.wire,
            "started": self.started,
            "agentfsm": self.version,
            "base_url": self.base_url,
            "capabilities": dict(self.capabilities),
            "suggestion": self.suggestion,
            **({"verdict": self.verdict} if self.verdict else {}),
            "counts": self.counts(),
            "results": [r.as_dict() for r in self.results],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        results = [
            CheckResult(**{**r, "quirks": tuple(r.get("quirks", ()))})
            for r in data.get("results", [])
        ]
        return cls(
            target=data["target"],
            mode=data.get("mode", "live"),
            results=results,
            started=data.get("started", ""),
            wire=data.get("wire", "openai-chat"),
            version=str(data.get("agentfsm", "")),
            base_url=data.get("base_url"),
            capabilities=dict(data.get("capabilities") or {}),
            suggestion=str(data.get("suggestion", "")),
            verdict=str(data.get("verdict", "")),
        )
