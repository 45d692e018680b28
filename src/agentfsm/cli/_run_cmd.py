"""``agentfsm run``: one agent run in a workspace, on a real or local provider."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import math
import os
import signal
import sys
from pathlib import Path

from agentfsm.adapters.providers import (
    LOCAL_CONTEXT_TOKENS,
    LOCAL_MODEL_NAME,
    LOCAL_QUIRKS,
    AnthropicChat,
    AnthropicQuirks,
    LocalModel,
    LocalModelUnavailable,
    OpenAIChat,
    OpenAIQuirks,
    OpenAIResponses,
    QuirkProfile,
    ResponsesQuirks,
    WireName,
    parse_quirk,
    quirk_profile,
)
from agentfsm.adapters.sessions import (
    SessionHandle,
    SessionNotFound,
    default_session_dir,
    resolve_session,
)
from agentfsm.adapters.tools import SETTINGS_FILE, Settings, SettingsError
from agentfsm.agent import Hooks
from agentfsm.engine import ChatFn, LoopOutcome
from agentfsm.sandbox import (
    PROTECTED_DIR,
    CommandSandbox,
    SandboxUnavailable,
    Unsandboxed,
    check_workspace,
    detect_sandbox,
)

from ._agent_build import build_agent
from ._errors import UsageError
from ._parser import add_run_arguments as add_arguments
from ._render import HumanRenderer, JsonRenderer, QuietRenderer, Renderer
from ._report import Endpoint, RunTally, describe_failure, run_end
from ._run_html import attach_picture
from ._session_provider import SERVICES, adopt_session_provider, record_provider, recordable_url
from ._settings_trust import (
    RunSettings,
    SettingsRefused,
    consent,
    interactive,
    read_run_settings,
)
from ._shown_once import ShownOnce
from ._terminal import one_line

__all__ = [
    "DEFAULT_MODELS",
    "KEY_ENVS",
    "SYSTEM_PROMPT",
    "WIRES",
    "add_arguments",
    "exit_code",
    "quirks",
    "run",
    "run_settings",
    "run_wire",
]

SYSTEM_PROMPT = (
    "You are a careful coding agent working in the project described below. Use the tools to "
    "look at files before changing them, make the smallest change that does the task, and "
    "finish with a short summary of what you did."
)
DEFAULT_MODELS = {
    "openai": "gpt-4.1-mini",
    "anthropic": "claude-haiku-4-5",
}
"""Each hosted provider's model when ``--model`` is not given; an OpenAI-compatible server
has none (``--model`` is required)."""
KEY_ENVS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
"""Where each hosted provider's key is read from unless ``--api-key-env`` says."""
WIRES: dict[str, WireName] = {
    "chat": "openai-chat",
    "anthropic": "anthropic",
    "responses": "openai-responses",
}
"""``--wire`` names and the wires they choose."""


MAX_TURNS = 100_000
"""Largest ``--max-turns``."""
MAX_TOKENS_OPTION = 10_000_000
"""Largest ``--max-tokens`` and ``--context-budget``."""

LOCAL_MAX_TOKENS = 512
"""Reply budget for the small local model, which otherwise rambles until its window is full."""


def exit_code(outcome: LoopOutcome) -> int:
    """0 final answer, 3 budget or policy stop, 130 interrupted; 1 when the run's session
    could not be recorded (unless interrupted)."""
    code = {"final": 0, "budget": 3, "policy": 3, "aborted": 130}[outcome.stopped_reason]
    return 1 if outcome.session_error is not None and code != 130 else code


def _provider(args: argparse.Namespace) -> str:
    if args.provider:
        return str(args.provider)
    if args.base_url:
        return "openai-compatible"
    if os.environ.get("OPENAI_API_KEY"):
        return "openai"
    if os.environ.get("ANTHROPIC_API_KEY"):
        return "anthropic"
    return "local"


def _key_env(args: argparse.Namespace) -> str | None:
    """The environment variable the API key is read from (``None``: no key is sent). A
    hosted provider's standard variable is not read for a base URL a resumed session
    chose (``withhold_key``, set by :func:`adopt_session_provider`)."""
    if args.api_key_env or getattr(args, "withhold_key", False):
        return args.api_key_env or None
    return KEY_ENVS.get(_provider(args))


def _key(args: argparse.Namespace) -> str | None:
    env = _key_env(args)
    if env is None:
        return None
    value = os.environ.get(env)
    if args.api_key_env and not value:
        raise UsageError(f"the environment variable {env} is not set")
    return value or None


def _endpoint(args: argparse.Namespace) -> Endpoint:
    """Where the calls go and which variable the key came from, to explain failures."""
    provider = _provider(args)
    env = _key_env(args)
    return Endpoint(
        provider,
        args.base_url or SERVICES.get(provider),
        env,
        key_sent=env is not None and bool(os.environ.get(env)),
    )


def run_wire(args: argparse.Namespace) -> WireName:
    """The wire the run speaks: ``--wire``, else the provider's own (Anthropic's Messages
    for ``anthropic``, Chat Completions for the others). The local model speaks only
    Chat Completions."""
    chosen = getattr(args, "wire", None)
    if not chosen:
        return "anthropic" if _provider(args) == "anthropic" else "openai-chat"
    if chosen not in WIRES:
        raise UsageError(f"unknown wire {chosen!r} (chat, anthropic or responses)")
    if _provider(args) == "local" and chosen != "chat":
        raise UsageError("the local model speaks the chat wire only: leave --wire out")
    return WIRES[chosen]


def quirks(args: argparse.Namespace, settings: Settings) -> QuirkProfile:
    """The run's quirk profile: the provider's defaults, then the settings'
    ``provider.quirks``, then each ``--quirk NAME=VALUE`` (the command line wins)."""
    provider = _provider(args)
    wire = run_wire(args)
    try:
        profile = quirk_profile(
            wire, dict(settings.provider.quirks), LOCAL_QUIRKS if provider == "local" else None
        )
    except ValueError as error:
        raise UsageError(f"{SETTINGS_FILE}: provider.quirks: {error}") from None
    try:
        pairs = dict(parse_quirk(text) for text in getattr(args, "quirk", None) or ())
        return quirk_profile(wire, pairs, profile)
    except ValueError as error:
        raise UsageError(f"--quirk: {error}") from None


async def _chat(
    args: argparse.Namespace,
    renderer: Renderer,
    stack: contextlib.AsyncExitStack,
    settings: Settings,
) -> ChatFn:
    provider = _provider(args)
    profile = quirks(args, settings)
    openai_quirks = profile if isinstance(profile, OpenAIQuirks) else None
    if provider == "local":
        local = LocalModel(on_progress=renderer.progress)
        await stack.enter_async_context(local)
        chat = local.chat(quirks=openai_quirks or LOCAL_QUIRKS)
        stack.push_async_callback(chat.aclose)
        return chat
    if provider == "openai-compatible":
        if not args.base_url:
            raise UsageError("--provider openai-compatible needs --base-url")
        if not args.model:
            raise UsageError(_NEEDS_MODEL)
    elif provider not in DEFAULT_MODELS:
        raise UsageError(f"unknown provider {provider!r}")
    model = args.model or DEFAULT_MODELS[provider]
    base_url = args.base_url or SERVICES[provider]
    adapter: OpenAIChat | AnthropicChat | OpenAIResponses
    wire = run_wire(args)
    if wire == "anthropic":
        anthropic_quirks = profile if isinstance(profile, AnthropicQuirks) else None
        adapter = AnthropicChat(
            model, base_url=base_url, api_key=_key(args), quirks=anthropic_quirks
        )
    elif wire == "openai-responses":
        responses_quirks = profile if isinstance(profile, ResponsesQuirks) else None
        adapter = OpenAIResponses(
            model, base_url=base_url, api_key=_key(args), quirks=responses_quirks
        )
    else:
        adapter = OpenAIChat(model, base_url=base_url, api_key=_key(args), quirks=openai_quirks)
    stack.push_async_callback(adapter.aclose)
    return adapter


def _provider_record(args: argparse.Namespace) -> dict[str, str | None]:
    """What the session records of its provider (``--resume`` reads it): never a key (a
    base URL carrying credentials or a query is not recorded)."""
    provider = _provider(args)
    model = args.model or DEFAULT_MODELS.get(provider)
    return {
        "provider": provider,
        "base_url": recordable_url(args.base_url),
        "model": LOCAL_MODEL_NAME if provider == "local" else model,
        "api_key_env": args.api_key_env,
    }


def _no_model(args: argparse.Namespace, error: LocalModelUnavailable) -> LocalModelUnavailable:
    """``error``, explained when no provider was asked for: there is no key and no local
    model, so say how to name a server."""
    if args.provider is not None:
        return error
    return LocalModelUnavailable(
        "no model to talk to: no OPENAI_API_KEY or ANTHROPIC_API_KEY is set and the local "
        f"model cannot run ({error}); give --base-url URL --model NAME for an "
        "OpenAI-compatible server (agentfsm fake-server starts a scripted one), or set a key"
    )


_NEEDS_MODEL = (
    "an OpenAI-compatible server (--provider openai-compatible, or --base-url without "
    "--provider) needs --model NAME: the name of a model the server serves"
)


def _renderer(args: argparse.Namespace, session_dir: Path | None = None) -> Renderer:
    if args.json:
        return JsonRenderer()
    if args.quiet:
        return QuietRenderer()
    return HumanRenderer(shown_once=ShownOnce(session_dir) if session_dir is not None else None)


NO_SANDBOX_WARNING = (
    "WARNING: --no-sandbox: the commands the model runs (shell tool, verify gate) get your "
    "full access to this machine: every file you can read or write, the network, your "
    "processes. Use it only for a model and a workspace you trust."
)


def _sandbox(
    args: argparse.Namespace,
    workspace: Path,
    settings: Settings,
    protected: tuple[str, ...],
    *,
    warn: bool = True,
) -> CommandSandbox:
    """The sandbox of the run's commands; without one the run does not start. ``warn``:
    print the ``--no-sandbox`` warning (commands of many runs print it once themselves)."""
    if args.no_sandbox:
        if warn:
            print(f"agentfsm run: {NO_SANDBOX_WARNING}", file=sys.stderr)
        return Unsandboxed(env=settings.sandbox.env)
    try:
        sandbox = detect_sandbox(
            workspace,
            allow_network=args.allow_network or settings.sandbox.network,
            read_paths=settings.sandbox.read,
            write_paths=settings.sandbox.write,
            protected=protected,
            env=settings.sandbox.env,
            limits=settings.sandbox.limits,
        )
    except (SandboxUnavailable, ValueError) as error:
        raise UsageError(str(error)) from None
    bound = sandbox.describe().get("limits", {}).get("processes_bound", "")
    if warn and bound.startswith("NOT BOUNDED"):
        print(f"agentfsm run: WARNING: sandboxed processes are {bound}", file=sys.stderr)
    return sandbox


def _protected(workspace: Path, session_dir: Path) -> tuple[str, ...]:
    """The agent's own paths inside the workspace, hidden from the model's tools."""
    protected = [PROTECTED_DIR]
    resolved = session_dir.resolve()
    if resolved.is_relative_to(workspace) and resolved != workspace:
        protected.append(resolved.relative_to(workspace).as_posix())
    elif workspace.is_relative_to(resolved):
        raise UsageError("--session-dir must not contain the workspace")
    return tuple(protected)


async def _run(
    args: argparse.Namespace,
    workspace: Path,
    session_dir: Path,
    chat_override: ChatFn | None,
    sandbox: CommandSandbox,
    protected: tuple[str, ...],
    settings: Settings,
    parent: Path | None,
) -> int:
    renderer = _renderer(args, session_dir)
    tally = RunTally()
    endpoint = _endpoint(args) if chat_override is None else None
    key_env = _key_env(args)
    secrets = tuple(v for v in (os.environ.get(key_env) if key_env else None,) if v)

    def finish(
        reason: str,
        code: int,
        outcome: LoopOutcome | None = None,
        session: SessionHandle | None = None,
        error: BaseException | None = None,
    ) -> int:
        lost = session.error if session is not None else None
        end = run_end(
            stopped_reason=reason,
            exit_code=code,
            tally=tally,
            outcome=outcome,
            # a run that recorded nothing left no file (see SessionHandle.remove_if_empty)
            session=session.path if session is not None and session.path.exists() else None,
            resumed_from=parent,
            error=describe_failure(error, endpoint, secrets) if error is not None else None,
            session_error=None
            if lost is None
            else "a record could not be written: " + " ".join(str(lost.strerror or lost).split()),
        )
        # The human summary always gives the picture's path; --json and --quiet only when
        # asked for with --html (their output is for programs).
        human = not (getattr(args, "json", False) or getattr(args, "quiet", False))
        attach_picture(end, getattr(args, "html", None), beside_session=human)
        renderer.finish(end, outcome)
        return code

    async with contextlib.AsyncExitStack() as stack:
        try:
            chat = chat_override or await _chat(args, renderer, stack, settings)
        except LocalModelUnavailable as error:
            return finish("failed", 1, error=_no_model(args, error))
        local = _provider(args) == "local" and chat_override is None
        budget = args.context_budget or (LOCAL_CONTEXT_TOKENS * 3 // 4 if local else None)
        max_tokens = args.max_tokens or (LOCAL_MAX_TOKENS if local else None)
        try:
            engine = build_agent(
                args,
                chat=chat,
                workspace=workspace,
                session_dir=session_dir,
                sandbox=sandbox,
                protected=protected,
                settings=settings,
                system_prompt=SYSTEM_PROMPT,
                budget=budget,
                max_tokens=max_tokens,
                hooks=Hooks(stop=tally.on_stop),
            )
            # The run's own file, named before the run starts, so a failed run names it too.
            handle = engine.new_session()
        except (ValueError, NotADirectoryError) as error:
            raise UsageError(str(error)) from None
        renderer.attach(engine.events)
        tally.attach(engine.events)
        if chat_override is None:
            record_provider(engine.events, handle, _provider_record(args))
        task = asyncio.current_task()
        presses = {"n": 0}

        def on_interrupt() -> None:
            presses["n"] += 1
            if presses["n"] == 1:
                renderer.progress("interrupting … (Ctrl-C again to quit at once)")
                engine.interrupt("ctrl-c")
            elif task is not None:
                task.cancel()

        loop = asyncio.get_running_loop()
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(signal.SIGINT, on_interrupt)
        try:
            outcome = await engine.run(
                args.prompt, resume=parent.name if parent else None, session=handle
            )
        except (SessionNotFound, NotADirectoryError) as error:
            raise UsageError(str(error)) from None
        except asyncio.CancelledError as error:
            return finish("cancelled", 130, session=handle, error=error)
        except Exception as error:  # reported once, as a documented kind (ProviderError, …)
            return finish("failed", 1, session=handle, error=error)
        finally:
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.remove_signal_handler(signal.SIGINT)
    return finish(outcome.stopped_reason, exit_code(outcome), outcome, handle)


def _check_numbers(args: argparse.Namespace) -> None:
    """Refuse numbers no run can use, before anything starts."""
    if not 1 <= args.max_turns <= MAX_TURNS:
        raise UsageError(f"--max-turns must be between 1 and {MAX_TURNS}")
    temperature = args.temperature
    if temperature is not None and not (math.isfinite(temperature) and 0 <= temperature <= 2):
        raise UsageError(f"--temperature must be a number from 0 to 2, got {temperature}")
    for option, value in (
        ("--max-tokens", args.max_tokens),
        ("--context-budget", args.context_budget),
    ):
        if value is not None and not 1 <= value <= MAX_TOKENS_OPTION:
            raise UsageError(f"{option} must be between 1 and {MAX_TOKENS_OPTION}, got {value}")
    if args.base_url is not None:
        scheme, _, rest = args.base_url.partition("://")
        if (
            scheme not in ("http", "https")
            or not rest.strip("/")
            or any(c.isspace() or not c.isprintable() for c in args.base_url)
        ):
            raise UsageError(f"--base-url must be an http(s) URL, got {args.base_url[:200]!r}")


def _folder(option: str, value: str) -> Path:
    """``value`` resolved, or a usage error naming ``option``."""
    try:
        return Path(value).resolve()
    except (OSError, ValueError, RuntimeError) as error:
        raise UsageError(f"{option} {value[:200]!r} is not usable: {error}") from None


def _paths(args: argparse.Namespace) -> tuple[Path, Path]:
    """The workspace and the session folder, checked."""
    workspace = _folder("--workspace", args.workspace)
    try:
        if not workspace.is_dir():
            raise UsageError(f"--workspace {args.workspace[:200]!r} is not a folder")
        check_workspace(workspace)
        session_dir = (
            _folder("--session-dir", args.session_dir)
            if args.session_dir
            else default_session_dir(workspace)
        )
        if session_dir.exists() and not session_dir.is_dir():
            raise UsageError(f"--session-dir {args.session_dir[:200]!r} is not a folder")
    except ValueError as error:
        raise UsageError(str(error)) from None
    except OSError as error:
        raise UsageError(f"cannot use the given folders: {error.strerror or error}") from None
    return workspace, session_dir


def ensure_session_dir(folder: Path, option: str) -> None:
    """Create the session folder now, or refuse the run: a run is never left unrecorded.
    Called after the other checks, so a usage error leaves no folder behind."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as error:
        raise UsageError(
            f"{option} {str(folder)[:200]!r} cannot be created or written: "
            f"{error.strerror or error}"
        ) from None


def check_prompt(prompt: str) -> None:
    """Refuse an empty task, as ``agentfsm batch`` does."""
    if not prompt.strip():
        raise UsageError("the prompt must be a non-empty string, e.g. agentfsm run 'fix the tests'")


def _resumed_provider_line(args: argparse.Namespace) -> str:
    """What a resumed run talks to, and which variable's key it sends (said before any
    request: the session file chose some of it)."""
    endpoint = _endpoint(args)
    where = f" at {endpoint.address()}" if endpoint.address() else ""
    model = f", model {args.model[:100]}" if args.model else ""
    key = f"key from {endpoint.key_env}" if endpoint.key_sent else "no API key sent"
    return f"resuming with provider {endpoint.provider}{where}{model}, {key}"


def _check_inputs(
    args: argparse.Namespace, session_dir: Path, chat_override: ChatFn | None
) -> Path | None:
    """Refuse a provider that cannot be built and a session that cannot be resumed; returns
    the session file ``--resume`` names (resolved now: the run's own new file must not be
    taken for ``latest``)."""
    parent = None
    if args.resume is not None:
        try:
            parent = resolve_session(session_dir, args.resume)
        except SessionNotFound as error:
            raise UsageError(str(error)) from None
        if chat_override is None:  # the resumed session's provider, unless given
            try:
                said = adopt_session_provider(args, parent)
            except (ValueError, SessionNotFound) as error:  # e.g. a file over the size bound
                raise UsageError(str(error)) from None
            for line in [*said, _resumed_provider_line(args)]:
                print(f"agentfsm run: {one_line(line)}", file=sys.stderr)
    if args.api_key_env is not None and not os.environ.get(args.api_key_env):
        raise UsageError(f"the environment variable {args.api_key_env[:100]!r} is not set")
    if args.provider == "openai-compatible" and not args.base_url:
        raise UsageError("--provider openai-compatible needs --base-url")
    if chat_override is None and _provider(args) == "openai-compatible" and not args.model:
        raise UsageError(_NEEDS_MODEL)
    return parent


class _ReportedHere(logging.Filter):
    """Drops the engine's log line of a failed run: ``agentfsm run`` reports it itself."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (
            record.levelno >= logging.ERROR
            and isinstance(record.msg, str)
            and record.msg.startswith(("agentfsm: chat call failed", "agentfsm: run failed"))
        )


def run_settings(command: str, args: argparse.Namespace, workspace: Path) -> RunSettings:
    """The settings of a run in ``workspace``: the user's and the workspace's, the latter
    only if it widens nothing or the user agrees (``--trust-workspace-settings``, or yes on
    a terminal). Raises :class:`UsageError` (exit code 2) otherwise, or when a file is
    malformed."""
    try:
        found = read_run_settings(workspace)
        consent(
            command,
            workspace,
            found,
            trust_flag=bool(getattr(args, "trust_workspace_settings", False)),
            ask=interactive(bool(getattr(args, "json", False))),
        )
    except (SettingsError, SettingsRefused) as error:
        raise UsageError(str(error)) from None
    return found


def run(args: argparse.Namespace, chat_override: ChatFn | None = None) -> int:
    """Run ``agentfsm run``; returns the exit code."""
    try:
        check_prompt(args.prompt)
        _check_numbers(args)
        workspace, session_dir = _paths(args)
        parent = _check_inputs(args, session_dir, chat_override)
        settings = run_settings("agentfsm run", args, workspace).settings
        quirks(args, settings)  # a bad profile stops the run before anything starts
        protected = _protected(workspace, session_dir)
        sandbox = _sandbox(args, workspace, settings, protected)
        ensure_session_dir(session_dir, "--session-dir" if args.session_dir else "session folder")
        engine_log = logging.getLogger("agentfsm.engine")
        reported = _ReportedHere()
        engine_log.addFilter(reported)
        try:
            return asyncio.run(
                _run(
                    args,
                    workspace,
                    session_dir,
                    chat_override,
                    sandbox,
                    protected,
                    settings,
                    parent,
                )
            )
        finally:
            engine_log.removeFilter(reported)
    except UsageError as error:
        print(f"agentfsm run: {one_line(str(error))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
