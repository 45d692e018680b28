"""The LiteLLM proxy of the live tier, as a child process in front of the embedded model.

LiteLLM lives in its own virtualenv (``make litellm-venv`` builds ``tests/live/.litellm-venv``
from ``tests/live/litellm/requirements.txt``), never in the project's. :func:`litellm_proxy`
starts its ``litellm`` CLI with ``tests/live/litellm/config.yaml`` on a free 127.0.0.1 port,
in its own process group, waits (bounded) until it answers, and stops the whole group on
every exit path (SIGTERM, then SIGKILL; it also dies with its parent on Linux). Nothing is
fetched at run time: the cost map and the other maps LiteLLM would download come from the
installed package.

Manual use: ``LITELLM_MASTER_KEY=sk-... .venv/bin/python -m tests.live.litellm_proxy`` starts
the embedded model and the proxy (that key is its master key) and prints their URLs until
interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from agentfsm.adapters.providers._local import _die_with_parent, _free_port, _stop_group
from tests.live.readiness import wait_ready

__all__ = [
    "CONFIG",
    "LITELLM_BIN",
    "LITELLM_VENV",
    "LiteLLMProxy",
    "LiteLLMUnavailable",
    "litellm_proxy",
    "proxy_environment",
]

HERE = Path(__file__).resolve().parent
LITELLM_VENV = HERE / ".litellm-venv"
LITELLM_BIN = LITELLM_VENV / "bin" / "litellm"
CONFIG = HERE / "litellm" / "config.yaml"
# LiteLLM downloads these maps at import unless told to use the copies in the package.
_LOCAL_MAPS = (
    "LITELLM_LOCAL_MODEL_COST_MAP",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS",
    "LITELLM_LOCAL_BLOG_POSTS",
    "LITELLM_LOCAL_POLICY_TEMPLATES",
    "LITELLM_LOCAL_AUTOROUTER_PRESETS",
)
# Variables that would give the proxy a database, a cache or real provider keys.
_DROPPED = ("DATABASE_URL", "DIRECT_URL", "REDIS_HOST", "REDIS_URL", "REDIS_PORT")


class LiteLLMUnavailable(RuntimeError):
    """The proxy cannot run here; the message says what to build or what failed."""


@dataclass(frozen=True)
class LiteLLMProxy:
    """A running proxy: ``base_url`` has no ``/v1``; the clients call ``{base_url}/v1/...``."""

    base_url: str
    master_key: str
    log_path: Path


def proxy_environment(
    upstream_base_url: str, master_key: str, base: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The proxy's environment: the upstream URL, the master key, the local maps, no DB."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in _DROPPED}
    env = {k: v for k, v in env.items() if not k.endswith("_API_KEY")}
    env.update(dict.fromkeys(_LOCAL_MAPS, "True"))
    env["LOCAL_MODEL_API_BASE"] = upstream_base_url
    env["LITELLM_MASTER_KEY"] = master_key
    env["LITELLM_LOG"] = "INFO"
    env["PYTHONUNBUFFERED"] = "1"
    return env


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    await _stop_group(process)
    # Workers the CLI forked stay in the group; none may outlive the proxy.
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)


@contextlib.asynccontextmanager
async def litellm_proxy(
    upstream_base_url: str,
    *,
    master_key: str | None = None,
    config: Path = CONFIG,
    startup_timeout: float = 120.0,
) -> AsyncIterator[LiteLLMProxy]:
    """Run the proxy in front of ``upstream_base_url`` (an OpenAI-compatible ``.../v1``)."""
    if not LITELLM_BIN.exists():
        raise LiteLLMUnavailable(f"no LiteLLM virtualenv at {LITELLM_VENV}: run make litellm-venv")
    key = master_key or f"sk-live-{secrets.token_hex(12)}"
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"agentfsm-litellm-{port}.log"
    with log.open("wb") as sink:
        process = await asyncio.create_subprocess_exec(
            str(LITELLM_BIN),
            "--config",
            str(config),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--num_workers",
            "1",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=sink,
            stderr=sink,
            env=proxy_environment(upstream_base_url, key),
            cwd=str(LITELLM_VENV),
            preexec_fn=_die_with_parent,
        )
    try:
        await wait_ready(
            process,
            f"{base_url}/health/liveliness",
            name="the LiteLLM proxy",
            log=log,
            limit=startup_timeout,
            error=LiteLLMUnavailable,
        )
        yield LiteLLMProxy(base_url=base_url, master_key=key, log_path=log)
    finally:
        await _stop(process)


async def _serve() -> None:  # pragma: no cover - manual use
    from agentfsm.adapters.providers._local import LOCAL_MODEL_NAME, LocalModel

    key = os.environ.get("LITELLM_MASTER_KEY")
    if not key:
        raise SystemExit("set LITELLM_MASTER_KEY (the proxy's master key) first")
    async with (
        LocalModel(on_progress=print) as model,
        litellm_proxy(model.base_url, master_key=key) as proxy,
    ):
        print(f"llama.cpp: {model.base_url}  model {LOCAL_MODEL_NAME}")
        print(f"LiteLLM:   {proxy.base_url}/v1  key: $LITELLM_MASTER_KEY  log {proxy.log_path}")
        print("Ctrl-C (or SIGTERM) stops both.")
        stop = asyncio.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            asyncio.get_running_loop().add_signal_handler(signum, stop.set)
        await stop.wait()


if __name__ == "__main__":  # pragma: no cover - manual use
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_serve())
