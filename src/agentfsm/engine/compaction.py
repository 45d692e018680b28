"""Deprecated: history compression lives in :mod:`agentfsm.engine.compression`."""

from typing import Any

__all__: list[str] = []


def __getattr__(name: str) -> Any:
    from agentfsm._deprecated import warn_renamed

    from . import compression

    if name.startswith("_") or not hasattr(compression, name):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warn_renamed(f"agentfsm.engine.compaction.{name}", f"agentfsm.engine.compression.{name}")
    return getattr(compression, name)
