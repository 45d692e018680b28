"""Hostile tools: huge outputs and errors, pages asked too large, broken exceptions, MCP
servers that flood, print garbage, leave children behind, and sync tools that block an
interrupt."""

from __future__ import annotations

import asyncio
import io
import logging
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from agentfsm.adapters.tools import OutputStore, ToolBox, tool
from agentfsm.adapters.tools._mcp import MAX_GARBAGE_REPORTS, McpServer, McpTools
from agentfsm.adapters.tools._mcp_process import MAX_ERRLOG_BYTES
from agentfsm.adapters.tools._truncate import DEFAULT_MODEL_OUTPUT_CHARS, MAX_STORE_BYTES
from agentfsm.engine._messages import ToolCall, ToolResult

from .table import measure

HANG_GUARD = 30.0
LIMIT = DEFAULT_MODEL_OUTPUT_CHARS + 1000
"""What a cut text may reach: the limit plus the marker's own words."""
MB = 1024 * 1024


def _ok_size(result: ToolResult) -> None:
    assert len(result.output) <= LIMIT
    assert result.error is None or len(result.error) <= LIMIT


async def _page(box: ToolBox, output_id: str, offset: int = 0, limit: int = 8000) -> ToolResult:
    call = ToolCall("p", "read_output", {"id": output_id, "offset": offset, "limit": limit})
    return await asyncio.wait_for(box.run(call), HANG_GUARD)


# -- ToolBox ----------------------------------------------------------------------------


async def test_a_100_mb_error_is_cut_and_kept() -> None:
    @tool
    def explode() -> str:
        """Fail loudly."""
        raise RuntimeError("E" * (100 * MB) + "THE END")

    box = ToolBox([explode])
    with measure("tools", "100 MB exception message") as row:
        result = await asyncio.wait_for(box.run(ToolCall("1", "explode", {})), HANG_GUARD)
        _ok_size(result)
        assert result.error is not None
        assert result.error.endswith("THE END")
        assert "excerpt" in result.error
        page = await _page(box, result.metadata["error_id"], 0, 100)
        assert page.ok
        assert box.store.bytes <= MAX_STORE_BYTES
        row.outcome = (
            f"error {len(result.error)} chars; excerpt paged; store {box.store.bytes // MB} MiB"
        )
    assert row.growth_mb < 400  # the tool's own 100 MB string, plus its excerpt


async def test_a_100_mb_output_keeps_its_promise() -> None:
    @tool
    def dump() -> str:
        """Print a lot."""
        return ("0" * 9 + "\n") * (10 * MB)  # 100 MiB

    box = ToolBox([dump])
    with measure("tools", "100 MiB output, then paged") as row:
        result = await asyncio.wait_for(box.run(ToolCall("1", "dump", {})), HANG_GUARD)
        _ok_size(result)
        output_id = result.metadata["output_id"]
        assert "excerpt" in result.output  # it says only an excerpt was kept
        first = await _page(box, output_id, 0, 30)
        assert first.ok
        assert first.output.splitlines()[1] == "000000000"
        assert result.display_output is not None
        assert len(result.display_output) <= 8 * MB  # the kept excerpt, not 100 MiB
        row.outcome = "excerpt kept and paged at once"
    assert row.growth_mb < 500


async def test_whole_outputs_are_paged_and_the_store_stays_bounded() -> None:
    @tool
    def dump(n: int) -> str:
        """Print n MiB."""
        return f"{n}:" + "x" * (n * MB - 10) + "\nlast"

    box = ToolBox([dump])
    with measure("tools", "40 x 7 MiB outputs into the store") as row:
        ids = []
        for n in range(40):
            result = await box.run(ToolCall(str(n), "dump", {"n": 7}))
            _ok_size(result)
            assert "read_output(id=" in result.output
            assert "excerpt" not in result.output
            ids.append(result.metadata["output_id"])
            page = await _page(box, ids[-1], 0, 10)
            assert page.ok, page.error  # the newest is always kept
        assert box.store.bytes <= MAX_STORE_BYTES
        expired = await _page(box, ids[0])
        assert not expired.ok
        row.outcome = f"{len(box.store)} kept, {box.store.bytes // MB} MiB; oldest expired"
    assert row.growth_mb < 300


async def test_read_output_limit_is_capped() -> None:
    box = ToolBox(store=OutputStore())
    output_id = box.store.put("y" * (30 * MB))
    with measure("tools", "read_output(limit=30,000,000)") as row:
        page = await _page(box, output_id, 0, 30_000_000)
        _ok_size(page)
        far = await _page(box, output_id, 10**15, 10)
        assert far.ok
        row.outcome = f"page of {len(page.output)} chars"


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no")


async def test_broken_exceptions_and_results() -> None:
    @tool
    def unprintable() -> str:
        """Raise an exception that cannot be printed."""
        raise _Unprintable

    @tool
    def circular() -> Any:
        """Return a structure that cannot be serialised."""
        loop: list[Any] = []
        loop.append(loop)
        return loop

    box = ToolBox([unprintable, circular])
    with measure("tools", "unprintable exception, circular result") as row:
        for name in ("unprintable", "circular"):
            result = await box.run(ToolCall("1", name, {}))
            assert not result.ok
            assert result.error
        row.outcome = "ok=False with an error each"


BLOCKING_SCRIPT = """
import asyncio, signal, sys, time
from agentfsm import Agent
from agentfsm.adapters.tools import ToolBox, tool
from agentfsm.testing import ScriptedChat, tool_reply

@tool
def block() -> str:
    \"\"\"Block for a long time.\"\"\"
    print("blocking", flush=True)
    time.sleep(60)
    return "done"

async def main() -> None:
    engine = Agent(ScriptedChat([tool_reply(("block", {})), "finished"]), ToolBox([block]))
    if sys.argv[1] == "handler":
        asyncio.get_running_loop().add_signal_handler(
            signal.SIGINT, lambda: engine.interrupt("ctrl-c")
        )
    outcome = await engine.run("go")
    print(outcome.stopped_reason, flush=True)

asyncio.run(main())
"""


@pytest.mark.parametrize("mode", ["handler", "keyboard-interrupt"])
def test_interrupt_during_a_blocking_sync_tool(tmp_path: Path, mode: str) -> None:
    script = tmp_path / "blocking.py"
    script.write_text(BLOCKING_SCRIPT, "utf-8")
    with measure("tools", f"Ctrl-C during time.sleep(60) tool ({mode})") as row:
        process = subprocess.Popen(
            [sys.executable, str(script), mode],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "blocking"
            started = time.monotonic()
            process.send_signal(signal.SIGINT)
            if mode != "handler":
                time.sleep(0.5)
                if process.poll() is None:
                    process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=HANG_GUARD)
            seconds = time.monotonic() - started
        finally:
            if process.poll() is None:
                process.kill()
                process.communicate()
        row.outcome = f"exit {process.returncode} after {seconds:.2f} s"
    assert seconds < 5
    if mode == "handler":
        assert process.returncode == 0, err
        assert out.strip().splitlines()[-1] == "aborted"
    else:
        assert process.returncode != 0


# -- MCP --------------------------------------------------------------------------------

MARKER_VAR = "AGENTFSM_HOSTILE_MCP"

HOSTILE_SERVER = """
import json, os, subprocess, sys
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, ImageContent, TextContent

MB = 1024 * 1024
mode = sys.argv[1]
if mode == "garbage":
    for i in range(5000):
        sys.stdout.write(f"garbage line {i} {{not json\\n")
    sys.stdout.flush()
if mode == "stderr-flood":
    sys.stderr.write("hello from stderr\\n")
    sys.stderr.write("z" * (5 * MB) + "\\n")
    sys.stderr.flush()
if mode == "children":
    for _ in range(3):
        subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)

server = MCPServer("hostile")


@server.tool()
def big_text() -> str:
    return "t" * (2 * MB) + "END"


@server.tool()
def big_structure() -> CallToolResult:
    return CallToolResult(content=[], structured_content={"rows": ["r" * 100] * 30000})


@server.tool()
def big_error() -> CallToolResult:
    return CallToolResult(content=[TextContent(text="e" * (3 * MB))], is_error=True)


@server.tool()
def many_blocks() -> CallToolResult:
    return CallToolResult(content=[TextContent(text="b")] * 20000)


@server.tool()
def big_image() -> CallToolResult:
    return CallToolResult(content=[ImageContent(data="A" * (12 * MB), mime_type="image/png")])


@server.tool()
def die() -> str:
    os._exit(3)


server.run("stdio")
"""


@pytest.fixture
def hostile_script(tmp_path: Path) -> Path:
    script = tmp_path / "hostile_server.py"
    script.write_text(HOSTILE_SERVER, "utf-8")
    return script


def _server(script: Path, mode: str, marker: str = "") -> McpServer:
    return McpServer.stdio(
        f"hostile-{mode}",
        command=sys.executable,
        args=[str(script), mode],
        env={MARKER_VAR: marker or uuid.uuid4().hex},
    )


def _marked(marker: str) -> list[int]:
    needle = f"{MARKER_VAR}={marker}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if needle in (entry / "environ").read_bytes().split(b"\0"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


async def _gone(marker: str, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _marked(marker):
            return True
        await asyncio.sleep(0.05)
    return False


@pytest.fixture
async def plain_tools(hostile_script: Path) -> AsyncIterator[McpTools]:
    async with McpTools([_server(hostile_script, "plain")], store=OutputStore()) as tools:
        yield tools


@pytest.mark.parametrize(
    "name", ["big_text", "big_structure", "big_error", "many_blocks", "big_image"]
)
async def test_big_mcp_results_are_cut(plain_tools: McpTools, name: str) -> None:
    with measure("mcp", f"result: {name}") as row:
        result = await asyncio.wait_for(plain_tools.run(ToolCall("1", name, {})), HANG_GUARD)
        _ok_size(result)
        assert "image" not in result.metadata
        row.outcome = f"ok={result.ok}, {len(result.output or result.error or '')} chars"
        if name == "big_text":
            assert result.output.endswith("END")
            assert "output_id" in result.metadata
    assert row.growth_mb < 300


async def test_children_die_with_the_server(hostile_script: Path) -> None:
    marker = uuid.uuid4().hex
    with measure("mcp", "server with 3 sleep children: aclose") as row:
        tools = McpTools([_server(hostile_script, "children", marker)])
        await asyncio.wait_for(tools.start(), HANG_GUARD)
        assert len(_marked(marker)) >= 4  # the shell, the server, its children
        await asyncio.wait_for(tools.aclose(), HANG_GUARD)
        assert await _gone(marker)
        row.outcome = "no process left"
    marker = uuid.uuid4().hex
    with measure("mcp", "server with 3 sleep children: crash") as row:
        tools = McpTools([_server(hostile_script, "children", marker)])
        await asyncio.wait_for(tools.start(), HANG_GUARD)
        try:
            crashed = await asyncio.wait_for(tools.run(ToolCall("1", "die", {})), HANG_GUARD)
            assert not crashed.ok
            assert await _gone(marker)
        finally:
            await tools.aclose()
        row.outcome = "no process left after the crash"


async def test_garbage_on_stdout_is_reported_briefly(
    hostile_script: Path, caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    with measure("mcp", "5,000 garbage lines on stdout") as row:
        with caplog.at_level(logging.DEBUG):
            async with McpTools(
                [_server(hostile_script, "garbage")], errlog=io.StringIO()
            ) as tools:
                result = await asyncio.wait_for(
                    tools.run(ToolCall("1", "big_text", {})), HANG_GUARD
                )
                assert result.ok
        records = [r for r in caplog.records if r.name.startswith("mcp")]
        err = capfd.readouterr().err
        assert all(r.exc_info is None for r in records)
        assert len(records) <= MAX_GARBAGE_REPORTS + 5
        assert "Traceback" not in err
        row.outcome = f"{len(records)} log lines, no traceback"


async def test_errlog_without_a_file_descriptor(hostile_script: Path) -> None:
    errlog = io.StringIO()
    with measure("mcp", "errlog=StringIO, 5 MiB of stderr") as row:
        async with McpTools([_server(hostile_script, "stderr-flood")], errlog=errlog) as tools:
            result = await asyncio.wait_for(tools.run(ToolCall("1", "big_text", {})), HANG_GUARD)
            assert result.ok
        for _ in range(200):  # the copying thread ends at the pipe's end
            if "dropped" in errlog.getvalue():
                break
            await asyncio.sleep(0.05)
        text = errlog.getvalue()
        assert text.startswith("hello from stderr")
        assert MAX_ERRLOG_BYTES <= len(text) <= MAX_ERRLOG_BYTES + 200
        row.outcome = f"{len(text)} chars copied, rest dropped"
