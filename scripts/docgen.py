#!/usr/bin/env python3
"""The tables of ``docs/engine.md``, rendered from the code they describe.

Four Markdown tables are generated, each between ``<!-- BEGIN GENERATED: <name> -->`` and
``<!-- END GENERATED: <name> -->`` in the page:

- ``states``: every state of :class:`~agentfsm.engine._machine.AgentLoopMachine`, the first
  paragraph of the docstring of the runner method that performs its effect
  (``LoopRunner._<state id>``), and the events that leave it;
- ``transitions``: one row per declared transition, in declaration order, with its guards;
- ``guards``: every guard the machine names, with the first paragraph of its
  :class:`~agentfsm.engine._machine.LoopGuards` docstring;
- ``events``: every event class of :mod:`agentfsm.engine._events` (an attrs class with a
  ``type`` field), its payload fields and the first paragraph of its docstring, which states
  the event's order guarantee.

Nothing about the states, guards or events is written here: a state, transition, guard or
event added to the code shows up in the tables at the next ``make diagrams``, and
``tests/engine/test_docgen.py`` fails until then. A runner effect, guard or event without a
docstring is an error (:class:`DocgenError`).

``python scripts/docgen.py`` (what ``make diagrams`` runs) regenerates what is rendered from
the machine:

- ``diagrams [OUTDIR]`` writes ``agent_loop.mmd`` and ``agent_loop.svg`` (default
  ``diagrams``), laid out top to bottom so that the SVG reads at README width (about
  700 px); a lone OUTDIR that is not a subcommand does the same.
- ``docs [--check] [PAGE]`` rewrites the generated tables of ``docs/engine.md`` (or PAGE);
  with ``--check`` it writes nothing and exits 1 when the page is stale.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

# A build tool of this repository, not part of the package: it documents the engine's
# internals (the runner's effects, the guards, the event classes) where they are defined.
import agentfsm.engine._events as events_module
from agentfsm.cli._diagram_cmd import DiagramDirection, DiagramUnavailable, write_diagram
from agentfsm.engine import AgentLoopMachine
from agentfsm.engine._machine import LoopGuards
from agentfsm.engine._runner import LoopRunner

__all__ = [
    "SECTIONS",
    "DocgenError",
    "EventDoc",
    "TransitionDoc",
    "event_docs",
    "guard_names",
    "main",
    "render_events",
    "render_guards",
    "render_sections",
    "render_states",
    "render_transitions",
    "transition_docs",
    "update_markdown",
    "write_docs",
]


class DocgenError(RuntimeError):
    """The code lacks what a generated table needs (a docstring, a method), or the page
    lacks a section's markers."""


@dataclass(frozen=True)
class TransitionDoc:
    """One declared transition, as the tables show it."""

    source: str
    event: str
    guards: tuple[tuple[str, bool], ...]
    """``(guard name, value it must have)``: ``True`` for ``cond``, ``False`` for ``unless``."""
    target: str


@dataclass(frozen=True)
class EventDoc:
    """One event class, as the events table shows it."""

    type: str
    cls: Any
    """The event class."""
    payload: tuple[str, ...]
    doc: str


# -- reading the code ------------------------------------------------------------------------


def first_paragraph(doc: str | None, owner: str) -> str:
    """The first paragraph of a docstring, on one line; :class:`DocgenError` when missing."""
    if doc is None or not doc.strip():
        raise DocgenError(f"{owner} has no docstring; the generated docs need one")
    paragraph = re.split(r"\n\s*\n", doc.strip(), maxsplit=1)[0]
    return " ".join(line.strip() for line in paragraph.splitlines())


def transition_docs(machine: type[Any] = AgentLoopMachine) -> list[TransitionDoc]:
    """Every declared transition, state by state, in declaration order."""
    rows = []
    for state in machine.states:
        for transition in state.transitions:
            guards = []
            for spec in transition.cond:
                name = spec.func
                if not isinstance(name, str) or not name.isidentifier():
                    raise DocgenError(
                        f"{machine.__name__}.{state.id}: guard {name!r} is not a plain name"
                    )
                guards.append((name, bool(spec.expected_value)))
            for event in transition.events:
                rows.append(
                    TransitionDoc(state.id, str(event.id), tuple(guards), transition.target.id)
                )
    return rows


def guard_names(machine: type[Any] = AgentLoopMachine) -> list[str]:
    """The guards the machine names, in order of first use."""
    names: dict[str, None] = {}
    for row in transition_docs(machine):
        for name, _ in row.guards:
            names.setdefault(name, None)
    return list(names)


def effect_doc(state_id: str, runner: type[Any] = LoopRunner) -> str:
    """The first docstring paragraph of ``runner._<state_id>``, the state's effect."""
    method = getattr(runner, f"_{state_id}", None)
    if method is None:
        raise DocgenError(
            f"{runner.__name__} has no method _{state_id} (the effect of state {state_id!r})"
        )
    return first_paragraph(method.__doc__, f"{runner.__name__}._{state_id}")


def event_docs(module: ModuleType = events_module) -> list[EventDoc]:
    """Every event class of ``module`` (an attrs class with a ``type`` field), in the order
    the module defines them."""
    docs = []
    for cls in vars(module).values():
        fields = getattr(cls, "__attrs_attrs__", None)  # set on every attrs class
        if not isinstance(cls, type) or cls.__module__ != module.__name__ or fields is None:
            continue
        type_field = next((f for f in fields if f.name == "type"), None)
        if type_field is None or not isinstance(type_field.default, str):
            continue
        payload = tuple(f.name for f in fields if f.name != "type")
        doc = first_paragraph(cls.__doc__, f"{module.__name__}.{cls.__name__}")
        docs.append(EventDoc(type_field.default, cls, payload, doc))
    return docs


# -- rendering ---------------------------------------------------------------------------------

_ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]+\.)?([^`]+)`")


def md(text: str) -> str:
    """Docstring text (reStructuredText inline markup) as the text of a Markdown cell."""
    text = _ROLE.sub(r"`\1`", text).replace("``", "`")
    return text.replace("|", "\\|")


def code(name: str) -> str:
    return f"`{name}`"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def render_guard_list(guards: tuple[tuple[str, bool], ...]) -> str:
    if not guards:
        return "—"
    held = [code(name) for name, expected in guards if expected]
    unless = [code(name) for name, expected in guards if not expected]
    parts = [", ".join(held)] if held else []
    if unless:
        parts.append("unless " + ", ".join(unless))
    return ", ".join(parts)


def render_states(machine: type[Any] = AgentLoopMachine, runner: type[Any] = LoopRunner) -> str:
    """The state table: kind, the runner's effect there, the events that leave it."""
    leaving: dict[str, dict[str, None]] = {}
    for row in transition_docs(machine):
        leaving.setdefault(row.source, {}).setdefault(row.event, None)
    rows = []
    for state in machine.states:
        kind = "initial" if state.initial else "final" if state.final else ""
        events = " / ".join(code(e) for e in leaving.get(state.id, {})) or "—"
        rows.append((code(state.id), kind, md(effect_doc(state.id, runner)), events))
    return table(("state", "kind", "the runner's effect there", "leaves with"), rows)


def render_transitions(machine: type[Any] = AgentLoopMachine) -> str:
    """The transition table, one row per declared transition in declaration order."""
    final = {state.id for state in machine.states if state.final}
    rows = []
    for row in transition_docs(machine):
        target = code(row.target) + (" (final)" if row.target in final else "")
        rows.append((code(row.source), code(row.event), render_guard_list(row.guards), target))
    return table(("from", "event", "guards", "to"), rows)


def render_guards(machine: type[Any] = AgentLoopMachine, guards: type[Any] = LoopGuards) -> str:
    """The guard table: what each guard the machine names checks, and where it is read."""
    used_on: dict[str, dict[str, None]] = {}
    for row in transition_docs(machine):
        for name, _ in row.guards:
            used_on.setdefault(name, {}).setdefault(f"`{row.event}` from `{row.source}`", None)
    rows = []
    for name in guard_names(machine):
        method = getattr(guards, name, None)
        if method is None:
            raise DocgenError(f"{guards.__name__} has no method {name} (a guard of the machine)")
        doc = first_paragraph(method.__doc__, f"{guards.__name__}.{name}")
        rows.append((code(name), md(doc), "; ".join(used_on[name])))
    return table(("guard", "holds when", "read on"), rows)


def render_events(module: ModuleType = events_module) -> str:
    """The event table: type, payload fields, order guarantee (the class docstring)."""
    rows = [
        (code(e.type), ", ".join(code(f) for f in e.payload) or "—", md(e.doc))
        for e in event_docs(module)
    ]
    return table(("event", "payload", "order guarantee"), rows)


SECTIONS: dict[str, Callable[[], str]] = {
    "states": render_states,
    "transitions": render_transitions,
    "guards": render_guards,
    "events": render_events,
}
"""The generated sections of ``docs/engine.md``, by marker name."""


def render_sections() -> dict[str, str]:
    """Every section's Markdown, rendered from the code now."""
    return {name: render() for name, render in SECTIONS.items()}


# -- the page ----------------------------------------------------------------------------------

_BLOCK = re.compile(
    r"(?P<begin><!-- BEGIN GENERATED: (?P<name>[\w-]+) -->\n)"
    r"(?P<body>.*?)"
    r"(?P<end><!-- END GENERATED: (?P=name) -->)",
    re.S,
)
_BEGIN = re.compile(r"<!-- BEGIN GENERATED: ([\w-]+) -->")


def update_markdown(text: str, sections: Mapping[str, str]) -> str:
    """``text`` with each generated section replaced by ``sections[name]``.

    Every section must appear exactly once, and every marker must name a known section.
    """
    begun = _BEGIN.findall(text)
    found = [m.group("name") for m in _BLOCK.finditer(text)]
    if begun != found:
        raise DocgenError(f"unmatched BEGIN/END GENERATED markers: {begun} vs {found}")
    for name in sections:
        if found.count(name) != 1:
            raise DocgenError(
                f"the page needs exactly one <!-- BEGIN GENERATED: {name} --> … "
                f"<!-- END GENERATED: {name} --> section (found {found.count(name)})"
            )
    unknown = sorted(set(found) - set(sections))
    if unknown:
        raise DocgenError(f"the page has generated sections nobody renders: {unknown}")

    def replace(match: re.Match[str]) -> str:
        body = sections[match.group("name")].rstrip("\n")
        return f"{match.group('begin')}{body}\n{match.group('end')}"

    return _BLOCK.sub(replace, text)


def write_docs(path: Path, *, check: bool = False) -> bool:
    """Regenerate the sections of the page at ``path``; whether it changed (or, with
    ``check``, would change: then nothing is written)."""
    text = path.read_text("utf-8")
    updated = update_markdown(text, render_sections())
    if updated == text:
        return False
    if not check:
        path.write_text(updated, "utf-8")
    return True


# -- the command ------------------------------------------------------------------------------

DEFAULT_PAGE = Path("docs/engine.md")
COMMITTED_DIRECTION: DiagramDirection = "TB"
"""The layout of the committed diagrams (the README embeds the SVG)."""


def _diagrams(argv: list[str]) -> int:
    outdir = Path(argv[0] if argv else "diagrams")
    outdir.mkdir(parents=True, exist_ok=True)
    print(write_diagram(outdir / "agent_loop.mmd", direction=COMMITTED_DIRECTION))
    try:
        print(write_diagram(outdir / "agent_loop.svg", direction=COMMITTED_DIRECTION))
    except DiagramUnavailable as exc:
        print(f"agent_loop.svg not written: {exc}", file=sys.stderr)
        return 1
    return 0


def _docs(argv: list[str]) -> int:
    check = "--check" in argv
    rest = [a for a in argv if a != "--check"]
    page = Path(rest[0]) if rest else DEFAULT_PAGE
    try:
        changed = write_docs(page, check=check)
    except DocgenError as exc:
        print(f"{page}: {exc}", file=sys.stderr)
        return 1
    if check:
        if changed:
            print(f"{page} is stale: run `make diagrams`", file=sys.stderr)
            return 1
        print(f"{page} is current")
        return 0
    print(f"{page} {'regenerated' if changed else 'already current'}")
    return 0


def main(argv: list[str]) -> int:
    """``python scripts/docgen.py docs|diagrams …`` (see the module docstring); the exit code."""
    if argv and argv[0] == "docs":
        return _docs(argv[1:])
    if argv and argv[0] == "diagrams":
        return _diagrams(argv[1:])
    return _diagrams(argv)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
