"""The kit's public names: exact ``__all__`` lists, one vocabulary for the modes."""

from __future__ import annotations

import importlib
import types

import pytest

import agentfsm.conformance
from agentfsm.conformance import LiveTarget, RecordedTarget

PACKAGES = (
    "agentfsm.conformance",
    "agentfsm.conformance._checks",
    "agentfsm.conformance._checks.tools",
)


@pytest.mark.parametrize("name", PACKAGES)
def test_all_lists_exactly_the_public_names_sorted(name: str) -> None:
    package = importlib.import_module(name)
    assert package.__all__ == sorted(set(package.__all__))
    public = {
        attribute
        for attribute, value in vars(package).items()
        if not attribute.startswith("_") and not isinstance(value, types.ModuleType)
    }
    lazy = {"ALL_CHECKS", "ProviderConformance"} if name == "agentfsm.conformance" else set()
    assert public | lazy == set(package.__all__)
    for attribute in package.__all__:
        assert getattr(package, attribute) is not None


def test_the_modes_are_recorded_and_live() -> None:
    from agentfsm.conformance._checks import ALL_CHECKS

    assert {mode for check in ALL_CHECKS for mode in check.modes} == {"recorded", "live"}
    vocabulary = " ".join(
        filter(None, (agentfsm.conformance.__doc__, RecordedTarget.__doc__, LiveTarget.__doc__))
    ).lower()
    assert "adapter mode" not in vocabulary
    assert "endpoint mode" not in vocabulary


@pytest.mark.parametrize("old", ["AdapterTarget", "EndpointTarget"])
def test_the_old_target_names_are_gone(old: str) -> None:
    with pytest.raises(AttributeError):
        getattr(agentfsm.conformance, old)
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("agentfsm.conformance.context")


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError):
        _ = agentfsm.conformance.NoSuchThing
