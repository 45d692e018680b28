"""``agentfsm conformance replay-vcr DIR``: users' VCR.py cassettes through the adapters."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from ._parser import UsageParser, file_name

__all__ = ["replay_vcr_main"]

_STDOUT = "-"


def _parser() -> UsageParser:
    parser = UsageParser(
        prog="agentfsm conformance replay-vcr",
        description="Replay the provider exchanges of VCR.py cassettes (the YAML pydantic-ai, "
        "LangChain, Mirascope and LiteLLM record with) through the project's adapters: "
        "every exchange whose request path is …/chat/completions, …/v1/messages or "
        "…/responses, its response served whole, in small pieces and over loopback. "
        "Reports per provider (the request's host) and wire how many decode exactly, "
        "differ (with the field) or crash. Headers are never printed.",
    )
    parser.add_argument("folder", metavar="DIR", help="cassettes (*.yaml, *.yml), at any depth")
    parser.add_argument(
        "--markdown",
        nargs="?",
        const=_STDOUT,
        metavar="FILE",
        type=file_name,
        help="write the report as Markdown to FILE (without FILE: print it instead of the "
        "plain report)",
    )
    parser.add_argument(
        "--json",
        nargs="?",
        const=_STDOUT,
        metavar="FILE",
        type=file_name,
        help="write the report as JSON to FILE (without FILE: print it instead of the plain "
        "report)",
    )
    return parser


def _write(where: str, text: str) -> None:
    if where == _STDOUT:
        sys.stdout.write(text)
    else:
        Path(where).write_text(text, "utf-8", errors="backslashreplace")


def replay_vcr_main(argv: Sequence[str]) -> int:
    """Run ``replay-vcr``: 0 when every exchange read is exact, 1 otherwise (or when no
    exchange of a known wire was found), 2 when the folder is missing or a report cannot be
    written."""
    from agentfsm.conformance import replay_vcr, vcr_markdown, vcr_text

    args = _parser().parse_args(argv)
    folder = Path(args.folder)
    if not folder.is_dir():
        print(f"agentfsm conformance replay-vcr: no folder {args.folder!r}", file=sys.stderr)
        return 2
    report = asyncio.run(replay_vcr(folder))
    printed = _STDOUT in (args.markdown, args.json)
    try:
        if not printed:
            sys.stdout.write(vcr_text(report))
        if args.markdown is not None:
            _write(args.markdown, vcr_markdown(report))
        if args.json is not None:
            _write(args.json, json.dumps(report.as_dict(), indent=2) + "\n")
    except OSError as error:
        print(f"agentfsm conformance replay-vcr: cannot write: {error}", file=sys.stderr)
        return 2
    if report.replayed == 0:
        print(
            f"agentfsm conformance replay-vcr: nothing replayed: no exchange of {args.folder!r} "
            "speaks a wire an adapter of the project reads; not a pass",
            file=sys.stderr,
        )
        return 1
    return 0 if report.passed else 1
