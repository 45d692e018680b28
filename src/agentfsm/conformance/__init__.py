"""The provider conformance kit: does a provider honour what the agent loop needs?

Checks (:data:`ALL_CHECKS`) run in two modes: recorded, on the bytes a scripted
server sends, against any adapter (:class:`RecordedTarget`); and live, against a live URL
through the project's adapters (:class:`LiveTarget`). ``run_corpus`` replays recorded
provider exchanges (by default the corpus that ships with agentfsm) through any adapter and
holds them to the checks' invariants; the pytest plugin turns the checks into a test class
to subclass; ``agentfsm conformance`` runs them from the command line and merges reports
into a matrix. ``replay_vcr`` replays users' own cassettes (VCR.py, HAR) through the adapters.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._bundled import CorpusMissingError, bundled_corpus, index_problems
from ._context import LiveContext, LiveTarget, RecordedContext, RecordedTarget
from ._corpus import corpus_files, run_corpus
from ._exchange import RecordedExchange, Verdict
from ._frames import DONE, chunk, tool_delta
from ._model import (
    Capabilities,
    Check,
    CheckFailed,
    CheckResult,
    CheckSkipped,
    Normalized,
    Report,
)
from ._replay_vcr import VcrDifference, VcrReport, VcrResult, replay_vcr
from ._report import matrix_markdown, report_markdown
from ._runner import run_check, run_checks

if _TYPE_CHECKING:  # offered to the command line only, loaded when it asks (not in __all__)
    from ._context import Wire as Wire
    from ._corpus import corpus_wires as corpus_wires
    from ._hints import probe_suggestion as probe_suggestion
    from ._probe import ProbeError as ProbeError
    from ._probe import probe as probe
    from ._probe_verify import DECISIVE as DECISIVE
    from ._probe_verify import profile_text as profile_text
    from ._probe_verify import verify as verify
    from ._probe_verify import write_settings as write_settings
    from ._replay_vcr import ADAPTERS as ADAPTERS
    from ._report import MARKS as MARKS
    from ._vcr_report import vcr_markdown as vcr_markdown
    from ._vcr_report import vcr_text as vcr_text

__all__ = [
    "ALL_CHECKS",
    "Capabilities",
    "Check",
    "CheckFailed",
    "CheckResult",
    "CheckSkipped",
    "CorpusMissingError",
    "DONE",
    "LiveContext",
    "LiveTarget",
    "Normalized",
    "ProviderConformance",
    "RecordedContext",
    "RecordedExchange",
    "RecordedTarget",
    "Report",
    "VcrDifference",
    "VcrReport",
    "VcrResult",
    "Verdict",
    "bundled_corpus",
    "chunk",
    "corpus_files",
    "index_problems",
    "matrix_markdown",
    "replay_vcr",
    "report_markdown",
    "run_check",
    "run_checks",
    "run_corpus",
    "tool_delta",
]

_OFFERED = {
    "ADAPTERS": "_replay_vcr",
    "DECISIVE": "_probe_verify",
    "MARKS": "_report",
    "ProbeError": "_probe",
    "Wire": "_context",
    "corpus_wires": "_corpus",
    "probe": "_probe",
    "probe_suggestion": "_hints",
    "profile_text": "_probe_verify",
    "vcr_markdown": "_vcr_report",
    "vcr_text": "_vcr_report",
    "verify": "_probe_verify",
    "write_settings": "_probe_verify",
}
"""Names the command line imports from the kit, and the module of each."""


def __getattr__(name: str) -> object:
    # The pytest base class needs pytest; import it only when asked for.
    if name == "ALL_CHECKS":  # imports every check module
        from ._checks import ALL_CHECKS

        return ALL_CHECKS
    if name == "ProviderConformance":
        from ._pytest_plugin import ProviderConformance

        return ProviderConformance
    if name in _OFFERED:
        return getattr(_import_module(f"{__name__}.{_OFFERED[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    # The names load lazily: list them, so that dir() and help() show them.
    return sorted(set(globals()) | set(__all__))
