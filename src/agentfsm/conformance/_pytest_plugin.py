"""The pytest side of the kit: subclass :class:`ProviderConformance` in your own suite.

Registered as a ``pytest11`` entry point, so installing agentfsm is enough::

    from agentfsm.conformance import Capabilities, ProviderConformance

    class TestMyAdapter(ProviderConformance):
        wire = "openai-chat"
        capabilities = Capabilities(parallel_tools=True, stream_usage=True)

        def adapter(self, base_url):
            return MyChat(base_url=base_url)

Every check then runs as its own test (``test_conformance[recorded-T3-tools.no_index]``),
and, with ``corpus = "path/to/recordings"``, once more on those recorded exchanges;
checks the capabilities rule out are skipped, known quirks listed in ``xfail`` (each with a
reason) are expected failures, and a subclass that overrides a test instead of declaring
an xfail reason fails ``test_no_silent_overrides``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import pytest

from agentfsm.engine import ChatFn

from ._context import LiveContext, LiveTarget, RecordedTarget, Wire
from ._model import Capabilities, Check, CheckResult
from ._runner import run_check

__all__ = ["ProviderConformance", "pytest_generate_tests"]

_CORPUS_RESULTS: dict[type, dict[str, CheckResult]] = {}


class ProviderConformance:
    """Base class of a provider's conformance tests.

    Override :meth:`adapter` to run the recorded mode (the checks' scripted server is given
    as the base URL; with ``corpus``, the recorded corpus too) and/or :meth:`endpoint` to
    run the live mode (a :class:`LiveTarget`: a real URL). Declare known failures in
    ``xfail = {"T3": "why, with a link"}``; a reason is required.
    """

    wire: ClassVar[Wire] = "openai-chat"
    capabilities: ClassVar[Capabilities] = Capabilities()
    xfail: ClassVar[Mapping[str, str]] = {}
    corpus: ClassVar[str | Path | None] = None
    """A folder of recorded exchanges (``--record`` output, or the bundled corpus:
    ``agentfsm.conformance.bundled_corpus()``) to replay."""

    def adapter(self, base_url: str) -> ChatFn:
        """The adapter under test, talking to ``base_url``."""
        raise NotImplementedError("override adapter() to run the recorded checks")

    def endpoint(self) -> LiveTarget | None:
        """The live endpoint to check in live mode, or ``None``."""
        return None

    @classmethod
    def _modes(cls) -> list[str]:
        modes = []
        if cls.adapter is not ProviderConformance.adapter:
            modes.append("recorded")
        if cls.endpoint is not ProviderConformance.endpoint:
            modes.append("live")
        if cls.corpus is not None and "recorded" in modes:
            modes.append("corpus")
        return modes

    def _target(self) -> RecordedTarget:
        return RecordedTarget(
            self.adapter, self.wire, self.capabilities, type(self).__name__, dict(self.xfail)
        )

    def _corpus_result(self, check: Check) -> CheckResult:
        cls = type(self)
        if cls not in _CORPUS_RESULTS:  # the corpus runs once per class, not once per check
            from ._corpus import run_corpus

            assert cls.corpus is not None
            report = asyncio.run(run_corpus(self._target(), Path(cls.corpus)))
            _CORPUS_RESULTS[cls] = {r.check: r for r in report.results}
        return _CORPUS_RESULTS[cls][check.id]

    def test_conformance(self, conformance_check: Check, conformance_mode: str) -> None:
        if conformance_mode == "corpus":
            result = self._corpus_result(conformance_check)
        elif conformance_mode == "recorded":
            result = asyncio.run(run_check(conformance_check, self._target()))
        else:
            endpoint = self.endpoint()
            if endpoint is None:
                pytest.skip("endpoint() returned None")
            result = asyncio.run(run_check(conformance_check, endpoint, LiveContext(endpoint)))
        if result.outcome == "skip":
            pytest.skip(result.message)
        if result.outcome == "xfail":
            pytest.xfail(result.message)
        if result.outcome == "fail":
            pytest.fail(f"{result.check} {result.name}: {result.message}", pytrace=False)

    def test_no_silent_overrides(self) -> None:
        """Known failures are declared with a reason, never by overriding a check."""
        cls = type(self)
        if cls.test_conformance is not ProviderConformance.test_conformance:
            pytest.fail("do not override test_conformance; declare xfail = {check_id: reason}")
        from ._checks import ALL_CHECKS

        known = {check.id for check in ALL_CHECKS}
        for check_id, reason in self.xfail.items():
            if check_id not in known:
                pytest.fail(f"xfail names an unknown check {check_id!r}")
            if not isinstance(reason, str) or not reason.strip():
                pytest.fail(f"xfail[{check_id!r}] needs a reason")


def pytest_generate_tests(metafunc: Any) -> None:
    """Parametrize ``test_conformance`` of :class:`ProviderConformance` subclasses."""
    cls = metafunc.cls
    if cls is None or not issubclass(cls, ProviderConformance):
        return
    if "conformance_check" not in metafunc.fixturenames:
        return
    from ._checks import ALL_CHECKS

    params = []
    ids = []
    for mode in cls._modes():
        for check in ALL_CHECKS:
            if mode == "recorded" and check.recorded is None:
                continue
            if mode == "live" and check.live is None:
                continue
            params.append((check, mode))
            ids.append(f"{mode}-{check.id}-{check.name}")
    metafunc.parametrize(("conformance_check", "conformance_mode"), params, ids=ids)
