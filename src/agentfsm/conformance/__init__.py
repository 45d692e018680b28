"""The provider conformance kit: does a provider honour what the agent loop needs?

Checks (``agentfsm.conformance.checks``) run on recorded bytes against any adapter (adapter
mode) or against a live URL through the project's adapters (endpoint mode); ``run_corpus``
replays the recorded provider exchanges of ``shared/wire`` through any adapter; the pytest
plugin turns them into a test class to subclass; ``agentfsm conformance`` runs them from
the command line and merges reports into a matrix.
"""

from typing import Any

from .context import AdapterTarget, EndpointTarget, LiveContext, RecordedContext
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
    "AdapterTarget",
    "Capabilities",
    "Check",
    "CheckFailed",
    "CheckResult",
    "CheckSkipped",
    "EndpointTarget",
    "LiveContext",
    "Normalized",
    "ProviderConformance",
    "RecordedContext",
    "RecordedExchange",
    "Report",
    "Verdict",
    "corpus_files",
    "matrix_markdown",
    "report_markdown",
    "run_check",
    "run_checks",
    "run_corpus",
]


def __getattr__(name: str) -> Any:
    # The pytest base class needs pytest; import it only when asked for.
    if name == "ProviderConformance":
        from .pytest_plugin import ProviderConformance

        return ProviderConformance
    raise AttributeError(name)
