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
_RANK_GAP = 112
_GAP = 36
_LANE = 30
_CHAR = 7.6


def machine_edges(machine: type[Any] = AgentLoopMachine) -> dict[str, list[str]]:
    """Each edge ``"source>target"`` of ``machine`` with the guards of its transitions
    (``"-"`` for one without a guard), in declaration order.

    A guard reads as the condition under which the edge is taken: transitions are tried in
    declaration order, so one whose guards are an earlier transition's (of the same event)
    but one gets that one's negation too: ``llm_end``'s ``has_tool_calls`` edge to
    ``budget``, after ``has_tool_calls, !last_turn`` to ``run_tools``, is
    ``has_tool_calls, last_turn``."""
    edges: dict[str, list[str]] = {}
    for state in machine.states:
        earlier: list[tuple[set[str], list[str]]] = []
        for transition in state.transitions:
            guards = [str(c) for c in transition.cond]
            events = [str(e) for e in transition.events]
            taken = list(guards)
            for before, before_events in earlier:
                extra = before - set(guards)
                if guards and before_events == events and len(extra) == 1 and before > set(guards):
                    [literal] = extra
                    negation = literal[1:] if literal.startswith("!") else f"!{literal}"
                    if negation not in taken:
                        taken.append(negation)
            earlier.append((set(guards), events))
            for target in transition.targets:
                edges.setdefault(f"{state.id}>{target.id}", []).append(", ".join(taken) or "-")
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


_ALONG = (0.5, 0.4, 0.6, 0.3, 0.7, 0.2, 0.8, 0.12, 0.88)
"""Where along an edge its label may go (fractions of its length), in order of preference."""


def _on_line(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points of a line (``points``, evenly spaced enough) at :data:`_ALONG`."""
    return [points[round(f * (len(points) - 1))] for f in _ALONG]


def _label_box(spot: tuple[float, float], guard: str) -> tuple[float, float, float, float]:
    """The room a label centred on its edge at ``spot`` takes: the guard (10 px) and the
    count below it."""
    w = max(len(guard) * 5.8, 30.0) / 2
    x, y = spot
    return x - w, y - 7, x + w, y + 19


def _line(a: tuple[float, float], b: tuple[float, float]) -> list[tuple[float, float]]:
    """Points every 8 px or so on the segment ``a``-``b``."""
    steps = max(1, int(max(abs(b[0] - a[0]), abs(b[1] - a[1])) / 8))
    return [
        (a[0] + (b[0] - a[0]) * i / steps, a[1] + (b[1] - a[1]) * i / steps)
        for i in range(steps + 1)
    ]


def _crowding(
    spot: tuple[float, float],
    box: tuple[float, float, float, float],
    states: list[tuple[float, float, float, float]],
    labels: list[tuple[float, float, float, float]],
    points: list[tuple[float, float]],
    width: float,
) -> float:
    """How much a label at ``box`` would cover: state boxes and other labels weigh most,
    then another edge passing close to where it starts (the count would read as that
    edge's), then other edges' lines, then leaving the drawing."""

    def overlap(a: tuple[float, ...], b: tuple[float, ...]) -> float:
        w = min(a[2], b[2]) - max(a[0], b[0])
        h = min(a[3], b[3]) - max(a[1], b[1])
        return w * h if w > 0 and h > 0 else 0.0

    score = sum(overlap(box, s) for s in states) * 10 + sum(overlap(box, o) for o in labels) * 10
    score += 40 * sum(1 for px, py in points if box[0] <= px <= box[2] and box[1] <= py <= box[3])
    score += 400 * sum(1 for px, py in points if abs(px - spot[0]) < 14 and abs(py - spot[1]) < 14)
    score += 10 * (max(0.0, -box[0]) + max(0.0, box[2] - width)) * (box[3] - box[1])
    return score


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
    boxes = [
        (
            x[n] - width[n] / 2 - 4,
            y[n] - _HEIGHT / 2 - 4,
            x[n] + width[n] / 2 + 4,
            y[n] + _HEIGHT / 2 + 4,
        )
        for n in ids
    ]
    drawn: list[tuple[str, str, list[tuple[float, float]], list[tuple[float, float]]]] = []
    labels_of: dict[str, str] = {}
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
            points = [
                *_line((ax, sy), (lx, sy)),
                *_line((lx, sy), (lx, ty)),
                *_line((lx, ty), (bx, ty)),
            ]
            spots = _on_line(points)
        else:
            top, bottom = sy + _HEIGHT / 2, ty - _HEIGHT / 2
            bend = (bottom - top) / 2
            d = (
                f"M{sx:.1f},{top:.1f} C{sx:.1f},{top + bend:.1f} {tx:.1f},"
                f"{bottom - bend:.1f} {tx:.1f},{bottom:.1f}"
            )
            curve = ((sx, top), (sx, top + bend), (tx, bottom - bend), (tx, bottom))
            points = [_bezier(i / 24, *curve) for i in range(25)]
            spots = _on_line(points)
        guard = " | ".join(g for g in guards[key] if g != "-")
        drawn.append((key, d, points, spots))
        labels_of[key] = guard
    placed: list[tuple[float, float, float, float]] = []
    for key, d, _points, spots in drawn:
        guard = labels_of[key]
        others = [pt for k, _, pts, _ in drawn if k != key for pt in pts]
        spot = min(
            spots,
            key=lambda spot: _crowding(
                spot, _label_box(spot, guard), boxes, placed, others, total_w
            ),
        )
        placed.append(_label_box(spot, guard))
        sx, sy = spot
        parts.append(
            f'<g class="edge" data-edge="{escape(key)}"><title>{escape(key)}</title>'
            f'<path d="{d}" marker-end="url(#arrow)"/>'
            f'<text x="{sx:.1f}" y="{sy + 3:.1f}" text-anchor="middle" '
            f'class="guard">{escape(guard)}</text>'
            f'<text x="{sx:.1f}" y="{sy + (15 if guard else 4):.1f}" text-anchor="middle" '
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
