"""A ``replay-vcr`` report as plain text (the terminal) and as Markdown.

Every value that comes from a cassette (file names, hosts, differing texts) is shown with
its control characters, line separators and lone surrogates escaped: a cassette is data,
never something that moves the cursor of the terminal it is printed on.
"""

from __future__ import annotations

from ._replay_vcr import DELIVERIES, OUTCOMES, VcrReport, VcrResult

__all__ = ["vcr_markdown", "vcr_text"]

_SHOWN = ("differing", "unjudged", "crashed", "no adapter", "unreadable")


def _safe(text: str) -> str:
    """``text`` with anything unprintable escaped (as ``repr`` does, without the quotes)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _cell(text: str) -> str:
    return _safe(text).replace("|", "\\|")


def _summary(report: VcrReport) -> str:
    counts = dict.fromkeys(OUTCOMES, 0)
    for result in report.results:
        counts[result.outcome] += 1
    parts = [f"{n} {outcome}" for outcome, n in counts.items() if n]
    if report.unreadable:
        parts.append(f"{len(report.unreadable)} unreadable files")
    shown = ", ".join(parts) or "no exchange of a known wire"
    count = len(report.skipped)
    skipped = f"; {count} file{'s' if count != 1 else ''} skipped (not cassettes)" if count else ""
    return (
        f"{report.files} cassette files, {len(report.results)} exchanges of a known wire "
        f"({shown}); {report.other} other interactions left out{skipped}"
    )


def _more(result: VcrResult) -> str:
    """How many differences follow the first one shown."""
    more = len(result.differences) - 1
    return f" (and {more} more)" if more > 0 else ""


def vcr_text(report: VcrReport) -> str:
    """The report for a terminal: a line per provider and wire, then every exchange that
    was not exact (its first difference, or why it is unjudged), then the files that could
    not be read."""
    lines = [f"replay-vcr {_safe(report.folder)}: {_summary(report)}"]
    lines.append(f"deliveries: {', '.join(DELIVERIES)}")
    for (host, wire), counts in report.providers().items():
        shown = ", ".join(f"{n} {outcome}" for outcome, n in counts.items() if n)
        lines.append(f"  {_safe(host)} ({wire}): {shown}")
    for result in report.results:
        if result.outcome in _SHOWN:
            fields = f" [{', '.join(result.fields)}]" if result.fields else ""
            where = f"{result.file} #{result.index}"
            detail = _safe(result.detail) + _more(result)
            lines.append(f"{result.outcome}: {_safe(where)}{fields}: {detail}")
    for file, problem in report.unreadable:
        lines.append(f"unreadable file: {_safe(file)}: {_safe(problem)}")
    return "\n".join(lines) + "\n"


def vcr_markdown(report: VcrReport) -> str:
    """The report as a Markdown document: a table per provider and wire, then the exchanges
    that were not exact."""
    lines = [
        f"# replay-vcr: {_cell(report.folder)}",
        "",
        f"Run: {report.started} · deliveries: {', '.join(DELIVERIES)}",
        "",
        f"**{_summary(report)}**",
        "",
        "| provider | wire | " + " | ".join(OUTCOMES) + " |",
        "|---|---|" + "---|" * len(OUTCOMES),
    ]
    for (host, wire), counts in report.providers().items():
        cells = " | ".join(str(counts[outcome]) for outcome in OUTCOMES)
        lines.append(f"| {_cell(host)} | {wire} | {cells} |")
    rows = [r for r in report.results if r.outcome in _SHOWN]
    if rows or report.unreadable:
        lines += ["", "| cassette | # | provider | outcome | fields | detail |"]
        lines.append("|---|---|---|---|---|---|")
        for r in rows:
            fields = ", ".join(r.fields)
            lines.append(
                f"| {_cell(r.file)} | {r.index} | {_cell(r.host)} | {r.outcome} | {fields} | "
                f"{_cell(r.detail)}{_more(r)} |"
            )
        for file, problem in report.unreadable:
            lines.append(f"| {_cell(file)} | | | unreadable file | | {_cell(problem)} |")
    return "\n".join(lines) + "\n"
