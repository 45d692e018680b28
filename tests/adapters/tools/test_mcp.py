"""McpTools against real MCP servers: mcp-server-time and mcp-server-git over stdio, and a
small server of the test's own over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from agentfsm.adapters.tools._mcp import McpConnectionError, McpServer, McpTools
from agentfsm.engine._abort import AbortController
from agentfsm.engine._messages import ToolCall

MARKER_VAR = "AGENTFSM_MCP_TEST"

HELPER_SERVER = """
import asyncio
import socket
import sys

import anyio
import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ImageContent, TextContent, ToolAnnotations

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
server = MCPServer("helper")


@server.tool(description="Echo the text and the X-Token header", annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str, ctx: Context) -> str:
    headers = ctx.headers or {}
    return f"{text} token={headers.get('x-token')}"


@server.tool()
def pixel() -> CallToolResult:
    return CallToolResult(
        content=[TextContent(text="one pixel"), ImageContent(data=PNG, mime_type="image/png")]
    )


@server.tool()
def shape() -> CallToolResult:
    return CallToolResult(content=[], structured_content={"sides": 4})


@server.tool()
def fail() -> CallToolResult:
    return CallToolResult(content=[TextContent(text="it broke")], is_error=True)


@server.tool()
async def slow(seconds: float) -> str:
    await anyio.sleep(seconds)
    return "done"


sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen()
print(sock.getsockname()[1], flush=True)
config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
asyncio.run(uvicorn.Server(config).serve(sockets=[sock]))
"""


def time_server(name: str, marker: str, zone: str = "UTC") -> McpServer:
    return McpServer.stdio(
        name,
        command=sys.executable,
        args=["-m", "mcp_server_time", "--local-timezone", zone],
        env={MARKER_VAR: marker},
    )


def marked_pids(marker: str) -> list[int]:
    """Live processes whose environment carries ``marker`` (zombies have none)."""
    needle = f"{MARKER_VAR}={marker}".encode()
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if needle in environ.split(b"\0"):
            pids.append(int(entry.name))
    return pids


def server_pids(marker: str) -> list[int]:
    """The marked processes that are the Python servers (not the shell that reaps them)."""
    return [
        pid
        for pid in marked_pids(marker)
        if not Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"/bin/sh\0")
    ]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture
async def time_tools() -> AsyncIterator[McpTools]:
    async with McpTools([time_server("time", uuid.uuid4().hex)]) as tools:
        yield tools


@pytest.fixture(scope="module")
def http_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    script = tmp_path_factory.mktemp("mcp") / "helper_server.py"
    script.write_text(HELPER_SERVER, "utf-8")
    process = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)

    git("init", "-q", "-b", "main")
    git("config", "user.email", "test@example.com")
    git("config", "user.name", "Test")
    (repo / "README.md").write_text("hello\n", "utf-8")
    git("add", "README.md")
    git("commit", "-q", "-m", "First commit from the MCP test")
    return repo


def git_server(repo: Path) -> McpServer:
    return McpServer.stdio(
        "git", command=sys.executable, args=["-m", "mcp_server_git", "--repository", str(repo)]
    )


# -- the time server -------------------------------------------------------------------


async def test_time_server_specs_and_calls(time_tools: McpTools) -> None:
    specs = {spec.name: spec for spec in time_tools.specs()}
    assert list(specs) == ["get_current_time", "convert_time"]
    current = specs["get_current_time"]
    assert current.description == "Get current time in a specific timezone"
    assert current.parameters["type"] == "object"
    assert current.parameters["required"] == ["timezone"]
    assert "UTC" in current.parameters["properties"]["timezone"]["description"]
    assert current.concurrency_safe is True
    assert current.destructive is False
    assert specs["convert_time"].parameters["required"] == [
        "source_timezone",
        "time",
        "target_timezone",
    ]

    result = await time_tools.run(ToolCall("c1", "get_current_time", {"timezone": "UTC"}))
    assert result.ok, result.error
    assert json.loads(result.output)["timezone"] == "UTC"

    converted = await time_tools.run(
        ToolCall(
            "c2",
            "convert_time",
            {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        )
    )
    assert converted.ok, converted.error
    assert json.loads(converted.output)["target"]["datetime"].endswith("21:00:00+09:00")

    bad = await time_tools.run(ToolCall("c3", "get_current_time", {"timezone": "Nowhere/Atlantis"}))
    assert not bad.ok
    assert bad.output == ""
    assert bad.error is not None
    assert "Invalid timezone" in bad.error
    assert "Nowhere/Atlantis" in bad.error


async def test_bad_calls_are_answered_without_the_server(time_tools: McpTools) -> None:
    unknown = await time_tools.run(ToolCall("c1", "get_weather", {}))
    assert unknown.ok is False
    assert unknown.error == "unknown tool 'get_weather'; available: get_current_time, convert_time"

    raw = "{'timezone': " + "x" * 300
    malformed = await time_tools.run(ToolCall("c2", "get_current_time", {}, raw_arguments=raw))
    assert malformed.ok is False
    assert malformed.error == f"the arguments were not valid JSON: {raw[:200]}"

    controller = AbortController()
    controller.abort()
    aborted = await time_tools.run(
        ToolCall("c3", "get_current_time", {"timezone": "UTC"}), signal=controller.signal
    )
    assert (aborted.ok, aborted.error) == (False, "cancelled")


async def test_run_before_start_and_repr() -> None:
    tools = McpTools([time_server("time", "unused")])
    assert tools.name == "mcp"
    assert "time=" in repr(tools)
    assert "stopped" in repr(tools)
    result = await tools.run(ToolCall("c1", "get_current_time", {"timezone": "UTC"}))
    assert (result.ok, result.error) == (False, "the MCP servers are not connected")
    assert tools.specs() == ()


# -- the git server ----------------------------------------------------------------------


@pytest.mark.requires_program("git", "git")
async def test_git_server_round_trip(git_repo: Path) -> None:
    async with McpTools([git_server(git_repo)]) as tools:
        specs = {spec.name: spec for spec in tools.specs()}
        assert {"git_status", "git_log", "git_commit", "git_reset"} <= set(specs)
        assert (specs["git_status"].concurrency_safe, specs["git_status"].destructive) == (
            True,
            False,
        )
        assert (specs["git_commit"].concurrency_safe, specs["git_commit"].destructive) == (
            False,
            False,
        )
        assert (specs["git_reset"].concurrency_safe, specs["git_reset"].destructive) == (
            False,
            True,
        )

        status = await tools.run(ToolCall("c1", "git_status", {"repo_path": str(git_repo)}))
        assert status.ok, status.error
        assert "On branch main" in status.output
        assert "nothing to commit, working tree clean" in status.output

        log = await tools.run(ToolCall("c2", "git_log", {"repo_path": str(git_repo)}))
        assert log.ok, log.error
        assert "First commit from the MCP test" in log.output


# -- several servers -------------------------------------------------------------------


@pytest.mark.requires_program("git", "git")
async def test_name_clash_routing_crash_and_cleanup(git_repo: Path) -> None:
    marker = uuid.uuid4().hex
    servers = [
        time_server("a", f"{marker}-a", "UTC"),
        time_server("b", f"{marker}-b", "Asia/Tokyo"),
        git_server(git_repo),
    ]
    tools = McpTools(servers)
    await tools.start()
    try:
        names = [spec.name for spec in tools.specs()]
        assert names[:4] == [
            "a__get_current_time",
            "a__convert_time",
            "b__get_current_time",
            "b__convert_time",
        ]
        assert "git_status" in names[4:]
        specs = {spec.name: spec for spec in tools.specs()}
        describe = "Use '{}' as local timezone"
        a_zone = specs["a__get_current_time"].parameters["properties"]["timezone"]["description"]
        b_zone = specs["b__get_current_time"].parameters["properties"]["timezone"]["description"]
        assert describe.format("UTC") in a_zone
        assert describe.format("Asia/Tokyo") in b_zone

        for name in ("a__get_current_time", "b__get_current_time"):
            result = await tools.run(ToolCall("c", name, {"timezone": "UTC"}))
            assert result.ok, result.error
        unprefixed = await tools.run(ToolCall("c", "get_current_time", {"timezone": "UTC"}))
        assert not unprefixed.ok
        assert unprefixed.error is not None
        assert unprefixed.error.startswith("unknown tool 'get_current_time'; available: a__")

        # Kill b's process: its calls fail with an error naming it, a's still work.
        [b_pid] = server_pids(f"{marker}-b")
        [a_pid] = server_pids(f"{marker}-a")
        os.kill(b_pid, signal.SIGKILL)
        crashed = await tools.run(ToolCall("c", "b__get_current_time", {"timezone": "UTC"}))
        assert not crashed.ok
        assert crashed.error is not None
        assert crashed.error.startswith("b: ")
        alive = await tools.run(ToolCall("c", "a__get_current_time", {"timezone": "UTC"}))
        assert alive.ok, alive.error
        status = await tools.run(ToolCall("c", "git_status", {"repo_path": str(git_repo)}))
        assert status.ok, status.error
    finally:
        await tools.aclose()

    assert marked_pids(marker + "-a") == []
    assert not Path(f"/proc/{a_pid}").exists()
    assert not Path(f"/proc/{b_pid}").exists()
    assert tools.specs() == ()
    await tools.aclose()  # twice is fine


async def test_connection_failure_names_the_server_and_closes_the_others() -> None:
    marker = uuid.uuid4().hex
    tools = McpTools(
        [
            time_server("time", marker),
            McpServer.stdio("broken", command="/nonexistent/mcp-server"),
        ]
    )
    with pytest.raises(McpConnectionError, match=r"MCP server 'broken' .*FileNotFoundError"):
        await tools.start()
    assert marked_pids(marker) == []

    exits = McpTools([McpServer.stdio("quits", command=sys.executable, args=["-c", "pass"])])
    with pytest.raises(McpConnectionError, match=r"MCP server 'quits'"):
        await exits.start()

    url = f"http://127.0.0.1:{free_port()}/mcp"
    nobody = McpTools([McpServer.http("nobody", url=url)], connect_timeout=10)
    with pytest.raises(McpConnectionError, match=r"MCP server 'nobody'"):
        await nobody.start()


def test_server_descriptions_are_checked() -> None:
    with pytest.raises(ValueError, match="unique"):
        McpTools([time_server("x", "m"), time_server("x", "m")])
    with pytest.raises(ValueError, match="needs a url"):
        McpServer("web", "http")
    server = McpServer.http("web", url="http://h/mcp", headers={"A": "b"})
    assert (server.transport, server.url, server.headers) == ("http", "http://h/mcp", {"A": "b"})


# -- streamable HTTP -------------------------------------------------------------------


async def test_http_round_trip_and_content_mapping(http_url: str) -> None:
    server = McpServer.http("helper", url=http_url, headers={"X-Token": "s3cret"})
    async with McpTools([server]) as tools:
        specs = {spec.name: spec for spec in tools.specs()}
        assert list(specs) == ["echo", "pixel", "shape", "fail", "slow"]
        assert (specs["echo"].concurrency_safe, specs["echo"].destructive) == (True, False)
        # No annotations: MCP's defaults (not read-only, destructive).
        assert (specs["pixel"].concurrency_safe, specs["pixel"].destructive) == (False, True)

        echo = await tools.run(ToolCall("c1", "echo", {"text": "hi"}))
        assert (echo.ok, echo.output) == (True, "hi token=s3cret")
        together = await asyncio.gather(
            *(tools.run(ToolCall(f"e{n}", "echo", {"text": str(n)})) for n in range(3))
        )
        assert [result.output for result in together] == [f"{n} token=s3cret" for n in range(3)]

        pixel = await tools.run(ToolCall("c2", "pixel", {}))
        assert (pixel.ok, pixel.output) == (True, "one pixel\n[image]")
        assert pixel.metadata["image"]["media_type"] == "image/png"
        assert pixel.metadata["image"]["data"].startswith("iVBOR")

        shape = await tools.run(ToolCall("c3", "shape", {}))
        assert (shape.ok, json.loads(shape.output)) == (True, {"sides": 4})

        fail = await tools.run(ToolCall("c4", "fail", {}))
        assert (fail.ok, fail.output, fail.error) == (False, "", "it broke")


async def test_call_timeout_and_abort_mid_call(http_url: str) -> None:
    server = McpServer.http("helper", url=http_url)
    async with McpTools([server], call_timeout=0.3) as tools:
        slow = await tools.run(ToolCall("c1", "slow", {"seconds": 30}))
        assert (slow.ok, slow.error) == (False, "helper: TimeoutError: no result within 0.3 s")

        tools.call_timeout = 30
        controller = AbortController()
        asyncio.get_running_loop().call_later(0.2, controller.abort)
        aborted = await asyncio.wait_for(
            tools.run(ToolCall("c2", "slow", {"seconds": 30}), signal=controller.signal), 10
        )
        assert (aborted.ok, aborted.error) == (False, "cancelled")

        # The session survives both.
        echo = await tools.run(ToolCall("c3", "echo", {"text": "still here"}))
        assert (echo.ok, echo.output) == (True, "still here token=None")


# -- sandboxed servers -----------------------------------------------------------------


@pytest.mark.requires_program("git", "git")
async def test_a_sandboxed_git_server_sees_only_its_root(git_repo: Path, tmp_path: Path) -> None:
    from ...security.sandboxing import require_bubblewrap

    sandbox = require_bubblewrap(git_repo)
    other = tmp_path / "other"
    other.mkdir()
    await asyncio.to_thread(
        subprocess.run, ["git", "init", "-q", "-b", "main"], cwd=other, check=True
    )
    server = McpServer.stdio(
        "git",
        command=sys.executable,
        args=["-m", "mcp_server_git"],
        cwd=git_repo,
        sandbox=sandbox,
    )
    async with McpTools([server]) as tools:
        inside = await tools.run(ToolCall("c1", "git_log", {"repo_path": str(git_repo)}))
        assert inside.ok, inside.error
        assert "First commit from the MCP test" in inside.output
        outside = await tools.run(ToolCall("c2", "git_status", {"repo_path": str(other)}))
        assert not outside.ok
        wrote = await tools.run(
            ToolCall("c3", "git_init", {"repo_path": str(tmp_path / "created-outside")})
        )
        assert not (tmp_path / "created-outside").exists(), wrote
