"""``McpTools``: the tools of one or more MCP servers, as a :class:`ToolRunner`.

Needs the ``mcp`` SDK (``pip install 'agentfsm[mcp]'``); it is imported when the servers are
connected, so this module itself imports without it.
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import shlex
import shutil
import sys
from collections import Counter
from collections.abc import Awaitable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

from attrs import field, frozen

from agentfsm.engine import SupportsAbort, ToolCall, ToolResult, ToolSpec
from agentfsm.sandbox import CommandSandbox, check_sandbox

from ._mcp_process import (
    MAX_ERRLOG_BYTES,
    MAX_GARBAGE_REPORTS,
    ErrlogPump,
    fileno,
    quiet_garbage,
)
from ._toolbox import fit_result
from ._truncate import DEFAULT_MODEL_OUTPUT_CHARS, OutputStore

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult, Tool

__all__ = [
    "MAX_CONTENT_BLOCKS",
    "MAX_ERRLOG_BYTES",
    "MAX_GARBAGE_REPORTS",
    "MAX_IMAGE_CHARS",
    "McpConnectionError",
    "McpServer",
    "McpTools",
]

MAX_CONTENT_BLOCKS = 1000
"""Content blocks of one result read; the rest are counted."""
MAX_IMAGE_CHARS = 8 * 1024 * 1024
"""Largest base64 image passed on to the model (8 MiB of base64)."""

_DEFAULT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
_HTTP_TIMEOUTS = (30.0, 300.0)
"""Seconds to connect/write, and that a response stream may stay silent (the SDK's)."""


class McpConnectionError(RuntimeError):
    """A server could not be started, connected to, or listed; the message names it."""


@frozen
class McpServer:
    """How to reach one MCP server. Build it with :meth:`stdio` or :meth:`http`."""

    name: str
    """Names the server in errors, and prefixes its tools when two servers share a name."""
    transport: Literal["stdio", "http"]
    command: str | None = None
    """stdio: the executable to run."""
    args: tuple[str, ...] = ()
    """stdio: its arguments."""
    env: dict[str, str] | None = None
    """stdio: variables set over the SDK's safe default environment (``PATH``, ``HOME``…)."""
    cwd: str | None = None
    """stdio: the working directory."""
    url: str | None = None
    """http: the streamable-HTTP endpoint, such as ``http://127.0.0.1:8000/mcp``."""
    headers: dict[str, str] = field(factory=dict)
    """http: headers sent with every request (authentication, say)."""
    sandbox: CommandSandbox | None = field(default=None, eq=False)
    """stdio: run the server inside this OS sandbox (``None``: as this process's user, like
    any program you configure yourself)."""

    def __attrs_post_init__(self) -> None:
        check_sandbox(self.sandbox, "McpServer")
        if not self.name:
            raise ValueError("an MCP server needs a name")
        if self.transport == "stdio" and not self.command:
            raise ValueError(f"MCP server {self.name!r}: stdio needs a command")
        if self.transport == "http" and not self.url:
            raise ValueError(f"MCP server {self.name!r}: http needs a url")

    @classmethod
    def stdio(
        cls,
        name: str,
        *,
        command: str,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        sandbox: CommandSandbox | None = None,
    ) -> McpServer:
        """A server run as a subprocess, speaking over its stdin and stdout.

        With ``sandbox`` (e.g. ``detect_sandbox(root)``) the server and everything it starts
        run confined like the shell tool: it sees the system read-only, writes only the
        sandbox's root and a private ``/tmp``, has no network unless the sandbox allows it, and
        dies with its connection. ``env`` still reaches it (it is yours, not the model's).
        """
        return cls(
            name,
            "stdio",
            command=command,
            args=tuple(args),
            env=dict(env) if env is not None else None,
            cwd=str(cwd) if cwd is not None else None,
            sandbox=sandbox,
        )

    @classmethod
    def http(cls, name: str, *, url: str, headers: Mapping[str, str] | None = None) -> McpServer:
        """A server reached over streamable HTTP."""
        return cls(name, "http", url=url, headers=dict(headers or {}))

    def describe(self) -> str:
        """The command line or URL, for messages."""
        if self.transport == "http":
            return str(self.url)
        return " ".join([str(self.command), *self.args])


class _Link:
    """One server's connection, held open by a task of its own until ``stop`` is set."""

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.session: ClientSession | None = None
        self.tools: list[Tool] = []
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.stop = asyncio.Event()
        self.task: asyncio.Task[None] | None = None


class McpTools:
    """A :class:`ToolRunner` over the tools of MCP servers (stdio or streamable HTTP).

    Use ``async with McpTools(servers) as tools`` or :meth:`start` / :meth:`aclose`. A tool
    keeps its name unless several servers offer that name: each of those is then exposed as
    ``<server>__<tool>``. Tool annotations map to :class:`ToolSpec` flags: ``readOnlyHint``
    makes a tool concurrency-safe; any other tool is destructive unless ``destructiveHint``
    is false (MCP's default is true).

    The SDK's transports and sessions use anyio task groups, which must be exited by the task
    that entered them. Each server's connection is therefore opened and closed by a task of
    its own, started by :meth:`start`: :meth:`start`, :meth:`run` and :meth:`aclose` may be
    awaited from any tasks, but all on the event loop that ran :meth:`start`.

    Results are cut like a :class:`~agentfsm.adapters.tools.ToolBox`'s: text (and
    structured content) and errors longer than ``max_output_chars`` reach the model as head
    and tail; with ``store`` (share a ToolBox's, whose ``read_output`` then pages them) the
    cut text is kept, without one the marker says it was not.

    A stdio server runs in a process group of its own: when it exits, crashes or is stopped,
    everything it started in that group is killed with it. Lines on its stdout that are not
    JSON-RPC are reported in one log line each, without tracebacks, and at most
    :data:`MAX_GARBAGE_REPORTS` times per start.

    Args:
        servers: The servers, in the order their tools are listed.
        call_timeout: Seconds one tool call may take.
        connect_timeout: Seconds one server may take to start, connect and list its tools.
        errlog: Where stdio servers' stderr goes (default: ``sys.stderr`` at start). A
            stream without a file descriptor (``io.StringIO``) is fed through a pipe, at
            most :data:`MAX_ERRLOG_BYTES` per server.
        max_output_chars: Longest result or error text the model receives whole.
        store: Where cut results are kept for ``read_output``.
    """

    def __init__(
        self,
        servers: Sequence[McpServer],
        *,
        call_timeout: float = 120.0,
        connect_timeout: float = 30.0,
        errlog: TextIO | None = None,
        max_output_chars: int = DEFAULT_MODEL_OUTPUT_CHARS,
        store: OutputStore | None = None,
    ) -> None:
        names = [server.name for server in servers]
        if len(set(names)) != len(names):
            raise ValueError(f"MCP server names must be unique: {names}")
        self.servers = tuple(servers)
        self.call_timeout = call_timeout
        self.connect_timeout = connect_timeout
        self._errlog = errlog
        self.max_output_chars = max_output_chars
        self.store = store
        self._links: list[_Link] = []
        self._specs: tuple[ToolSpec, ...] = ()
        self._routes: dict[str, tuple[_Link, str]] = {}
        """Exposed name -> the server's link and the tool's name there."""

    @property
    def name(self) -> str:
        """The runner's name, for traces."""
        return "mcp"

    def __repr__(self) -> str:
        servers = ", ".join(f"{s.name}={s.describe()!r}" for s in self.servers)
        state = "started" if self._links else "stopped"
        return f"McpTools([{servers}], {state}, tools={len(self._specs)})"

    async def __aenter__(self) -> McpTools:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def start(self) -> None:
        """Connect every server and list its tools; raise :class:`McpConnectionError` if one
        fails (the others are closed again)."""
        if self._links:
            raise RuntimeError("McpTools is already started")
        quiet_garbage()
        self._links = [_Link(server) for server in self.servers]
        for link in self._links:
            link.task = asyncio.create_task(self._hold(link), name=f"mcp:{link.server.name}")
        try:
            await asyncio.wait([link.ready for link in self._links], timeout=self.connect_timeout)
            for link in self._links:
                where = f"MCP server {link.server.name!r} ({link.server.describe()})"
                if not link.ready.done():
                    raise McpConnectionError(
                        f"{where} did not answer within {self.connect_timeout:g} s"
                    )
                if (error := link.ready.exception()) is not None:
                    raise McpConnectionError(
                        f"{where} failed to connect: {_describe(error)}"
                    ) from error
        except BaseException:
            await self.aclose()
            raise
        self._index()

    async def aclose(self) -> None:
        """Close every connection and stop the stdio servers; safe to call twice."""
        links, self._links = self._links, []
        self._specs, self._routes = (), {}
        for link in links:
            link.stop.set()
            if link.task is not None and not link.ready.done():
                link.task.cancel()  # still connecting: unwind it
        tasks = [link.task for link in links if link.task is not None]
        if tasks:
            await asyncio.wait(tasks)
        for link in links:
            if link.ready.done() and not link.ready.cancelled():
                link.ready.exception()  # retrieved: no "never retrieved" warning

    def specs(self) -> Sequence[ToolSpec]:
        """Every server's tools: servers in the given order, tools in each server's order."""
        return self._specs

    async def run(self, call: ToolCall, *, signal: SupportsAbort | None = None) -> ToolResult:
        """Call the tool on its server. Never raises: failures are ``ok=False``."""
        route = self._routes.get(call.name)
        if route is None:
            if not self._links:
                return ToolResult(False, "", "the MCP servers are not connected")
            available = ", ".join(spec.name for spec in self._specs)
            name = call.name[:100]
            return ToolResult(False, "", f"unknown tool {name!r}; available: {available}")
        if call.raw_arguments is not None:
            raw = call.raw_arguments[:200]
            return ToolResult(False, "", f"the arguments were not valid JSON: {raw}")
        if signal is not None and signal.aborted:
            return ToolResult(False, "", "cancelled")
        link, tool = route
        try:
            result = await _race(self._call(link, tool, call.arguments), signal)
        except Exception as error:
            return ToolResult(False, "", f"{link.server.name}: {_describe(error)}")
        if result is None:
            return ToolResult(False, "", "cancelled")
        try:
            converted = _to_result(result)
        except Exception as error:
            converted = ToolResult(False, "", f"unreadable result: {_describe(error)}")
        return fit_result(converted, self.max_output_chars, self.store)

    async def _call(self, link: _Link, tool: str, arguments: dict[str, Any]) -> CallToolResult:
        assert link.session is not None
        try:
            async with asyncio.timeout(self.call_timeout):
                return await link.session.call_tool(tool, arguments)
        except TimeoutError:
            raise TimeoutError(f"no result within {self.call_timeout:g} s") from None

    async def _hold(self, link: _Link) -> None:
        """Open the connection, report it ready, keep it until asked to stop, close it."""
        try:
            async with AsyncExitStack() as stack:
                session = await self._open(stack, link.server)
                link.tools = await _list_tools(session)
                link.session = session
                link.ready.set_result(None)
                await link.stop.wait()
        except asyncio.CancelledError:
            if not link.ready.done():
                link.ready.cancel()
        except Exception as error:  # a failure after start shows in the calls instead
            if not link.ready.done():
                link.ready.set_exception(error)

    async def _open(self, stack: AsyncExitStack, server: McpServer) -> ClientSession:
        try:
            from mcp import ClientSession
            from mcp.types import Implementation
        except ImportError as error:  # pragma: no cover - optional extra
            raise ImportError("McpTools needs the MCP SDK: pip install 'agentfsm[mcp]'") from error
        if server.transport == "stdio":
            from mcp.client.stdio import StdioServerParameters, stdio_client

            params = _stdio_parameters(server, StdioServerParameters)
            errlog = self._errlog if self._errlog is not None else sys.stderr
            if fileno(errlog) is None:
                pump = ErrlogPump(errlog, server.name)
                stack.callback(pump.close)
                piped = stdio_client(params, errlog=pump.writer)  # type: ignore[arg-type]
                read, write = await stack.enter_async_context(piped)
                pump.start()  # the server holds its own copy of the pipe now
            else:
                read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
        else:
            import httpx2
            from mcp.client.streamable_http import streamable_http_client

            timeout = httpx2.Timeout(_HTTP_TIMEOUTS[0], read=_HTTP_TIMEOUTS[1])
            client = httpx2.AsyncClient(headers=server.headers, timeout=timeout)
            await stack.enter_async_context(client)
            transport = streamable_http_client(str(server.url), http_client=client)
            read, write = await stack.enter_async_context(transport)
        from agentfsm._version import __version__

        info = Implementation(name="agentfsm", version=__version__)
        session = await stack.enter_async_context(ClientSession(read, write, client_info=info))
        await session.initialize()
        return session

    def _index(self) -> None:
        counts = Counter(tool.name for link in self._links for tool in link.tools)
        specs: list[ToolSpec] = []
        for link in self._links:
            for tool in link.tools:
                exposed = (
                    tool.name if counts[tool.name] == 1 else f"{link.server.name}__{tool.name}"
                )
                self._routes[exposed] = (link, tool.name)
                specs.append(_spec(exposed, tool))
        self._specs = tuple(specs)


async def _list_tools(session: ClientSession) -> list[Tool]:
    from mcp.types import PaginatedRequestParams

    tools: list[Tool] = []
    cursor: str | None = None
    while True:
        params = PaginatedRequestParams(cursor=cursor) if cursor else None
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if not cursor:
            return tools


def _spec(name: str, tool: Tool) -> ToolSpec:
    hints = tool.annotations
    read_only = bool(hints is not None and hints.read_only_hint)
    destructive = not read_only and (hints is None or hints.destructive_hint is not False)
    return ToolSpec(
        name,
        tool.description or "",
        dict(tool.input_schema or _DEFAULT_SCHEMA),
        concurrency_safe=read_only,
        destructive=destructive,
    )


async def _race(call: Awaitable[CallToolResult], signal: object) -> CallToolResult | None:
    """Await the call; ``None`` if the signal fired first (the call is then cancelled)."""
    wait = getattr(signal, "wait", None)
    if wait is None:
        return await call
    task = asyncio.ensure_future(call)
    waiter = asyncio.ensure_future(wait())
    try:
        await asyncio.wait((task, waiter), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for pending in (task, waiter):
            pending.cancel()
        await asyncio.wait((task, waiter))
    if task.cancelled():
        return None
    return task.result()


def _executable(command: str, server: McpServer) -> str:
    """``command`` as a path, found the way the SDK's spawn would (``FileNotFoundError``
    when it is missing, as the spawn itself would raise)."""
    if "/" in command:
        found: str | None = str(Path(server.cwd or ".", command))
        if not os.access(str(found), os.X_OK) or Path(str(found)).is_dir():
            found = None
    else:
        path = (server.env or {}).get("PATH", os.environ.get("PATH", os.defpath))
        found = shutil.which(command, path=path)
    if found is None:
        raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), command)
    return found


_REAP_GROUP = '"$@"; kill -KILL 0'
"""Run the server, then kill whatever it left in its process group (this shell too)."""


def _to_result(result: CallToolResult) -> ToolResult:
    from mcp.types import AudioContent, EmbeddedResource, ImageContent, TextContent

    lines: list[str] = []
    metadata: dict[str, Any] = {}
    has_text = False
    for block in result.content:
        if len(lines) >= MAX_CONTENT_BLOCKS:
            lines.append(f"[… {len(result.content) - len(lines)} more content blocks]")
            break
        if isinstance(block, TextContent):
            has_text = True
            lines.append(block.text)
        elif isinstance(block, ImageContent):
            if len(block.data) > MAX_IMAGE_CHARS:
                lines.append(f"[image of {len(block.data)} base64 characters, too large]")
                continue
            metadata.setdefault("image", {"media_type": block.mime_type, "data": block.data})
            lines.append("[image]")
        elif isinstance(block, AudioContent):
            lines.append(f"[audio {block.mime_type}]")
        elif isinstance(block, EmbeddedResource):
            text = getattr(block.resource, "text", None)
            lines.append(text if isinstance(text, str) else f"[resource {block.resource.uri}]")
        else:
            lines.append(f"[resource {block.uri}]")
    if result.structured_content is not None and not has_text:
        lines.append(json.dumps(result.structured_content, ensure_ascii=False))
    output = "\n".join(lines)
    if result.is_error:
        return ToolResult(False, "", output or "the tool reported an error", metadata)
    return ToolResult(True, output, None, metadata)


def _stdio_parameters(server: McpServer, parameters: Any) -> Any:
    """The SDK's stdio parameters for ``server``, wrapped in its sandbox when it has one."""
    if server.sandbox is None:
        command, args = str(server.command), list(server.args)
        if os.name == "posix":  # the SDK makes it a group leader; this reaps the group
            command = _executable(command, server)
            command, args = "/bin/sh", ["-c", _REAP_GROUP, "agentfsm-mcp", command, *args]
        return parameters(command=command, args=args, env=server.env, cwd=server.cwd)
    line = shlex.join([str(server.command), *server.args])
    cwd = Path(server.cwd) if server.cwd is not None else Path.cwd()
    argv, env = server.sandbox.command(f"exec {line}", cwd)
    return parameters(
        command=argv[0], args=argv[1:], env={**env, **(server.env or {})}, cwd=str(cwd)
    )


def _describe(error: BaseException) -> str:
    """``Type: message``, looking inside exception groups of one."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
