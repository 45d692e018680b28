"""Saving live exchanges in the format of the recorded wire fixtures (keys scrubbed)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from agentfsm.adapters.providers.errors import redact

from .context import LiveTarget, recorded_header

__all__ = ["save_recordings", "scrub"]

_KEYLIKE = re.compile(r"(sk-[A-Za-z0-9_\-]{8,}|sk-ant-[A-Za-z0-9_\-]{8,}|Bearer\s+\S+)")


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` without the given secrets (or pieces of them) or anything shaped like a key."""
    return _KEYLIKE.sub("[redacted]", redact(text, secrets))


def save_recordings(target: LiveTarget, recordings: list[dict[str, Any]]) -> list[Path]:
    """One YAML file per exchange in ``target.record_dir``, replayable by ``load_wire_fixture``."""
    assert target.record_dir is not None
    folder = Path(target.record_dir)
    folder.mkdir(parents=True, exist_ok=True)
    secrets = (target.api_key or "",)
    written = []
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    for number, item in enumerate(recordings, start=1):
        request = dict(item["request"])
        request["body"] = scrub(request["body"], secrets)
        response = dict(item["response"])
        response["body"] = scrub(response["body"], secrets)
        response["headers"] = {
            name: [scrub(str(value), secrets) for value in values]
            for name, values in dict(response.get("headers") or {}).items()
            if recorded_header(name)
        }
        request["uri"] = scrub(str(request.get("uri", "")), secrets)
        document = {
            "fixture": {
                "provider": target.label,
                "api": "messages" if target.wire == "anthropic" else "chat.completions",
                "scenario": item["name"],
                "streaming": '"stream": true' in request["body"],
                "genuineness": f"recorded by agentfsm conformance --record on {stamp}",
            },
            "interactions": [{"request": request, "response": response}],
        }
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", item["name"])
        path = folder / f"{stamp}-{number:02d}-{safe}.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False, allow_unicode=True), "utf-8")
        written.append(path)
    return written
