"""``agentfsm conformance replay-vcr DIR``: users' cassettes through the adapters."""

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
        description="Replay the provider exchanges of cassettes (VCR.py's YAML, which "
        "pydantic-ai, LangChain, Mirascope and LiteLLM record with, and HAR files, which "
        "Polly.JS records) through the project's adapters: every exchange whose request "
        "path is …/chat/completions, …/v1/messages or …/responses, its response served "
        "whole, in pieces and over loopback, and each answer held field by field to a "
        "second reading of the recorded bytes. Reports per provider (the request's host) "
        "and wire how many are exact, differ (with the field, expected and got), are "
        "unjudged (the recording cannot settle them: with the reason) or crash. Files that "
        "are not cassettes are skipped and counted. Headers are never printed. Exit 0 "
        "when nothing differs, crashes or cannot be read, 1 otherwise or when nothing "
        "could be judged, 2 when DIR is missing or a report cannot be written.",
    )
    parser.add_argument(
        "folder", metavar="DIR", help="cassettes (*.yaml, *.yml, *.har), at any depth"
    )
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
    """Run ``replay-vcr``: 0 when no exchange differs, crashed or could not be read
    (unjudged ones and skipped files are reported, not failed), 1 otherwise or when no
    exchange could be judged, 2 when the folder is missing or a report cannot be written."""
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
    if report.judged == 0:
        print(
            f"agentfsm conformance replay-vcr: nothing judged: no exchange of {args.folder!r} "
            "speaks a wire an adapter of the project reads, in a recording that settles "
            "what the server sent; not a pass",
            file=sys.stderr,
        )
        return 1
    return 0 if report.passed else 1
