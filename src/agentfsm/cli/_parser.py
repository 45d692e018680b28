"""The ``agentfsm`` command's parser: every option of every command, and nothing else.

It imports only :mod:`argparse`, so ``agentfsm --help`` and ``agentfsm run --help`` start as
fast as Python does; each command's module is imported when the command runs
(:mod:`agentfsm.cli._app`).
"""

from __future__ import annotations

import argparse

TYPE_CHECKING = False  # typing.TYPE_CHECKING, without importing typing (PEP 781)
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence
    from typing import Any, NoReturn

__all__ = [
    "TRUST_FLAG",
    "UsageParser",
    "add_batch_arguments",
    "add_run_arguments",
    "add_trust_argument",
    "add_worker_arguments",
    "build_parser",
    "file_name",
]

TRUST_FLAG = "--trust-workspace-settings"
"""The option that applies a widening workspace file for one run."""


class UsageParser(argparse.ArgumentParser):
    """Usage errors in one line (``agentfsm run: argument --x: …``), exit code 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} -h)\n")


def file_name(text: str) -> str:
    """A ``FILE`` argument: an empty one is a usage error, not "no file"."""
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a file name")
    return text


def _session_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workspace", default=".", metavar="DIR", help="whose sessions (default: .)"
    )
    parser.add_argument(
        "--session-dir",
        metavar="DIR",
        help="where the sessions are (default: the workspace's folder under "
        "$XDG_STATE_HOME/agentfsm/sessions)",
    )


def _sessions_arguments(sessions: argparse.ArgumentParser) -> None:
    sessions_actions = sessions.add_subparsers(dest="action", required=True)
    helps = {
        "list": "the recorded sessions, newest first (the first is 'latest')",
        "show": "one session's messages, tool calls and results",
    }
    for action, text in helps.items():
        sub = sessions_actions.add_parser(action, help=text, description=text)
        if action == "show":
            sub.add_argument("ref", help="latest, an id, or a unique id prefix")
        _session_options(sub)
        sub.add_argument("--json", action="store_true", help="one JSON document instead")


def _trace_arguments(trace: argparse.ArgumentParser) -> None:
    trace.add_argument("ref", help="latest, an id, or a unique id prefix")
    _session_options(trace)
    trace.add_argument("--json", action="store_true", help="one JSON document instead")
    trace.add_argument(
        "--html",
        metavar="FILE",
        type=file_name,
        help="write a self-contained HTML picture of the session (diagram, path, timeline)",
    )


def _runs_arguments(runs: argparse.ArgumentParser) -> None:
    runs_actions = runs.add_subparsers(dest="action", required=True)
    runs_list = runs_actions.add_parser("list", help="unfinished durable runs")
    runs_list.add_argument("--all", action="store_true", help="finished ones too")
    runs_list.add_argument("--json", action="store_true", help="one JSON document instead")
    runs_resume = runs_actions.add_parser("resume", help="finish an unfinished durable run")
    runs_resume.add_argument("id", help="the run's id (agentfsm runs list)")
    runs_output = runs_resume.add_mutually_exclusive_group()
    runs_output.add_argument("--json", action="store_true", help="events as JSON lines")
    runs_output.add_argument("--quiet", action="store_true", help="print only the final answer")
    runs_retry = runs_actions.add_parser(
        "retry", help="run failed durable runs again, with this command line's provider"
    )
    runs_retry.add_argument("ids", nargs="+", metavar="ID", help="failed runs (runs list --all)")
    _retry_provider_options(runs_retry)
    runs_retry.add_argument(
        "--out", metavar="FILE", type=file_name, help="write one result line per run here"
    )
    runs_retry.add_argument("--quiet", action="store_true", help="no progress line")
    _database_wait_option(runs_retry)
    for sub in (runs_list, runs_resume, runs_retry):
        sub.add_argument(
            "--database-url",
            metavar="URL",
            help="the DBOS system database of the durable runs (default: SQLite in "
            "$XDG_STATE_HOME)",
        )
        _verbose_option(sub)


def _diagram_arguments(diagram: argparse.ArgumentParser) -> None:
    diagram.add_argument(
        "--format",
        choices=["mermaid", "dot", "svg", "png"],
        default="mermaid",
        help="mermaid (default); dot needs the diagrams extra; svg and png also Graphviz",
    )
    diagram.add_argument(
        "--out", type=file_name, help="write to this file (default: stdout for text formats)"
    )
    diagram.add_argument(
        "--preset",
        choices=["minimal", "coding-agent"],
        default="coding-agent",
        help="the policies --policies names (default: coding-agent)",
    )
    diagram.add_argument(
        "--direction",
        choices=["TB", "LR"],
        default="TB",
        help="layout: top to bottom (TB, the default; narrow) or left to right (LR; wide)",
    )
    diagram.add_argument(
        "--policies", action="store_true", help="name the policies behind each guard"
    )


def _no_arguments(parser: argparse.ArgumentParser) -> None:
    """``conformance`` and ``fake-server`` parse their own arguments."""


def _verbose_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="with --durable or --otel: DBOS's and OpenTelemetry's logs on stderr "
        "(default: a log file, its path printed)",
    )


def _preset_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--preset",
        choices=["minimal", "coding-agent"],
        default="coding-agent",
        help="the policies: coding-agent (default: verify gate, pruning, loop health, wrap-up "
        "…) or minimal (the turn budget only)",
    )


def _call_options(parser: argparse.ArgumentParser) -> None:
    """What every chat call is sent with."""
    parser.add_argument(
        "--temperature", type=float, default=None, help="sampling temperature, 0 to 2"
    )
    parser.add_argument("--max-tokens", type=int, default=None, help="reply budget per call")
    parser.add_argument(
        "--context-budget",
        type=int,
        default=None,
        metavar="TOKENS",
        help="compress older history past this many tokens (local model: 6144)",
    )


def _retry_provider_options(parser: argparse.ArgumentParser) -> None:
    """The provider options of ``runs retry`` (none given: each run's own)."""
    parser.add_argument(
        "--provider",
        choices=["openai", "anthropic", "openai-compatible", "local"],
        help="default: each run's own",
    )
    parser.add_argument("--model", help="model name")
    parser.add_argument("--base-url", help="API root, e.g. http://127.0.0.1:8080/v1")
    parser.add_argument("--api-key-env", metavar="VAR", help="variable holding the API key")
    parser.add_argument(
        "--quirk",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a field of the wire's quirk profile, as for agentfsm run (repeatable)",
    )
    _call_options(parser)


def add_run_arguments(parser: Any) -> None:
    """The options of ``agentfsm run``."""
    parser.add_argument("prompt", help="the task")
    parser.add_argument(
        "--provider",
        choices=["openai", "anthropic", "openai-compatible", "local"],
        help="default: an OpenAI or Anthropic key in the environment, else the local model",
    )
    parser.add_argument(
        "--model",
        help="model name (an OpenAI-compatible server needs one; others have a default)",
    )
    parser.add_argument("--base-url", help="API root, e.g. http://127.0.0.1:8080/v1")
    parser.add_argument(
        "--api-key-env", metavar="VAR", help="environment variable holding the API key"
    )
    parser.add_argument(
        "--wire",
        choices=["chat", "anthropic", "responses"],
        help="the API the calls speak: chat (Chat Completions), anthropic (Messages) or "
        "responses (OpenAI Responses); default: the provider's own (anthropic for "
        "--provider anthropic, else chat)",
    )
    parser.add_argument(
        "--quirk",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a field of the wire's quirk profile (OpenAIQuirks; AnthropicQuirks for "
        "--provider anthropic; ResponsesQuirks for --wire responses), e.g. "
        "explicit_tool_choice=true; repeatable; over the settings' provider.quirks "
        "(docs/cli.md)",
    )
    parser.add_argument(
        "--workspace", default=".", metavar="DIR", help="the project folder (default: .)"
    )
    parser.add_argument("--max-turns", type=int, default=20, help="LLM calls allowed (default 20)")
    _preset_option(parser)
    parser.add_argument("--resume", metavar="latest|ID", help="continue a recorded session")
    parser.add_argument(
        "--session-dir",
        metavar="DIR",
        help="where the sessions are (default: the workspace's folder under "
        "$XDG_STATE_HOME/agentfsm/sessions)",
    )
    parser.add_argument(
        "--verify-command",
        metavar="CMD",
        help="the check the verify gate runs (default: the workspace's, as it is now)",
    )
    parser.add_argument(
        "--allow-network",
        action="store_true",
        help="let sandboxed commands use the network (default: none)",
    )
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="run the model's commands without the OS sandbox (unsafe; printed loudly)",
    )
    add_trust_argument(parser)
    _call_options(parser)
    parser.add_argument(
        "--durable",
        action="store_true",
        help="record every step in DBOS: a killed run resumes without paying again "
        "(agentfsm runs list|resume; docs/durable.md)",
    )
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="with --durable: the DBOS system database (default: SQLite in $XDG_STATE_HOME)",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help="export OpenTelemetry traces and metrics by OTLP/HTTP (OTEL_EXPORTER_OTLP_* "
        "variables; docs/telemetry.md)",
    )
    parser.add_argument(
        "--html",
        metavar="FILE",
        type=file_name,
        help="after the run, write a self-contained HTML picture of its session to FILE",
    )
    _verbose_option(parser)
    output = parser.add_mutually_exclusive_group()
    output.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per event on stdout, ending with one run_end summary",
    )
    output.add_argument("--quiet", action="store_true", help="print only the final answer")


def add_trust_argument(parser: Any) -> None:
    """``--trust-workspace-settings`` (shared by ``run`` and ``batch``)."""
    parser.add_argument(
        TRUST_FLAG,
        action="store_true",
        help="apply the workspace's .agentfsm/settings.json even though it widens the "
        "sandbox (network, paths outside the workspace, env, limits), for this run, without "
        "asking; review the file first (docs/cli.md)",
    )


def _concurrency(value: str) -> int:
    number = int(value)
    if not 1 <= number <= 10_000:
        raise argparse.ArgumentTypeError(f"must be between 1 and 10000, got {number}")
    return number


def _seconds(value: str) -> float:
    try:
        number = float(value)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds, got {value[:50]!r}"
        ) from None
    if not 0 < number <= 86_400 * 30:  # NaN fails it too
        raise argparse.ArgumentTypeError(
            f"must be more than 0 and at most 2592000 (30 days), got {value[:50]}"
        )
    return number


def _provider_options(parser: argparse.ArgumentParser) -> None:
    """The options of ``agentfsm run`` that shape each task's agent."""
    parser.add_argument(
        "--provider",
        choices=["openai", "anthropic", "openai-compatible", "local"],
        help="default: an OpenAI or Anthropic key in the environment, else the local model",
    )
    parser.add_argument("--model", help="model name (an OpenAI-compatible server needs one)")
    parser.add_argument(
        "--wire",
        choices=["chat", "anthropic", "responses"],
        help="the API the calls speak: chat (Chat Completions), anthropic (Messages) or "
        "responses (OpenAI Responses); default: the provider's own (anthropic for "
        "--provider anthropic, else chat)",
    )
    parser.add_argument("--base-url", help="API root, e.g. http://127.0.0.1:8080/v1")
    parser.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="environment variable holding the API key (its name is stored, never the key: "
        "each worker reads it from its own environment)",
    )
    parser.add_argument(
        "--workspace",
        default=".",
        metavar="DIR",
        help="the project folder of tasks without a workspace (default: .)",
    )
    parser.add_argument(
        "--max-turns", type=int, default=20, help="LLM calls allowed per task (default: 20)"
    )
    _preset_option(parser)
    parser.add_argument(
        "--verify-command", metavar="CMD", help="the check the verify gate runs, for every task"
    )
    parser.add_argument(
        "--allow-network",
        action="store_true",
        help="let sandboxed commands use the network (default: none)",
    )
    parser.add_argument(
        "--no-sandbox", action="store_true", help="run the model's commands unsandboxed (unsafe)"
    )
    add_trust_argument(parser)
    _call_options(parser)
    parser.add_argument(
        "--quirk",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a field of the wire's quirk profile, as for agentfsm run (repeatable)",
    )


def _queue_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="sqlite:///PATH (default: SQLite in $XDG_STATE_HOME) or postgresql://… for a fleet",
    )
    parser.add_argument(
        "--concurrency",
        type=_concurrency,
        default=4,
        metavar="N",
        help="tasks a worker runs at a time (default 4; stored with the queue)",
    )
    parser.add_argument(
        "--rate", metavar="N/PERIOD", help="task starts across all workers, e.g. 30/min"
    )
    parser.add_argument(
        "--poll", type=float, default=1.0, metavar="SECONDS", help=argparse.SUPPRESS
    )
    _database_wait_option(parser)


def _database_wait_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--database-wait",
        type=_seconds,
        default=300.0,
        metavar="SECONDS",
        help="how long to wait for a database that does not answer before giving up "
        "(default 300; the wait is shown)",
    )


def add_batch_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``agentfsm batch``."""
    parser.add_argument("tasks", help="a JSONL file: id, prompt (optional workspace, max_turns)")
    _provider_options(parser)
    _queue_options(parser)
    parser.add_argument(
        "--out", metavar="FILE", type=file_name, help="write one result line per task here"
    )
    parser.add_argument(
        "--no-work",
        action="store_true",
        help="only enqueue and wait: `agentfsm worker` processes run the tasks",
    )
    parser.add_argument(
        "--detach", action="store_true", help="enqueue and exit (implies --no-work)"
    )
    parser.add_argument("--quiet", action="store_true", help="no progress line")
    parser.add_argument(
        "--retry-failed",
        action="store_true",
        help="run the tasks that ended in error again, with this command line's options "
        "(a new attempt, ID@retryN)",
    )
    parser.add_argument(
        "--otel",
        action="store_true",
        help="export OpenTelemetry traces and metrics of the tasks this process runs",
    )
    _verbose_option(parser)


def add_worker_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``agentfsm worker``."""
    _queue_options(parser)
    parser.add_argument(
        "--executor-id",
        metavar="ID",
        help="this worker's DBOS executor id (default: the first free worker-HOST-N slot; "
        "a worker started in a killed one's slot finishes its tasks)",
    )
    parser.add_argument(
        "--requeue",
        metavar="EXECUTOR_ID",
        help="put the unfinished tasks of a dead executor back on the queue, then exit",
    )
    _verbose_option(parser)


_COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None]]] = {
    "run": ("run an agent on a task", add_run_arguments),
    "sessions": ("recorded sessions", _sessions_arguments),
    "trace": ("per-run counts of a session", _trace_arguments),
    "runs": ("durable runs (list, resume, retry)", _runs_arguments),
    "batch": ("many durable runs on a queue", add_batch_arguments),
    "worker": ("serve the batch task queue", add_worker_arguments),
    "conformance": ("check a provider (agentfsm conformance -h)", _no_arguments),
    "fake-server": (
        "a scripted model on a local port, to try agentfsm without a key (agentfsm fake-server -h)",
        _no_arguments,
    ),
    "diagram": ("draw the agent loop machine", _diagram_arguments),
}
"""Each command: its one-line help and the function that declares its arguments."""


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``agentfsm`` and its commands (``conformance`` and ``fake-server``
    parse their own).

    Given the command line ``argv``, only the command it names gets its arguments (the
    others are listed by name and help): ``agentfsm --help`` and ``agentfsm run --help``
    do not build every command's options. Without ``argv``, every command is complete.
    """
    parser = UsageParser(
        prog="agentfsm", description="An LLM agent loop as a declared state machine."
    )
    commands = parser.add_subparsers(dest="command", required=True)
    chosen = None if argv is None else next((a for a in argv if not a.startswith("-")), "")
    for name, (help_, declare) in _COMMANDS.items():
        sub = commands.add_parser(name, help=help_)
        if chosen is None or chosen == name:
            declare(sub)
    return parser
