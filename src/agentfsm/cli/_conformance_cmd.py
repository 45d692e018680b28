"""``agentfsm conformance``: run the live checks against a URL, replay a recorded corpus,
merge reports, probe quirks."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentfsm.adapters.providers import AnthropicQuirks, OpenAIQuirks, ResponsesQuirks

from ._parser import UsageParser

__all__ = ["main"]

WIRE_NAMES = ("openai-chat", "anthropic", "openai-responses")
"""The wires the kit checks; ``chat`` and ``responses`` are accepted for the OpenAI ones
(as ``agentfsm run --wire`` names them)."""
_ALIASES = {"chat": "openai-chat", "responses": "openai-responses"}


def _wire_name(text: str) -> str:
    """A ``--wire`` value: a wire's name or its short name."""
    return _ALIASES.get(text, text)


def _run_parser() -> UsageParser:
    from agentfsm.adapters.providers import quirk_names

    parser = UsageParser(
        prog="agentfsm conformance",
        description="Run the live checks: a provider's URL against what the agent loop "
        "needs. Also: 'agentfsm conformance corpus [DIR]' (the recorded checks, on the "
        "bundled recorded exchanges), 'agentfsm conformance matrix A.json B.json …', "
        "'agentfsm conformance probe' and 'agentfsm conformance replay-vcr DIR' (your own "
        "VCR.py and HAR cassettes through the adapters).",
    )
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--model", required=True, help="the model name the server serves")
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the API key (never written to a report)",
    )
    parser.add_argument(
        "--wire",
        type=_wire_name,
        choices=WIRE_NAMES,
        default="openai-chat",
        help="openai-chat (or chat; the default), anthropic, openai-responses (or responses)",
    )
    parser.add_argument(
        "--only",
        action="append",
        metavar="GROUP",
        choices=["wire", "answers", "tools", "usage", "errors", "control"],
        help="run one group of checks only (wire, answers, tools, usage, errors, control); "
        "repeatable",
    )
    parser.add_argument("--out", metavar="report.json", help="write the report as JSON here")
    parser.add_argument("--markdown", metavar="FILE", help="write the report as Markdown here")
    parser.add_argument(
        "--record",
        metavar="DIR",
        help="save every exchange the checks make (adapter calls and raw probes), one "
        "replayable file each, named after its check (allow-listed headers, keys scrubbed)",
    )
    parser.add_argument("--name", help="the provider's name in reports")
    parser.add_argument(
        "--capability",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="declare a capability, e.g. parallel_tools or context_window=8192",
    )
    parser.add_argument(
        "--quirk",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a field of the --wire's quirk profile the adapters are built under "
        "(OpenAIQuirks: "
        + ", ".join(quirk_names("openai-chat"))
        + "; AnthropicQuirks for --wire anthropic: "
        + ", ".join(quirk_names("anthropic"))
        + "; ResponsesQuirks for --wire responses: "
        + ", ".join(quirk_names("openai-responses"))
        + "), e.g. explicit_tool_choice=true; repeatable; 'agentfsm conformance probe' "
        "finds them",
    )
    return parser


def _value(text: str) -> Any:
    lowered = text.lower()
    if lowered in ("true", "yes", "1"):
        return True
    if lowered in ("false", "no", "0"):
        return False
    try:
        return int(text)
    except ValueError:
        return text


def _pairs(items: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        name, _, value = item.partition("=")
        out[name.strip().replace("-", "_")] = _value(value) if value else True
    return out


def _print_table(report: Any) -> None:
    from agentfsm.conformance import MARKS

    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        print(f"conformance ({report.mode}): {report.target}")
        for r in report.results:
            print(f"{MARKS[r.outcome]} {r.check:<4} {r.name:<34} {r.outcome:<16} {r.message}")
        return
    table = Table(title=f"conformance ({report.mode}): {report.target}")
    for column in ("check", "name", "outcome", "notes"):
        table.add_column(column, overflow="fold")
    styles = {
        "pass": "green",
        "pass-normalized": "yellow",
        "fail": "red",
        "xfail": "magenta",
        "skip": "dim",
        "model": "cyan",
    }
    for r in report.results:
        note = r.message + (f" [{', '.join(r.quirks)}]" if r.quirks else "")
        table.add_row(
            r.check, r.name, f"{MARKS[r.outcome]} {r.outcome}", note, style=styles[r.outcome]
        )
    Console().print(table)


def _url_problem(url: str) -> str:
    """What makes ``url`` no base URL to send requests to (empty when nothing does); says
    nothing of the URL itself, which may hold a password or a key."""
    import httpx

    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, ValueError) as error:
        return f"--base-url is not a URL ({str(error).split(':')[0]})"
    if parsed.scheme not in ("http", "https") or not parsed.host:
        return "--base-url needs http:// or https:// and a host, e.g. http://127.0.0.1:8080/v1"
    if parsed.port is not None and not 0 < parsed.port < 65536:
        return f"--base-url has no such port ({parsed.port}; ports are 1 to 65535)"
    return ""


def _run(argv: Sequence[str]) -> int:
    from agentfsm.adapters.providers import parse_quirk, quirk_profile
    from agentfsm.conformance import Capabilities, LiveTarget, report_markdown, run_checks

    args = _run_parser().parse_args(argv)
    if problem := _url_problem(args.base_url):
        print(f"agentfsm conformance: {problem}", file=sys.stderr)
        return 2
    key = None
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            print(f"agentfsm conformance: {args.api_key_env} is not set", file=sys.stderr)
            return 2
    try:
        capabilities = Capabilities(**_pairs(args.capability))
    except TypeError as error:
        print(f"agentfsm conformance: {error}", file=sys.stderr)
        return 2
    try:
        pairs = dict(parse_quirk(text) for text in args.quirk)
        profile = quirk_profile(args.wire, pairs)
    except ValueError as error:
        print(f"agentfsm conformance: --quirk: {error}", file=sys.stderr)
        return 2
    record = Path(args.record) if args.record else None
    before: set[Path] = set()
    if record is not None:
        try:
            record.mkdir(parents=True, exist_ok=True)
            before = set(record.iterdir())
        except OSError as error:
            print(f"agentfsm conformance: cannot record in {record}: {error}", file=sys.stderr)
            return 2
    target = LiveTarget(
        args.base_url,
        args.model,
        args.wire,
        key,
        capabilities,
        quirks=profile if isinstance(profile, OpenAIQuirks) else OpenAIQuirks(),
        record_dir=record,
        name=args.name,
        anthropic_quirks=profile if isinstance(profile, AnthropicQuirks) else AnthropicQuirks(),
        responses_quirks=profile if isinstance(profile, ResponsesQuirks) else ResponsesQuirks(),
    )

    def progress(result: Any) -> None:
        print(
            f"  {result.check:<4} {result.name:<34} {result.outcome}", file=sys.stderr, flush=True
        )

    report = asyncio.run(run_checks(target, groups=args.only, progress=progress))
    if report.suggestion and args.api_key_env:
        from agentfsm.conformance import DECISIVE, probe_suggestion

        report.suggestion = probe_suggestion(
            report.results,
            args.wire,
            report.base_url or args.base_url,
            args.model,
            DECISIVE.get(args.wire, ()),
            args.api_key_env,
        )
    if report.verdict:
        print(report.verdict)
    else:
        _print_table(report)
    if report.suggestion:
        print(f"next: {report.suggestion}")
    if record is not None:
        saved = len(set(record.glob("*.json")) - before)
        print(
            f"recorded {saved} exchanges in {record} (replay: agentfsm conformance corpus "
            f"{record})",
            file=sys.stderr,
        )
    if args.out:
        Path(args.out).write_text(json.dumps(report.as_dict(), indent=2) + "\n", "utf-8")
    if args.markdown:
        Path(args.markdown).write_text(report_markdown(report), "utf-8")
    return 0 if report.ok else 1


def _matrix(argv: Sequence[str]) -> int:
    from agentfsm.conformance import Report, matrix_markdown

    parser = UsageParser(
        prog="agentfsm conformance matrix",
        description="One table of several providers' reports (the --out JSON of each run).",
    )
    parser.add_argument(
        "reports", nargs="+", metavar="REPORT.json", help="the reports, one column each"
    )
    parser.add_argument("--markdown", metavar="FILE", help="also write the table here")
    args = parser.parse_args(argv)
    try:
        reports = [Report.from_dict(json.loads(Path(p).read_text("utf-8"))) for p in args.reports]
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"agentfsm conformance matrix: cannot read a report: {error}", file=sys.stderr)
        return 2
    text = matrix_markdown(reports)
    if args.markdown:
        Path(args.markdown).write_text(text, "utf-8")
    print(text, end="")
    return 0


def _wire_files(out: str, wire: str, several: bool) -> Path:
    """Where a report goes: ``out`` itself, or ``out`` with the wire before its suffix when
    a run has a report per wire."""
    path = Path(out)
    return path.with_name(f"{path.stem}.{wire}{path.suffix}") if several else path


def _corpus(argv: Sequence[str]) -> int:
    from agentfsm.conformance import (
        ADAPTERS,  # the recorded adapter of a wire
        CorpusMissingError,
        RecordedTarget,
        Wire,
        bundled_corpus,
        corpus_wires,
        report_markdown,
        run_corpus,
    )
    from agentfsm.engine import ChatFn

    parser = UsageParser(
        prog="agentfsm conformance corpus",
        description="The recorded checks on recorded exchanges: replay the corpus that ships "
        "with agentfsm (or DIR: a --record folder, or a folder of provider folders) through "
        "the project's adapter of each recording's wire and hold each exchange to the "
        "checks' invariants. A run that exercises no check is not a pass.",
    )
    parser.add_argument(
        "folder", metavar="DIR", nargs="?", help="recorded exchanges (default: the bundled corpus)"
    )
    parser.add_argument(
        "--wire",
        type=_wire_name,
        choices=WIRE_NAMES,
        help="replay only the recordings of this wire (default: every wire found, each "
        "recording through its own wire's adapter)",
    )
    parser.add_argument(
        "--out",
        metavar="report.json",
        help="write the report as JSON here (with several wires: report.<wire>.json each)",
    )
    parser.add_argument(
        "--markdown",
        metavar="FILE",
        help="write the report as Markdown here (with several wires: FILE's name with .<wire>)",
    )
    args = parser.parse_args(argv)
    try:
        folder = bundled_corpus() if args.folder is None else Path(args.folder)
    except CorpusMissingError as error:
        print(f"agentfsm conformance corpus: {error}", file=sys.stderr)
        return 2
    if not folder.is_dir():
        print(f"agentfsm conformance corpus: no folder {folder}", file=sys.stderr)
        return 2
    try:
        by_wire = corpus_wires(folder)
    except CorpusMissingError as error:
        print(f"agentfsm conformance corpus: {error}", file=sys.stderr)
        return 2
    found = ", ".join(
        f"{len(files)} {wire or 'of no wire read here'}"
        for wire, files in sorted(by_wire.items(), key=lambda i: (i[0] is None, str(i[0])))
    )
    print(f"recorded files in {folder}: {found}", file=sys.stderr)
    known: tuple[Wire, ...] = ("openai-chat", "anthropic", "openai-responses")
    wires = [w for w in known if w == args.wire or (not args.wire and w in by_wire)]
    if not wires:
        print(
            f"agentfsm conformance corpus: nothing exercised: no file of {folder} speaks a "
            "wire the project's adapters read (openai-chat, anthropic, openai-responses); "
            "not a pass",
            file=sys.stderr,
        )
        return 1

    def target(wire: Wire) -> RecordedTarget:
        def factory(url: str) -> ChatFn:
            return ADAPTERS[wire][1](url, None)

        return RecordedTarget(factory, wire, name=f"{wire} adapter")

    code = 0
    for wire in wires:
        report = asyncio.run(run_corpus(target(wire), folder))
        _print_table(report)
        several = len(wires) > 1
        if args.out:
            out = _wire_files(args.out, wire, several)
            out.write_text(json.dumps(report.as_dict(), indent=2) + "\n", "utf-8")
        if args.markdown:
            _wire_files(args.markdown, wire, several).write_text(report_markdown(report), "utf-8")
        if report.failed:
            code = 1
        if all(result.outcome == "skip" for result in report.results):
            files = len(by_wire.get(wire, []))
            what = (
                f"none of its {files} recorded file{'s' if files != 1 else ''} exercises a check"
                if files
                else f"no file of {folder} speaks it"
            )
            print(
                f"agentfsm conformance corpus: nothing exercised on the {wire} wire: {what}; "
                "not a pass",
                file=sys.stderr,
            )
            code = 1
    return code


def _probe_parser() -> UsageParser:
    parser = UsageParser(
        prog="agentfsm conformance probe",
        description="Find the quirk profile a server needs from what it answers, then verify "
        "it: the decisive checks re-run with the adapter built under it.",
    )
    parser.add_argument("--base-url", required=True, help="e.g. http://127.0.0.1:4000/v1")
    parser.add_argument("--model", required=True, help="the model name the server serves")
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the API key (never written to a report)",
    )
    parser.add_argument(
        "--wire",
        type=_wire_name,
        choices=WIRE_NAMES,
        default="openai-chat",
        help="openai-chat (or chat; the default), anthropic, openai-responses (or responses)",
    )
    parser.add_argument(
        "--write-settings",
        nargs="?",
        const=".",
        metavar="PATH",
        help="save the verified profile as provider.quirks in the settings agentfsm run "
        "reads: PATH is a workspace folder (default: .) or the settings file",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120,
        metavar="SECONDS",
        help="per probe request (default: 120)",
    )
    return parser


def _probe(argv: Sequence[str]) -> int:
    from agentfsm.conformance import MARKS, ProbeError, probe, profile_text, verify, write_settings

    args = _probe_parser().parse_args(argv)
    if problem := _url_problem(args.base_url):
        print(f"agentfsm conformance probe: {problem}", file=sys.stderr)
        return 2
    key = None
    if args.api_key_env:
        key = os.environ.get(args.api_key_env)
        if not key:
            print(
                f"agentfsm conformance probe: the environment variable {args.api_key_env[:100]}"
                " (--api-key-env) is not set",
                file=sys.stderr,
            )
            return 2
    if not 0 < args.timeout <= 3600:
        print("agentfsm conformance probe: --timeout must be from 0 to 3600", file=sys.stderr)
        return 2
    try:
        findings, quirks = asyncio.run(
            probe(args.base_url, args.model, key, wire=args.wire, request_seconds=args.timeout)
        )
    except ProbeError as error:
        print(f"agentfsm conformance probe: {error}", file=sys.stderr)
        return 1
    for finding in findings:
        print(f"- {finding}")
    print(f"suggested: {profile_text(quirks)}")

    def progress(profile: Any, result: Any) -> None:
        message = " ".join(result.message.split())
        note = f": {message[:199]}…" if len(message) > 200 else f": {message}" if message else ""
        print(
            f"  {MARKS[result.outcome]} {result.check:<4} {result.name:<32} {result.outcome}{note}",
            flush=True,
        )

    def trying(profile: Any) -> None:
        print(f"verifying {profile_text(profile)}:", flush=True)

    def retries(record: logging.LogRecord) -> bool:
        # The adapter's retries of a check's deliberate failures: the check's line says it.
        return not str(record.msg).startswith("agentfsm: %s attempt")

    providers_log = logging.getLogger("agentfsm.providers")
    providers_log.addFilter(retries)
    try:
        checked = asyncio.run(
            verify(
                args.base_url,
                args.model,
                quirks,
                key,
                wire=args.wire,
                progress=progress,
                trying=trying,
            )
        )
    finally:
        providers_log.removeFilter(retries)
    if checked.verified is None:
        tried = ", ".join(profile_text(p) for p, _ in checked.tried)
        if checked.failing():
            print(f"no profile works: {'; '.join(checked.failing())} (profiles tried: {tried})")
        else:
            print(
                f"not verified: {'; '.join(checked.unshown())} under every profile tried "
                f"({tried}); no decisive check failed, but these showed nothing"
            )
        if args.write_settings is not None:
            print("settings not written: no verified profile", file=sys.stderr)
        return 1
    print(f"verified: {profile_text(checked.verified)}")
    if args.write_settings is not None:
        try:
            path = write_settings(args.write_settings, checked.verified)
        except (OSError, ValueError) as error:
            print(f"agentfsm conformance probe: settings not written: {error}", file=sys.stderr)
            return 1
        print(f"wrote provider.quirks to {path}")
    return 0


def main(argv: Sequence[str]) -> int:
    """Dispatch ``agentfsm conformance …``."""
    try:
        if argv and argv[0] == "matrix":
            return _matrix(argv[1:])
        if argv and argv[0] == "corpus":
            return _corpus(argv[1:])
        if argv and argv[0] == "probe":
            return _probe(argv[1:])
        if argv and argv[0] == "replay-vcr":
            from ._vcr_cmd import replay_vcr_main

            return replay_vcr_main(argv[1:])
        return _run(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0)
