from __future__ import annotations

# Imported at collection on purpose: hypothesis's pytest plugin otherwise imports it lazily
# in the terminal summary, where CPython 3.11.7's AST validator can raise a spurious
# "AST constructor recursion depth mismatch" while pytest rewrites its modules.
import hypothesis  # noqa: F401
import pytest

from agentfsm.engine.stepper import StepperKind

from .helpers import Recorder


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(params=["compiled", "statechart"])
def stepper(request: pytest.FixtureRequest) -> StepperKind:
    """Run a test on both machine drivers: they must behave the same."""
    kind: StepperKind = request.param
    return kind
