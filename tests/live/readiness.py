"""Waiting for a server the live tier started (llama.cpp's ``llama-server``, LiteLLM's
proxy) to answer its health route, bounded, with its log's tail when it exits first."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path

import httpx


async def wait_ready(
    process: asyncio.subprocess.Process,
    health_url: str,
    *,
    name: str,
    log: Path,
    limit: float,
    error: type[Exception],
) -> None:
    """Return once ``health_url`` answers 200; raise ``error`` when ``process`` (``name``)
    exits first or ``limit`` seconds pass."""
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=2.0) as client:
        while True:
            if process.returncode is not None:
                tail = log.read_text("utf-8", errors="replace")[-2000:]
                raise error(f"{name} exited with {process.returncode}; {log}:\n{tail}")
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(health_url)).status_code == 200:
                    return
            if time.monotonic() - started > limit:
                raise error(f"{name} did not answer in {limit:g} s; {log}")
            await asyncio.sleep(0.25)
