"""The machine as an SVG drawing, laid out in Python (no Graphviz): the base of a run's
picture, which marks on it the edges the run took.

States come from the machine class in declaration order; ranks are the longest path from
the initial state over the transitions that do not go back (found by a depth-first walk),
so the loop reads top to bottom and each edge that returns to an earlier state runs up the
left side. Every state is a ``<g class="state" data-state="ID">`` and every edge (all the
transitions between two states) a ``<g class="edge" data-edge="SOURCE>TARGET">`` holding
its path, its guard label and an empty ``count`` text for the page's script to fill.
"""

from __future__ import annotations

from html import escape
from typing import Any

from agentfsm.engine import AgentLoopMachine

__all__ = ["machine_edges", "machine_svg"]

_HEIGHT = 34
_RANK_GAP = 96
_GAP = 36
_LANE = 22
_CHAR = 7.6


def machine_edges(machine: type[Any] = AgentLoopMachine) -> dict[str, list[str]]:
    """Each edge ``"source>target"`` of ``machine`` with the guards of its transitions
    (``"-"`` for one without a guard), in declaration order."""
    edges: dict[str, list[str]] = {}
    for state in machine.states:
        for transition in state.transitions:
            guards = [str(c) for c in transition.cond]
            for target in transition.targets:
                edges.setdefault(f"{state.id}>{target.id}", []).append(", ".join(guards) or "-")
    return edges


def _ranks(
    ids: list[str], edges: list[tuple[str, str]], initial: str
) -> tuple[dict[str, int], set[tuple[str, str]]]:
    """Rank of each state and the edges that go back (to a state on the walk's stack)."""
    out: dict[str, list[str]] = {i: [] for i in ids}
    for source, target in edges:
        out[source].append(target)
    back: set[tuple[str, str]] = set()
    done: set[str] = set()
    stack: list[str] = []

    def walk(node: str) -> None:
        stack.append(node)
        for target in out[node]:
            if target in stack:
                back.add((node, target))
            elif target not in done:
                walk(target)
        stack.pop()
        done.add(node)

    walk(initial)
    for node in ids:
        if node not in done:
            walk(node)
    rank = dict.fromkeys(ids, 0)
    for _ in ids:  # longest path over the forward edges (a DAG): at most len(ids) rounds
        for source, target in edges:
            if (source, target) not in back and rank[target] < rank[source] + 1:
                rank[target] = rank[source] + 1
    return rank, back


def _bezier(t: float, *points: tuple[float, float]) -> tuple[float, float]:
    """The point at ``t`` of the cubic Bézier curve through four control ``points``."""
    (ax, ay), (bx, by), (cx, cy), (dx, dy) = points
    u = 1 - t
    x = u**3 * ax + 3 * u * u * t * bx + 3 * u * t * t * cx + t**3 * dx
    y = u**3 * ay + 3 * u * u * t * by + 3 * u * t * t * cy + t**3 * dy
    return x, y


def machine_svg(machine: type[Any] = AgentLoopMachine) -> str:
    """The drawing of ``machine`` (the agent loop by default) as an inline ``<svg>``."""
    states = list(machine.states)
    ids = [s.id for s in states]
    labels = {s.id: str(s.name) for s in states}
    finals = {s.id for s in states if s.final}
    initial = next(s.id for s in states if s.initial)
    guards = machine_edges(machine)
    pairs = [(key.split(">")[0], key.split(">")[1]) for key in guards]
    rank, back = _ranks(ids, pairs, initial)
    width = {i: max(96.0, len(labels[i]) * _CHAR + 28) for i in ids}
    rows: dict[int, list[str]] = {}
    for node in ids:
        rows.setdefault(rank[node], []).append(node)
    lanes = sum(1 for p in pairs if p in back)
    left = 24 + lanes * _LANE
    row_widths = {r: sum(width[n] for n in ns) + _GAP * (len(ns) - 1) for r, ns in rows.items()}
    inner = max(row_widths.values())
    x: dict[str, float] = {}
    y: dict[str, float] = {}
    for r, nodes in rows.items():
        cursor = left + (inner - row_widths[r]) / 2
        for node in nodes:
            x[node] = cursor + width[node] / 2
            y[node] = 30 + r * _RANK_GAP
            cursor += width[node] + _GAP
    total_w = left + inner + 150
    total_h = 30 + max(rows) * _RANK_GAP + _HEIGHT + 30
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="machine" id="machine" '
        f'viewBox="0 0 {total_w:.0f} {total_h:.0f}" width="{total_w:.0f}" '
        f'height="{total_h:.0f}" role="img" aria-label="the agent loop">',
        "<defs>",
        *(
            f'<marker id="{name}" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" '
            f'markerHeight="9" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
            f'<path d="M0,0L10,5L0,10z" '
            f'class="{name}"/></marker>'
            for name in ("arrow", "arrow-taken")
        ),
        "</defs>",
    ]
    lane = 0
    for (source, target), key in zip(pairs, guards, strict=True):
        sx, sy, tx, ty = x[source], y[source], x[target], y[target]
        if (source, target) in back:
            lane += 1
            lx = left - lane * _LANE
            ax, bx = sx - width[source] / 2, tx - width[target] / 2
            d = (
                f"M{ax:.1f},{sy:.1f} C{lx:.1f},{sy:.1f} {lx:.1f},{sy:.1f} {lx:.1f},"
                f"{sy - 20:.1f} L{lx:.1f},{ty + 20:.1f} C{lx:.1f},{ty:.1f} {lx:.1f},"
                f"{ty:.1f} {bx:.1f},{ty:.1f}"
            )
            label_x, label_y, anchor = lx + 4.0, (sy + ty) / 2, "start"
        else:
            top, bottom = sy + _HEIGHT / 2, ty - _HEIGHT / 2
            bend = (bottom - top) / 2
            d = (
                f"M{sx:.1f},{top:.1f} C{sx:.1f},{top + bend:.1f} {tx:.1f},"
                f"{bottom - bend:.1f} {tx:.1f},{bottom:.1f}"
            )
            # the label half a rank below the source: edges of different lengths that
            # cross the same band keep their labels apart
            t = 0.5 * _RANK_GAP / max(ty - sy, _RANK_GAP)
            px, py = _bezier(t, (sx, top), (sx, top + bend), (tx, bottom - bend), (tx, bottom))
            anchor = "end" if tx < sx - 1 else "start"
            label_x, label_y = px + (-6.0 if anchor == "end" else 6.0), py
        guard = " | ".join(g for g in guards[key] if g != "-")
        parts.append(
            f'<g class="edge" data-edge="{escape(key)}"><title>{escape(key)}</title>'
            f'<path d="{d}" marker-end="url(#arrow)"/>'
            f'<text x="{label_x:.1f}" y="{label_y:.1f}" text-anchor="{anchor}" '
            f'class="guard">{escape(guard)}</text>'
            f'<text x="{label_x:.1f}" y="{label_y + 12:.1f}" text-anchor="{anchor}" '
            f'class="count"></text></g>'
        )
    for node in ids:
        w = width[node]
        shape = "state final" if node in finals else "state"
        ring = (
            f'<rect x="{x[node] - w / 2 - 3:.1f}" y="{y[node] - _HEIGHT / 2 - 3:.1f}" '
            f'width="{w + 6:.1f}" height="{_HEIGHT + 6}" rx="12" class="ring"/>'
            if node in finals
            else ""
        )
        parts.append(
            f'<g class="{shape}" data-state="{escape(node)}"><title>{escape(node)}</title>'
            f"{ring}"
            f'<rect x="{x[node] - w / 2:.1f}" y="{y[node] - _HEIGHT / 2:.1f}" width="{w:.1f}" '
            f'height="{_HEIGHT}" rx="9"/>'
            f'<text x="{x[node]:.1f}" y="{y[node] + 4.5:.1f}" text-anchor="middle">'
            f"{escape(labels[node])}</text></g>"
        )
    parts.append("</svg>")
    return "\n".join(parts)
