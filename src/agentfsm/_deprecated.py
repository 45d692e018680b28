"""Deprecated names: kept working for one release, each access warns.

A renamed public name stays importable from where it was; reaching it emits an
:class:`AgentfsmDeprecationWarning` that names its replacement. CHANGELOG lists every rename.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (PEP 781)
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

__all__ = ["AgentfsmDeprecationWarning", "deprecated_getattr", "warn_renamed"]


class AgentfsmDeprecationWarning(DeprecationWarning):
    """A name that was renamed or removed is still in use."""


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated in favour of ``new``."""
    import warnings  # not at import: ``import agentfsm`` stays light

    warnings.warn(
        f"{old} is deprecated; use {new}",
        AgentfsmDeprecationWarning,
        stacklevel=stacklevel,
    )


def deprecated_getattr(
    module: str, renamed: Mapping[str, tuple[str, Callable[[], object]]]
) -> Callable[[str], object]:
    """A module ``__getattr__`` serving ``renamed``: old name -> (new name, loader)."""

    def __getattr__(name: str) -> object:
        entry = renamed.get(name)
        if entry is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new, load = entry
        warn_renamed(f"{module}.{name}", new)
        return load()

    return __getattr__
