"""The provider conformance kit: does a provider honour what the agent loop needs?

Checks (:data:`ALL_CHECKS`) run in two modes: recorded, on the bytes a scripted
server sends, against any adapter (:class:`RecordedTarget`); and live, against a live URL
through the project's adapters (:class:`LiveTarget`). ``run_corpus`` replays recorded
provider exchanges (by default the corpus that ships with agentfsm) through any adapter and
holds them to the checks' invariants; the pytest plugin turns the checks into a test class
to subclass; ``agentfsm conformance`` runs them from the command line and merges reports
into a matrix. ``replay_vcr`` replays users' own cassettes (VCR.py, HAR) through the adapters.
"""

from agentfsm._deprecated import package_getattr as _package_getattr

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

_deprecated = _package_getattr(__name__)


def __getattr__(name: str) -> object:
    # The pytest base class needs pytest; import it only when asked for.
    if name == "ALL_CHECKS":  # imports every check module
        from ._checks import ALL_CHECKS

        return ALL_CHECKS
    if name == "ProviderConformance":
        from ._pytest_plugin import ProviderConformance

        return ProviderConformance
    return _deprecated(name)
