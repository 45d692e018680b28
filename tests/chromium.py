"""Headless Chromium driven over the Chrome DevTools Protocol (``--remote-debugging-pipe``:
JSON messages separated by NUL bytes on file descriptors 3 and 4, no websocket needed).

Used by the tests that look at a page as a user would: load it, evaluate expressions in
it, collect console errors and take a screenshot. Those tests carry
``@pytest.mark.requires_program("chromium", "chromium")``: skipped with the reason where
Debian's ``chromium`` is absent, failed under ``CI`` (``.ci/run`` installs it).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

__all__ = ["Chromium"]


class Chromium:
    """One headless browser with one page; every console error, uncaught exception and
    browser log error of the page is kept in :attr:`errors`."""

    def __init__(self, binary: str, profile: Path, size: tuple[int, int] = (1400, 900)) -> None:
        to_child, self._write = os.pipe()
        self._read, from_child = os.pipe()
        # The child's ends moved above the low descriptors, so that a small trampoline can
        # put them on fds 3 (commands in) and 4 (answers out) before it becomes the browser.
        ends = []
        for fd in (to_child, from_child):
            ends.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 100))
            os.close(fd)
        trampoline = (
            "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
            "os.close(int(sys.argv[1])); os.close(int(sys.argv[2])); "
            "os.execv(sys.argv[3], sys.argv[3:])"
        )
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-c",
                trampoline,
                str(ends[0]),
                str(ends[1]),
                binary,
                "--headless=new",
                "--no-sandbox",  # tests run as root
                "--disable-gpu",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-extensions",
                "--disable-background-networking",
                "--remote-debugging-pipe",
                f"--user-data-dir={profile}",
                f"--window-size={size[0]},{size[1]}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            pass_fds=tuple(ends),
        )
        for fd in ends:
            os.close(fd)
        self._buffer = b""
        self._next_id = 0
        self._events: list[dict[str, Any]] = []
        self.errors: list[str] = []
        self.session: str | None = None
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": False},
        )

    def _send(self, message: dict[str, Any]) -> None:
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self._write, data) :]

    def _receive(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._read], [], [], left)[0]:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise ConnectionError("Chromium closed its debugging pipe")
            self._buffer += chunk
        raw, _, self._buffer = self._buffer.partition(b"\0")
        message: dict[str, Any] = json.loads(raw)
        self._note(message)
        return message

    def _note(self, message: dict[str, Any]) -> None:
        method, params = message.get("method"), message.get("params") or {}
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            texts = [str(arg.get("value", arg.get("description"))) for arg in params["args"]]
            self.errors.append("console: " + " ".join(texts))
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            self.errors.append(
                "exception: " + str(details.get("exception", {}).get("description", details))
            )
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append("log: " + str(params["entry"].get("text")))
        if method:
            self._events.append(message)

    def call(self, method: str, params: dict[str, Any] | None = None, timeout: float = 30) -> Any:
        """Send one command to the page (or the browser before a page is attached); its
        result."""
        self._next_id += 1
        ident = self._next_id
        message: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if self.session is not None:
            message["sessionId"] = self.session
        self._send(message)
        deadline = time.monotonic() + timeout
        while True:
            answer = self._receive(deadline)
            if answer.get("id") == ident:
                if "error" in answer:
                    raise RuntimeError(f"{method}: {answer['error']}")
                return answer.get("result", {})

    def wait_for(self, method: str, timeout: float = 30) -> dict[str, Any]:
        """The next event ``method`` (one already received counts)."""
        deadline = time.monotonic() + timeout
        while True:
            for index, event in enumerate(self._events):
                if event["method"] == method:
                    del self._events[: index + 1]
                    return event
            self._events.clear()
            self._receive(deadline)

    def open(self, path: Path) -> None:
        """Load the file ``path`` and wait for its load event."""
        self._events.clear()
        self.call("Page.navigate", {"url": path.resolve().as_uri()})
        self.wait_for("Page.loadEventFired")

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (JSON-able results)."""
        result = self.call(
            "Runtime.evaluate",
            {"expression": expression, "returnByValue": True, "awaitPromise": True},
        )
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> bytes:
        """A PNG of the page as shown, written to ``path``."""
        data = base64.b64decode(self.call("Page.captureScreenshot", {"format": "png"})["data"])
        path.write_bytes(data)
        return data

    def close(self) -> None:
        try:
            self.session = None
            self.call("Browser.close", timeout=5)
        except (OSError, RuntimeError, TimeoutError, ConnectionError):
            pass
        finally:
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            os.close(self._write)
            os.close(self._read)
