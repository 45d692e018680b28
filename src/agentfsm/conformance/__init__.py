"""The provider conformance kit: does a provider honour what the agent loop needs?

Checks (``agentfsm.conformance.checks``) run in two modes: recorded, on the bytes a scripted
server sends, against any adapter (:class:`RecordedTarget`); and live, against a live URL
through the project's adapters (:class:`LiveTarget`). ``run_corpus`` replays recorded
provider exchanges (by default the corpus that ships with agentfsm) through any adapter and
holds them to the checks' invariants; the pytest plugin turns the checks into a test class
to subclass; ``agentfsm conformance`` runs them from the command line and merges reports
into a matrix. ``replay_vcr`` replays users' own VCR.py cassettes through the adapters.
"""

from agentfsm._deprecated import warn_renamed as _warn_renamed

from ._replay_vcr import VcrReport, VcrResult, replay_vcr
from .context import LiveContext, LiveTarget, RecordedContext, RecordedTarget
from .corpus import corpus_files, run_corpus
from .exchange import RecordedExchange, Verdict
from .model import (
    Capabilities,
    Check,
    CheckFailed,
    CheckResult,
    CheckSkipped,
    Normalized,
    Report,
)
from .report import matrix_markdown, report_markdown
from .runner import run_check, run_checks

__all__ = [
    "Capabilities",
    "Check",
    "CheckFailed",
    "CheckResult",
    "CheckSkipped",
    "LiveContext",
    "LiveTarget",
    "Normalized",
    "ProviderConformance",
    "RecordedContext",
    "RecordedExchange",
    "RecordedTarget",
    "Report",
    "VcrReport",
    "VcrResult",
    "Verdict",
    "corpus_files",
    "matrix_markdown",
    "replay_vcr",
    "report_markdown",
    "run_check",
    "run_checks",
    "run_corpus",
]

_RENAMED = {"AdapterTarget": "RecordedTarget", "EndpointTarget": "LiveTarget"}
"""Deprecated names (the modes are called recorded and live): old name -> new name."""


def __getattr__(name: str) -> object:
    # The pytest base class needs pytest; import it only when asked for.
    if name == "ProviderConformance":
        from .pytest_plugin import ProviderConformance

        return ProviderConformance
    if name in _RENAMED:
        new = _RENAMED[name]
        _warn_renamed(f"{__name__}.{name}", f"{__name__}.{new}")
        return globals()[new]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
