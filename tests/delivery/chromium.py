"""Headless Chromium driven over the DevTools protocol, to look at a page as a person would.

The protocol runs on a pipe (``--remote-debugging-pipe``: Chromium reads commands on its fd 3
and answers on its fd 4, each message JSON ended by a NUL byte), so nothing but the standard
library and Debian's ``chromium`` is needed. :meth:`Chromium.visit` loads a page and reports
what a person would see in the console: uncaught exceptions, ``console.error`` and ``assert``,
every error the browser logs (a resource that failed to load, a blocked script or fetch) and
every request that is not to a ``file:`` or ``data:`` URL; then it takes a screenshot.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import math
import os
import select
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

BINARIES = ("chromium", "chromium-browser", "google-chrome")
TIMEOUT_S = 60
MAX_HEIGHT = 16_000  # pixels of a full-page screenshot
# the child side: the pipes' ends become its fds 3 and 4, then it is Chromium
_TRAMPOLINE = (
    "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
    "os.execv(sys.argv[3], sys.argv[3:])"
)


def find_chromium() -> str | None:
    return next(filter(None, map(shutil.which, BINARIES)), None)


class BrowserError(Exception):
    """Chromium did not answer, or answered a command with an error."""


@dataclass
class Visit:
    """What loading a page showed: console errors, the URLs it asked for, a PNG screenshot."""

    errors: list[str] = field(default_factory=list)
    requests: list[str] = field(default_factory=list)
    screenshot: bytes = b""
    values: dict = field(default_factory=dict)  # the page's answers to the visit's expressions


class Chromium:
    def __init__(self, binary: str, profile: Path):
        command_read, command_write = _high_pipe()
        reply_read, reply_write = _high_pipe()
        flags = ["--headless", "--disable-gpu", "--no-sandbox", "--remote-debugging-pipe", "--no-first-run"]
        flags += ["--no-default-browser-check", "--hide-scrollbars", f"--user-data-dir={profile}"]
        command = [sys.executable, "-c", _TRAMPOLINE, str(command_read), str(reply_write), binary, *flags]
        self.process = subprocess.Popen(
            command,
            pass_fds=(command_read, reply_write),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(command_read)
        os.close(reply_write)
        self._send, self._receive = command_write, reply_read
        self._buffer = b""
        self._last_id = 0
        self.events: list[dict] = []

    def close(self) -> None:
        with contextlib.suppress(BrowserError, OSError):
            self.command("Browser.close")
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        os.close(self._send)
        os.close(self._receive)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def command(self, method: str, params: dict | None = None, session: str | None = None) -> dict:
        self._last_id += 1
        message = {"id": self._last_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self._send, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._message(deadline)
            if reply.get("id") != self._last_id:
                self.events.append(reply)
            elif "error" in reply:
                raise BrowserError(f"{method}: {reply['error']}")
            else:
                return reply.get("result", {})

    def wait_for(self, method: str, session: str) -> dict:
        deadline = time.monotonic() + TIMEOUT_S
        seen = 0
        while True:
            for event in self.events[seen:]:
                if event.get("method") == method and event.get("sessionId") == session:
                    return event
            seen = len(self.events)
            self.events.append(self._message(deadline))

    def visit(
        self,
        url: str,
        width: int = 1280,
        height: int = 2000,
        evaluate: dict | None = None,
        full_page: bool = False,
    ) -> Visit:
        """Load ``url`` in a fresh tab: the console's errors, its requests, a screenshot of the viewport
        (``full_page``: of the whole page, at most ``MAX_HEIGHT`` pixels), the values of ``evaluate``'s
        expressions after the load."""
        target = self.command("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.command("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.command(f"{domain}.enable", session=session)
        metrics = {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False}
        self.command("Emulation.setDeviceMetricsOverride", metrics, session)
        start = len(self.events)
        self.command("Page.navigate", {"url": url}, session)
        self.wait_for("Page.loadEventFired", session)
        visit = Visit()
        for name, expression in (evaluate or {}).items():
            result = self.command(
                "Runtime.evaluate", {"expression": expression, "returnByValue": True}, session
            )
            visit.values[name] = result["result"].get("value")
        if full_page:
            content = self.command("Page.getLayoutMetrics", session=session)["cssContentSize"]
            metrics["height"] = min(math.ceil(content["height"]), MAX_HEIGHT)
            self.command("Emulation.setDeviceMetricsOverride", metrics, session)
        shot = self.command("Page.captureScreenshot", {"format": "png"}, session)
        visit.screenshot = base64.b64decode(shot["data"])
        events = [e for e in self.events[start:] if e.get("sessionId") == session]
        visit.errors = [error for e in events if (error := _error(e))]
        visit.requests = [
            e["params"]["request"]["url"] for e in events if e["method"] == "Network.requestWillBeSent"
        ]
        self.command("Target.closeTarget", {"targetId": target})
        return visit

    def _message(self, deadline: float) -> dict:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._receive], [], [], left)[0]:
                raise BrowserError(f"Chromium did not answer within {TIMEOUT_S} s")
            chunk = os.read(self._receive, 1 << 20)
            if not chunk:
                raise BrowserError(f"Chromium closed its pipe (exit status {self.process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)


def _high_pipe() -> tuple[int, int]:
    """A pipe whose ends are above 4, so that moving them onto 3 and 4 in the child overwrites neither."""
    ends = []
    for end in os.pipe():
        ends.append(fcntl.fcntl(end, fcntl.F_DUPFD_CLOEXEC, 10))
        os.close(end)
    return ends[0], ends[1]


def _error(event: dict) -> str | None:
    """What a person would read as an error in the console, from one protocol event."""
    method, params = event.get("method"), event.get("params", {})
    if method == "Runtime.exceptionThrown":
        details = params["exceptionDetails"]
        return f"uncaught: {details.get('exception', {}).get('description') or details.get('text')}"
    if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
        return (
            "console."
            + params["type"]
            + ": "
            + " ".join(str(a.get("value", a.get("description"))) for a in params["args"])
        )
    if method == "Log.entryAdded" and params["entry"]["level"] == "error":
        entry = params["entry"]
        return f"{entry.get('source')}: {entry['text']} ({entry.get('url', '')})"
    if method == "Network.loadingFailed" and not params.get("canceled"):
        return f"failed to load: {params.get('errorText')} ({params.get('blockedReason', '')})"
    return None
