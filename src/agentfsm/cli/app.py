"""The ``agentfsm`` command line: its parser and dispatch (see :mod:`agentfsm.cli`).

``agentfsm run PROMPT`` · ``agentfsm sessions list|show ID`` · ``agentfsm trace ID`` ·
``agentfsm diagram``. ``python -m agentfsm`` is the same command, but
imports ``./agentfsm/`` first when run in a workspace: prefer the console script.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from agentfsm.adapters.sessions import SessionNotFound, default_session_dir
from agentfsm.engine.protocols import ChatFn

from . import batch_cmd, run_cmd, sessions_cmd
from .terminal import sanitize, sanitized_logging

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """Usage errors in one line (``agentfsm run: argument --x: …``), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} -h)\n")


def _session_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workspace", default=".", metavar="DIR", help="whose sessions (default: .)"
    )
    parser.add_argument(
        "--session-dir",
        metavar="DIR",
        help="default: the workspace's folder under $XDG_STATE_HOME/agentfsm/sessions",
    )


def _session_dir(args: argparse.Namespace) -> Path:
    if args.session_dir:
        return Path(args.session_dir)
    return default_session_dir(args.workspace)


def _sessions(args: argparse.Namespace) -> int:
    """``sessions list|show`` and ``trace``: a usage error is one line and exit code 2."""
    command = "trace" if args.command == "trace" else f"sessions {args.action}"
    try:
        folder = _session_dir(args)
        if args.command == "trace":
            return sessions_cmd.trace(folder, args.ref, args.json)
        if args.action == "list":
            return sessions_cmd.list_sessions(folder, args.json)
        return sessions_cmd.show_session(folder, args.ref)
    except (SessionNotFound, OSError, ValueError) as error:
        print(f"agentfsm {command}: {sanitize(sessions_cmd.describe(error))}", file=sys.stderr)
        return 2


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="agentfsm", description="An LLM agent loop as a declared state machine.")
    commands = parser.add_subparsers(dest="command", required=True)
    run_cmd.add_arguments(commands.add_parser("run", help="run an agent on a task"))
    sessions = commands.add_parser("sessions", help="recorded sessions")
    sessions_actions = sessions.add_subparsers(dest="action", required=True)
    for action in ("list", "show"):
        sub = sessions_actions.add_parser(action)
        if action == "show":
            sub.add_argument("ref", help="latest, an id, or a unique id prefix")
        _session_options(sub)
        sub.add_argument("--json", action="store_true")
    trace = commands.add_parser("trace", help="per-run counts of a session")
    trace.add_argument("ref", help="latest, an id, or a unique id prefix")
    _session_options(trace)
    trace.add_argument("--json", action="store_true")
    runs = commands.add_parser("runs", help="durable runs (list, resume)")
    runs_actions = runs.add_subparsers(dest="action", required=True)
    runs_list = runs_actions.add_parser("list", help="unfinished durable runs")
    runs_list.add_argument("--all", action="store_true", help="finished ones too")
    runs_list.add_argument("--json", action="store_true")
    runs_resume = runs_actions.add_parser("resume", help="finish an unfinished durable run")
    runs_resume.add_argument("id", help="the run's id (agentfsm runs list)")
    runs_output = runs_resume.add_mutually_exclusive_group()
    runs_output.add_argument("--json", action="store_true")
    runs_output.add_argument("--quiet", action="store_true")
    for sub in (runs_list, runs_resume):
        sub.add_argument(
            "--database-url", metavar="URL", help="default: SQLite in the state folder"
        )
    batch_cmd.add_batch_arguments(commands.add_parser("batch", help="many durable runs on a queue"))
    batch_cmd.add_worker_arguments(commands.add_parser("worker", help="serve the batch task queue"))
    commands.add_parser("conformance", help="check a provider (agentfsm conformance -h)")
    diagram = commands.add_parser("diagram", help="draw the agent loop machine")
    diagram.add_argument("--format", choices=["mermaid", "dot", "svg", "png"], default="mermaid")
    diagram.add_argument("--out", help="write to this file (default: stdout for text formats)")
    diagram.add_argument("--preset", choices=["minimal", "coding-agent"], default="coding-agent")
    diagram.add_argument(
        "--direction",
        choices=["TB", "LR"],
        default="TB",
        help="layout: top to bottom (TB, the default; narrow) or left to right (LR; wide)",
    )
    diagram.add_argument(
        "--policies", action="store_true", help="name the policies behind each guard"
    )
    return parser


def _diagram(args: argparse.Namespace) -> int:
    from agentfsm.policies import presets

    from .diagram_cmd import DiagramUnavailable, render_diagram

    if args.format in ("svg", "png") and not args.out:
        print(f"agentfsm diagram: {args.format} is binary; give --out FILE", file=sys.stderr)
        return 2
    policies = None
    if args.policies:
        policies = presets.minimal() if args.preset == "minimal" else presets.coding_agent()
    try:
        rendered = render_diagram(args.format, policies=policies, direction=args.direction)
    except DiagramUnavailable as error:
        print(f"agentfsm diagram: {error}", file=sys.stderr)
        return 1
    if args.out:
        target = Path(args.out)
        try:
            if isinstance(rendered, bytes):
                target.write_bytes(rendered)
            else:
                target.write_text(rendered, "utf-8")
        except (OSError, ValueError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else error
            print(f"agentfsm diagram: cannot write {args.out[:200]!r}: {reason}", file=sys.stderr)
            return 2
        print(f"wrote {target}", file=sys.stderr)
    elif isinstance(rendered, bytes):
        print(f"agentfsm diagram: {args.format} is binary; give --out FILE", file=sys.stderr)
        return 2
    else:
        sys.stdout.write(rendered)
    return 0


def main(argv: Sequence[str] | None = None, *, chat: ChatFn | None = None) -> int:
    """Entry point; returns the exit code. ``chat`` replaces the provider (for tests and
    embedding)."""
    arguments = list(sys.argv[1:] if argv is None else argv)
    if arguments[:1] == ["conformance"]:
        from . import conformance_cmd

        return conformance_cmd.main(arguments[1:])
    parser = _parser()
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    with sanitized_logging():
        return _dispatch(args, chat)


def _dispatch(args: argparse.Namespace, chat: ChatFn | None) -> int:
    if args.command == "run":
        return run_cmd.run(args, chat)
    if args.command == "runs":
        from . import durable_cmd  # needs the durable extra (dbos)

        return durable_cmd.runs(args)
    if args.command == "batch":
        return batch_cmd.batch(args)
    if args.command == "worker":
        return batch_cmd.worker(args)
    if args.command in ("sessions", "trace"):
        return _sessions(args)
    return _diagram(args)
