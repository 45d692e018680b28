"""``agentfsm fake-server`` and ``python -m agentfsm.testing.serve``: a scripted model on
a local port, for trying ``agentfsm run`` without a key or a local model.

It serves the OpenAI Chat Completions wire and the OpenAI Responses wire
(``http://HOST:PORT/v1``) and the Anthropic Messages wire (``http://HOST:PORT``) at once,
from a built-in scenario or a JSON script
(:mod:`agentfsm.testing._scenarios`), until Ctrl-C or SIGTERM (exit code 0).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import threading
from collections.abc import Sequence
from types import FrameType

from ._fake_server import FakeProviderServer
from ._scenarios import SCENARIOS, load_script, scenario_handler

__all__ = ["DEFAULT_PORT", "build_parser", "main"]

DEFAULT_PORT = 8765
"""The port ``agentfsm fake-server`` listens on unless ``--port`` says."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (see {self.prog} -h)\n")


def build_parser(prog: str = "agentfsm fake-server") -> argparse.ArgumentParser:
    """The options of ``agentfsm fake-server``."""
    parser = _Parser(
        prog=prog,
        description="A scripted model on a local port (OpenAI Chat Completions, OpenAI "
        "Responses and Anthropic Messages wires), to try "
        "agentfsm run without a key or a local model. Ctrl-C stops it.",
    )
    parser.add_argument("--host", default="127.0.0.1", help="address (default: 127.0.0.1)")
    parser.add_argument(
        "--port",
        type=int,
        default=DEFAULT_PORT,
        help=f"port (default: {DEFAULT_PORT}; 0: any free port)",
    )
    parser.add_argument(
        "--api-key-env",
        metavar="NAME",
        help="require the key in this environment variable (a 401 without it; default: any "
        "key or none is accepted)",
    )
    parser.add_argument(
        "--context-window",
        type=int,
        metavar="TOKENS",
        help="answer a longer prompt with the wire's context-overflow error (default: none)",
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument(
        "--scenario",
        choices=SCENARIOS,
        default="tools",
        help="echo: answers with the prompt; tools (default): lists the workspace, reads a "
        "file, then answers (and calls the conformance kit's get_weather and get_time)",
    )
    source.add_argument(
        "--script",
        metavar="FILE",
        help='a JSON file of turns: [{"text": "..."}, {"tool_calls": [{"name": "list_dir", '
        '"arguments": {"path": "."}}]}, ...] (docs/cli.md)',
    )
    return parser


def _stop_on_sigterm(stop: threading.Event) -> None:
    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)


def main(argv: Sequence[str] | None = None, *, prog: str = "agentfsm fake-server") -> int:
    """Serve until Ctrl-C or SIGTERM; returns the exit code (0, or 2 on bad input)."""
    parser = build_parser(prog)
    try:
        args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
    except SystemExit as exit_:
        return int(exit_.code or 0)
    if args.context_window is not None and args.context_window < 1:
        print(f"{prog}: --context-window must be a positive number of tokens", file=sys.stderr)
        return 2
    if not 0 <= args.port <= 65535:
        print(f"{prog}: --port must be between 0 and 65535, got {args.port}", file=sys.stderr)
        return 2
    api_key = None
    if args.api_key_env:
        api_key = os.environ.get(args.api_key_env)
        if not api_key:
            print(
                f"{prog}: --api-key-env {args.api_key_env}: the variable is not set",
                file=sys.stderr,
            )
            return 2
    try:
        handler = scenario_handler(
            load_script(args.script) if args.script else args.scenario,
            api_key=api_key,
            context_window=args.context_window,
        )
    except (OSError, ValueError) as error:
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        print(f"{prog}: --script {args.script!r}: {reason}", file=sys.stderr)
        return 2
    server = FakeProviderServer(host=args.host, port=args.port)
    server.handler = handler
    try:
        server.start()
    except (OSError, RuntimeError) as error:
        cause = error.__cause__ if isinstance(error, RuntimeError) else error
        why = cause.strerror if isinstance(cause, OSError) and cause.strerror else cause
        print(
            f"{prog}: cannot listen on {args.host}:{args.port}: {why} "
            "(give another --port; 0 picks a free one)",
            file=sys.stderr,
        )
        return 2
    stop = threading.Event()
    _stop_on_sigterm(stop)
    model = "fake"
    what = f"the script {args.script}" if args.script else f"the {args.scenario} scenario"
    base = server.base_url
    prompt = shlex.quote("What is in this project?")
    print(
        f"fake-server: {what} on {base} (OpenAI Chat Completions and Responses wires: "
        f"{base}/v1; Anthropic wire: {base})"
    )
    key = f" --api-key-env {shlex.quote(args.api_key_env)}" if args.api_key_env else ""
    print("try, in a project folder:")
    print(f"  agentfsm run --base-url {base}/v1 --model {model}{key} {prompt}")
    print(f"  agentfsm run --wire responses --base-url {base}/v1 --model {model}{key} {prompt}")
    print(f"  agentfsm run --provider anthropic --base-url {base} --model {model}{key} {prompt}")
    print("Ctrl-C stops the server.", flush=True)
    try:
        while not stop.wait(0.2):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    print("fake-server: stopped", flush=True)
    return 0
