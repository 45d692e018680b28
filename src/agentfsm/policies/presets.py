"""Ready-made policy sets: :func:`minimal` (the core loop exactly) and :func:`coding_agent`
(the coding agent's policies)."""

from ._presets import coding_agent, minimal

__all__ = ["coding_agent", "minimal"]
