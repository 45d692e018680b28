from __future__ import annotations

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
