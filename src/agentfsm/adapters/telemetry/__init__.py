"""OpenTelemetry traces and metrics of agent runs, following the GenAI semantic conventions.

``Agent(instrument=True)`` (or an :class:`Instrumentation`) records one ``invoke_agent``
span per run, a ``chat {model}`` span per chat call and an ``execute_tool {name}`` span per
tool call, the ``gen_ai.client.*`` metrics, and per-run turns and tool calls. Needs the
``otel`` extra; the names load lazily, so the providers work without it. See
``docs/telemetry.md``.
"""

from importlib import import_module as _import_module
from typing import TYPE_CHECKING as _TYPE_CHECKING
from typing import Any as _Any

if _TYPE_CHECKING:
    from ._content import CAPTURE_CONTENT_ENV
    from ._instrumentation import Instrumentation
    from ._run import RunTelemetry

__all__ = ["CAPTURE_CONTENT_ENV", "Instrumentation", "RunTelemetry"]

_WHERE = {
    "CAPTURE_CONTENT_ENV": "_content",
    "Instrumentation": "_instrumentation",
    "RunTelemetry": "_run",
}


def __getattr__(name: str) -> _Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        loaded = _import_module(f"{__name__}.{module}")
    except ModuleNotFoundError as error:
        if not (error.name or "").startswith("opentelemetry"):
            raise
        raise ModuleNotFoundError(
            f"{__name__}.{name} needs the otel extra (pip install 'agentfsm[otel]'): {error}",
            name=error.name,
        ) from error
    return getattr(loaded, name)


def __dir__() -> list[str]:
    # The names load lazily: list them, so that dir() and help() show them.
    return sorted(set(globals()) | set(__all__))
