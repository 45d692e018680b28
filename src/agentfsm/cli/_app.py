"""The ``agentfsm`` command line: its dispatch (see :mod:`agentfsm.cli`).

``agentfsm run PROMPT`` · ``agentfsm sessions list|show ID`` · ``agentfsm trace ID`` ·
``agentfsm diagram`` · ``agentfsm fake-server``. ``python -m agentfsm`` is the same command, but
imports ``./agentfsm/`` first when run in a workspace: prefer the console script.

The parser (:mod:`agentfsm.cli._parser`) imports only :mod:`argparse`; a command's module,
and with it the engine, the providers and the tools, is imported when the command runs, so
``agentfsm --help`` and a usage error cost little more than starting Python.
"""

from __future__ import annotations

import argparse
import sys

from ._parser import build_parser

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (PEP 781)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from pathlib import Path

    from agentfsm.engine import ChatFn

__all__ = ["main"]


def _session_dir(args: argparse.Namespace) -> Path:
    from pathlib import Path

    from agentfsm.adapters.sessions import default_session_dir

    if args.session_dir:
        return Path(args.session_dir)
    return default_session_dir(args.workspace)


def _sessions(args: argparse.Namespace) -> int:
    """``sessions list|show`` and ``trace``: a usage error is one line and exit code 2."""
    from agentfsm.adapters.sessions import SessionNotFound

    from . import _sessions_cmd as sessions_cmd
    from ._terminal import sanitize

    command = "trace" if args.command == "trace" else f"sessions {args.action}"
    try:
        folder = _session_dir(args)
        if args.command == "trace" and args.html:
            return sessions_cmd.trace_html(folder, args.ref, args.html)
        if args.command == "trace":
            return sessions_cmd.trace(folder, args.ref, args.json)
        if args.action == "list":
            return sessions_cmd.list_sessions(folder, args.json)
        return sessions_cmd.show_session(folder, args.ref)
    except BrokenPipeError:
        raise  # not a session problem: main ends quietly
    except (SessionNotFound, OSError, ValueError) as error:
        print(f"agentfsm {command}: {sanitize(sessions_cmd.describe(error))}", file=sys.stderr)
        return 2


def _diagram(args: argparse.Namespace) -> int:
    from pathlib import Path

    from agentfsm.policies import presets

    from ._diagram_cmd import DiagramUnavailable, render_diagram

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
        from . import _conformance_cmd as conformance_cmd

        return conformance_cmd.main(arguments[1:])
    if arguments[:1] == ["fake-server"]:
        from agentfsm.testing.serve import main as serve

        return serve(arguments[1:])
    parser = build_parser(arguments)
    try:
        args = parser.parse_args(arguments)
    except SystemExit as exit_:
        return int(exit_.code or 0)
    args.argv = arguments  # the command line, to print the command that continues a batch
    from ._terminal import sanitized_logging

    durable = args.command in ("batch", "runs") or getattr(args, "durable", False)
    restore = _on_signals() if durable else None
    try:
        with sanitized_logging():
            try:
                code = _dispatch(args, chat)
                sys.stdout.flush()
            except BrokenPipeError:
                return _closed_pipe()
            except KeyboardInterrupt:  # before the command's own handling began (its checks)
                if not durable:
                    raise
                print(f"agentfsm {args.command}: interrupted", file=sys.stderr, flush=True)
                code = 130
    finally:
        if restore is not None:
            restore()
    if durable:
        from ._database_wait import terminated

        code = 143 if code == 130 and terminated.is_set() else code
    if argv is None and args.command in ("batch", "worker", "runs"):
        from ._database_wait import end_process

        end_process(code)  # the agentfsm process itself: done, it need not tear DBOS down
    return code


def _on_signals() -> Callable[[], None] | None:
    """For a durable command other than ``worker`` (which serves until a signal), SIGTERM
    stops it as Ctrl-C does, with one line, and its exit code is 143; SIGINT stops it even
    when the process was started with SIGINT ignored (a background job of a shell script
    inherits that), as it stops a worker; the handlers to put back (``None`` outside the
    main thread, where no handler can be set)."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return None
    from ._database_wait import interrupt

    previous = {
        signal.SIGTERM: signal.signal(signal.SIGTERM, interrupt),
        signal.SIGINT: signal.signal(signal.SIGINT, signal.default_int_handler),
    }

    def restore() -> None:
        for signum, handler in previous.items():
            signal.signal(signum, handler)

    return restore


def _closed_pipe() -> int:
    """The reader of stdout went away (``agentfsm trace latest | head -1``): end quietly,
    as other command-line tools do, with the exit code of a process SIGPIPE ended (141).
    stdout is pointed at the null device so that nothing complains at exit."""
    import contextlib
    import os

    with contextlib.suppress(OSError, ValueError, AttributeError):
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    return 141


def _run(args: argparse.Namespace, chat: ChatFn | None) -> int:
    if getattr(args, "durable", False):
        if chat is not None:
            print("agentfsm run: --durable builds its provider from the options", file=sys.stderr)
            return 2
        from . import _durable_cmd as durable_cmd  # needs the durable extra (dbos)

        return durable_cmd.run_durable(args)
    from . import _run_cmd as run_cmd

    return run_cmd.run(args, chat)


def _dispatch(args: argparse.Namespace, chat: ChatFn | None) -> int:
    if args.command == "run":
        if getattr(args, "otel", False):
            from ._otel import run_with_otel  # needs the cli-otel extra

            return run_with_otel(args, lambda args: _run(args, chat))
        return _run(args, chat)
    if args.command == "runs":
        from . import _durable_cmd as durable_cmd  # needs the durable extra (dbos)

        return durable_cmd.runs(args)
    if args.command in ("batch", "worker"):
        from . import _batch_cmd as batch_cmd

        return batch_cmd.batch(args) if args.command == "batch" else batch_cmd.worker(args)
    if args.command in ("sessions", "trace"):
        return _sessions(args)
    return _diagram(args)
