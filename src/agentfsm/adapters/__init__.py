"""Adapters to the outside world (providers, tools, sessions). They import the engine only."""

__all__: list[str] = []
