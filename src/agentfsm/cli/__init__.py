"""The ``agentfsm`` command: run agents, read sessions, draw the machine.

``agentfsm run PROMPT`` · ``agentfsm sessions list|show ID`` · ``agentfsm trace ID`` ·
``agentfsm diagram`` · ``agentfsm conformance``. ``python -m agentfsm`` is the same command,
but imports ``./agentfsm/`` first when run in a workspace: prefer the console script.

:func:`main` loads the commands when first used, so importing a module of this package
(``agentfsm`` imports :mod:`~agentfsm.cli._diagram_cmd` for ``render_diagram``) stays cheap.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up
if TYPE_CHECKING:
    from ._app import main
del TYPE_CHECKING

__all__ = ["main"]


def __getattr__(name: str) -> object:
    if name == "main":
        from ._app import main

        return main
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
