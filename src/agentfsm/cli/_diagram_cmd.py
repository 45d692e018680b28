"""Render the declared machine for docs: Mermaid (deterministic), DOT, SVG or PNG.

The layout runs top to bottom by default (``direction="TB"``: about 700 px wide, readable
at README width) or left to right (``"LR"``: wide and flat). Mermaid needs nothing extra.
DOT needs ``pydot`` (extra ``diagrams``); SVG and PNG also need Graphviz's ``dot`` program
on ``PATH``.
"""

from __future__ import annotations

import html
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal, TypeAlias, overload

from agentfsm.engine import AgentLoopMachine, PolicySet, policy_name

__all__ = [
    "DiagramDirection",
    "DiagramFormat",
    "DiagramUnavailable",
    "guard_feeders",
    "render_diagram",
    "write_diagram",
]

DiagramFormat: TypeAlias = Literal["mermaid", "dot", "svg", "png"]
DiagramDirection: TypeAlias = Literal["TB", "LR"]
"""The layout: ``"TB"`` top to bottom, ``"LR"`` left to right."""
_DIRECTIONS: tuple[DiagramDirection, ...] = ("TB", "LR")


class DiagramUnavailable(RuntimeError):
    """A format needs a tool that is not installed; the message says which and how."""


def _dot_source(machine: type[Any]) -> str:
    try:
        import pydot  # noqa: F401
    except ImportError as exc:
        raise DiagramUnavailable(
            "DOT, SVG and PNG diagrams need pydot: pip install 'agentfsm[diagrams]'"
        ) from exc
    return _stable_ids(str(format(machine, "dot")))


_OBJECT_ID = re.compile(r"(?<=_)\d{6,}(?=\b|_)")


def _stable_ids(source: str) -> str:
    """Replace the object ids python-statemachine embeds in DOT node names with ordinals.

    They change from one process to the next, which would make every rendered SVG differ.
    """
    ordinals: dict[str, str] = {}

    def ordinal(match: re.Match[str]) -> str:
        return ordinals.setdefault(match.group(0), str(len(ordinals)))

    return _OBJECT_ID.sub(ordinal, source)


def guard_feeders(policies: Sequence[object]) -> dict[str, list[str]]:
    """For each guard, the names of the policies whose decisions it reads."""
    by_hook = PolicySet(policies).by_hook
    stoppers = [p for p in by_hook["check_turn"] if getattr(p, "can_stop", True)]
    feeders: dict[str, Sequence[Any]] = {
        "policy_stop": stoppers,
        "gate_retry": by_hook["check_final"],
        "compression_needed": by_hook["should_compress"],
        "overflow_recoverable": by_hook["should_compress"],
        "last_turn": by_hook["turn_budget"],
    }
    return {guard: [policy_name(p) for p in ps] for guard, ps in feeders.items() if ps}


_MERMAID_DIRECTION = re.compile(r"^(\s*)direction \w+$", re.MULTILINE)
_DOT_RANKDIR = re.compile(r"^rankdir=\w+;$", re.MULTILINE)


def _check_direction(direction: str) -> None:
    if direction not in _DIRECTIONS:
        raise ValueError(f"unknown diagram direction {direction!r}; expected TB or LR")


def _mermaid_direction(text: str, direction: DiagramDirection) -> str:
    if _MERMAID_DIRECTION.search(text):
        return _MERMAID_DIRECTION.sub(rf"\1direction {direction}", text, count=1)
    head, _, rest = text.partition("\n")
    return f"{head}\n    direction {direction}\n{rest}"


def _dot_direction(source: str, direction: DiagramDirection) -> str:
    if _DOT_RANKDIR.search(source):
        return _DOT_RANKDIR.sub(f"rankdir={direction};", source, count=1)
    head, _, rest = source.partition("\n")
    return f"{head}\nrankdir={direction};\n{rest}"


_GUARDS = re.compile(r"\[(!?\w+(?:, !?\w+)*)\]")


def _annotate(source: str, policies: Sequence[object], *, escape: bool, joiner: str) -> str:
    feeders = guard_feeders(policies)

    def label(match: re.Match[str]) -> str:
        parts = []
        for token in match.group(1).split(", "):
            names = feeders.get(token.lstrip("!"))
            if names:
                shown = [html.escape(n) if escape else n for n in names]
                token = f"{token} ← {joiner.join(shown)}"
            parts.append(token)
        return "[" + ", ".join(parts) + "]"

    return _GUARDS.sub(label, source)


@overload
def render_diagram(
    fmt: Literal["mermaid", "dot"] = "mermaid",
    machine: type[Any] = AgentLoopMachine,
    *,
    policies: Sequence[object] | None = None,
    direction: DiagramDirection = "TB",
    out: str | Path | None = None,
) -> str: ...


@overload
def render_diagram(
    fmt: Literal["svg", "png"],
    machine: type[Any] = AgentLoopMachine,
    *,
    policies: Sequence[object] | None = None,
    direction: DiagramDirection = "TB",
    out: str | Path | None = None,
) -> bytes: ...


@overload
def render_diagram(
    fmt: DiagramFormat,
    machine: type[Any] = AgentLoopMachine,
    *,
    policies: Sequence[object] | None = None,
    direction: DiagramDirection = "TB",
    out: str | Path | None = None,
) -> str | bytes: ...


def render_diagram(
    fmt: DiagramFormat = "mermaid",
    machine: type[Any] = AgentLoopMachine,
    *,
    policies: Sequence[object] | None = None,
    direction: DiagramDirection = "TB",
    out: str | Path | None = None,
) -> str | bytes:
    """Render ``machine`` (the agent loop by default); text for mermaid/dot, bytes for svg/png.

    The return type follows a literal ``fmt``: ``str`` for ``"mermaid"`` and ``"dot"``,
    ``bytes`` for ``"svg"`` and ``"png"`` (an SVG is UTF-8 bytes: ``.decode()`` it for text,
    or give ``out``), ``str | bytes`` when the format is only known at run time.

    With ``out``, the rendering is also written to that file (bytes as they are, text as
    UTF-8) and returned as well.

    With ``policies``, each guard on an edge is annotated with the policies that feed it,
    e.g. ``[policy_stop ← stop_when(tool_called('submit'))]``; several policies are
    separated by commas, which DOT, SVG and PNG keep at the end of each wrapped line.

    ``direction`` lays the states out top to bottom (``"TB"``, the default: narrow enough
    to read at README width) or left to right (``"LR"``).
    """
    rendered = _render(fmt, machine, policies, direction)
    if out is not None:
        target = Path(out)
        if isinstance(rendered, bytes):
            target.write_bytes(rendered)
        else:
            target.write_text(rendered, "utf-8")
    return rendered


def _render(
    fmt: DiagramFormat,
    machine: type[Any],
    policies: Sequence[object] | None,
    direction: DiagramDirection,
) -> str | bytes:
    _check_direction(direction)
    if fmt == "mermaid":
        text = _mermaid_direction(str(format(machine, "mermaid")), direction)
        return _annotate(text, policies, escape=False, joiner=", ") if policies else text
    if fmt == "dot":
        source = _dot_direction(_dot_source(machine), direction)
        return _annotate(source, policies, escape=True, joiner=",<br/>") if policies else source
    if fmt in ("svg", "png"):
        source = _dot_direction(_dot_source(machine), direction)
        if policies:
            source = _annotate(source, policies, escape=True, joiner=",<br/>")
        if shutil.which("dot") is None:
            raise DiagramUnavailable(
                f"{fmt.upper()} diagrams need Graphviz's 'dot' program "
                "(Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz)"
            )
        from statemachine.contrib.diagram.graphviz import run_graphviz

        data: bytes = run_graphviz(source, fmt)
        return data
    raise ValueError(f"unknown diagram format {fmt!r}; expected mermaid, dot, svg or png")


def write_diagram(
    path: str | Path,
    fmt: DiagramFormat | None = None,
    machine: type[Any] = AgentLoopMachine,
    *,
    policies: Sequence[object] | None = None,
    direction: DiagramDirection = "TB",
) -> Path:
    """Render into ``path``; the format defaults to the file's suffix (``.mmd`` is Mermaid)."""
    target = Path(path)
    if fmt is None:
        suffix = target.suffix.lower().lstrip(".")
        fmt = "mermaid" if suffix in ("mmd", "mermaid", "") else suffix  # type: ignore[assignment]
    assert fmt is not None
    rendered = render_diagram(fmt, machine, policies=policies, direction=direction)
    if isinstance(rendered, bytes):
        target.write_bytes(rendered)
    else:
        target.write_text(rendered if rendered.endswith("\n") else rendered + "\n", "utf-8")
    return target
