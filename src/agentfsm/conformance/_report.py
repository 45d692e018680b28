"""Reports: JSON, Markdown, and the provider by check matrix."""

from __future__ import annotations

from collections.abc import Sequence

from ._model import CheckResult, Report

__all__ = ["MARKS", "matrix_markdown", "report_markdown"]

MARKS = {
    "pass": "✓",
    "fail": "✗",
    "pass-normalized": "⚠",
    "skip": "-",
    "xfail": "x",
    "model": "m",
}
"""One symbol per outcome, for tables."""


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def report_markdown(report: Report) -> str:
    """A report as a Markdown document."""
    counts = report.counts()
    summary = ", ".join(
        f"{counts[k]} {k}"
        for k in ("pass", "pass-normalized", "fail", "xfail", "model", "skip")
        if k in counts
    )
    run = f"Wire: `{report.wire}` · mode: {report.mode} · run: {report.started}"
    run += f" · agentfsm {report.version}" if report.version else ""
    lines = [f"# Conformance: {report.target}", "", run, ""]
    if report.base_url:
        lines += [f"Base URL: `{report.base_url}`", ""]
    declared = [f"{k}={v}" for k, v in report.capabilities.items() if v not in (False, None)]
    if report.capabilities:
        lines += [f"Declared capabilities: {', '.join(declared) or 'none'}", ""]
    if report.verdict:
        lines += [f"**{_cell(report.verdict)}**", ""]
    lines += [f"**{summary or 'no check ran'}**", ""]
    if report.suggestion:
        lines += [f"Next: {_cell(report.suggestion)}", ""]
    lines += [
        "Legend: ✓ pass · ⚠ pass-normalized (the wire deviates, the adapter absorbs it) · "
        "✗ fail · x xfail (known quirk) · m model (the model, not the server: the notes say "
        "what was measured) · - skip",
        "",
        "| check | name | outcome | notes |",
        "|---|---|---|---|",
    ]
    for result in report.results:
        note = result.message
        if result.quirks:
            note = (
                f"{note} [{', '.join(result.quirks)}]" if note else f"[{', '.join(result.quirks)}]"
            )
        outcome = f"{MARKS[result.outcome]} {result.outcome}"
        lines.append(f"| {result.check} | `{result.name}` | {outcome} | {_cell(note)} |")
    return "\n".join(lines) + "\n"


def _index(report: Report) -> dict[str, CheckResult]:
    return {r.check: r for r in report.results}


def matrix_markdown(reports: Sequence[Report]) -> str:
    """Several reports merged into one check by provider table."""
    order: list[tuple[str, str]] = []
    seen: set[str] = set()
    for report in reports:
        for result in report.results:
            if result.check not in seen:
                seen.add(result.check)
                order.append((result.check, result.name))
    indexes = [_index(r) for r in reports]
    header = "| check | " + " | ".join(_cell(r.target) for r in reports) + " |"
    lines = [header, "|---|" + "---|" * len(reports)]
    for check_id, name in order:
        cells = []
        for index in indexes:
            found = index.get(check_id)
            cells.append(MARKS[found.outcome] if found else " ")
        lines.append(f"| {check_id} `{name}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
