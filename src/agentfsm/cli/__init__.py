"""The ``agentfsm`` command: run agents, read sessions, draw the machine.

``agentfsm run PROMPT`` · ``agentfsm sessions list|show ID`` · ``agentfsm trace ID`` ·
``agentfsm diagram`` · ``agentfsm conformance``. ``python -m agentfsm`` is the same command,
but imports ``./agentfsm/`` first when run in a workspace: prefer the console script.

Each name loads its module when first used, so importing this package (``agentfsm`` takes
``render_diagram`` and ``render_run`` from it) stays cheap.
"""

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing at start-up
if TYPE_CHECKING:
    from ._app import main
    from ._diagram_cmd import render_diagram
    from ._run_html import render_run
del TYPE_CHECKING

__all__ = ["main", "render_diagram", "render_run"]

_WHERE = {"main": "_app", "render_diagram": "_diagram_cmd", "render_run": "_run_html"}


def __getattr__(name: str) -> object:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)


def __dir__() -> list[str]:
    # The names load lazily: list them, so that dir() and help() show them.
    return sorted(set(globals()) | set(__all__))
