"""The command lines the security tests give the real ``agentfsm`` command."""

from __future__ import annotations

from pathlib import Path

from agentfsm.conformance._frames import openai_url
from agentfsm.testing import FakeProviderServer

__all__ = ["provider_options", "run_argv"]


def provider_options(workspace: Path, server: FakeProviderServer) -> list[str]:
    """``--workspace`` and the options that point a run at ``server`` (OpenAI wire, model
    ``m``, the minimal preset)."""
    return [
        "--workspace",
        str(workspace),
        "--provider",
        "openai-compatible",
        "--base-url",
        openai_url(server),
        "--model",
        "m",
        "--preset",
        "minimal",
    ]


def run_argv(prompt: str, workspace: Path, server: FakeProviderServer, *extra: str) -> list[str]:
    """``agentfsm run prompt`` in ``workspace`` against ``server``, then ``extra``."""
    return ["run", prompt, *provider_options(workspace, server), *extra]
