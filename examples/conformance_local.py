"""Run the conformance kit against the embedded model's server and write its reports.

`make conformance-local` runs this and refreshes docs/conformance/. The server is
llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct. It is checked
twice: with OpenAI's default profile, so that every way it differs from OpenAI shows
(`llama-cpp-python.md`), and with the profile the CLI uses for it (`LOCAL_QUIRKS`,
`llama-cpp-python-local-profile.md`); `matrix.md` puts the two side by side with the
same server behind the LiteLLM proxy (its reports come from the live tier).
"""

from __future__ import annotations

import asyncio
import json
import sys
from importlib.metadata import version
from pathlib import Path

from agentfsm.adapters.providers import (
    LOCAL_CONTEXT_TOKENS,
    LOCAL_MODEL_NAME,
    LOCAL_QUIRKS,
    LocalModel,
    OpenAIQuirks,
)
from agentfsm.conformance import (
    Capabilities,
    CheckResult,
    LiveTarget,
    Report,
    matrix_markdown,
    report_markdown,
    run_checks,
)

CAPABILITIES = Capabilities(
    streaming=True,
    tools=True,
    tool_choice=True,
    usage=True,
    stream_usage=True,
    max_tokens=True,
    context_window=LOCAL_CONTEXT_TOKENS,
)


def server_name() -> str:
    """The server checked, with the installed llama-cpp-python's version."""
    return f"llama-cpp-python {version('llama-cpp-python')} + SmolLM2-135M-Instruct"


PROFILES = {
    "llama-cpp-python": ("default profile", OpenAIQuirks()),
    "llama-cpp-python-local-profile": ("LOCAL_QUIRKS", LOCAL_QUIRKS),
}


def show(result: CheckResult) -> None:
    print(f"  {result.check:<4} {result.name:<34} {result.outcome}", file=sys.stderr)


async def check_local(profile: OpenAIQuirks | None = None, label: str = "") -> Report:
    """The report of the embedded model's server, read with the given quirk profile."""
    async with LocalModel(on_progress=lambda line: print(line, file=sys.stderr)) as model:
        target = LiveTarget(
            model.base_url,
            LOCAL_MODEL_NAME,
            capabilities=CAPABILITIES,
            quirks=profile or OpenAIQuirks(),
            name=f"{server_name()} ({label})" if label else server_name(),
        )
        return await run_checks(target, progress=show)


PROXIED = (
    "litellm-openai",
    "litellm-anthropic",
    "llama-server-chat",
    "llama-server-anthropic",
    "llama-server-responses",
    "litellm-llama-server-chat",
    "litellm-llama-server-anthropic",
    "litellm-llama-server-responses",
)
"""The reports the live tier writes: the same server behind the LiteLLM proxy on its two
wires (tests/live/test_conformance_litellm.py), and llama.cpp's own server directly and
behind LiteLLM on all three wires (tests/live/test_conformance_servers.py)."""
MATRIX_HEAD = """# Three servers, three wires

The embedded model (SmolLM2-135M-Instruct) on three servers: llama-cpp-python's, read with
OpenAI's default profile and with `LOCAL_QUIRKS`
([llama-cpp-python.md](llama-cpp-python.md), \
[llama-cpp-python-local-profile.md](llama-cpp-python-local-profile.md)), and the LiteLLM
proxy in front of it on its OpenAI and Anthropic wires
([litellm-openai.md](litellm-openai.md), [litellm-anthropic.md](litellm-anthropic.md));
llama.cpp's own server (`llama-server`, built from the llama.cpp that llama-cpp-python
vendors) on its three wires ([llama-server-chat.md](llama-server-chat.md), \
[llama-server-anthropic.md](llama-server-anthropic.md), \
[llama-server-responses.md](llama-server-responses.md)), and the LiteLLM proxy in front of
it on the same three ([litellm-llama-server-chat.md](litellm-llama-server-chat.md), \
[litellm-llama-server-anthropic.md](litellm-llama-server-anthropic.md), \
[litellm-llama-server-responses.md](litellm-llama-server-responses.md)). Every report is
read with the default profile of its wire's adapter. `make test-live` runs them again and
holds each to its committed report. The table is `agentfsm conformance matrix` of the ten
reports; docs/conformance.md names the quirk behind every failure.

Legend: ✓ pass · ⚠ pass-normalized · ✗ fail · x xfail · m model (the model, not the server) · - skip

"""


def main() -> int:
    folder = Path(__file__).resolve().parents[1] / "docs" / "conformance"
    folder.mkdir(parents=True, exist_ok=True)
    reports = []
    for stem, (label, profile) in PROFILES.items():
        report = asyncio.run(check_local(profile, label))
        (folder / f"{stem}.md").write_text(report_markdown(report), "utf-8")
        (folder / f"{stem}.json").write_text(json.dumps(report.as_dict(), indent=2) + "\n", "utf-8")
        print(stem, report.counts())
        reports.append(report)
    # The reports the live tier writes stay in the matrix beside the two just made.
    for stem in PROXIED:
        path = folder / f"{stem}.json"
        if path.exists():
            reports.append(Report.from_dict(json.loads(path.read_text("utf-8"))))
    (folder / "matrix.md").write_text(MATRIX_HEAD + matrix_markdown(reports), "utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
