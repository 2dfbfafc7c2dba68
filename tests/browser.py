"""A headless Chromium driven over the DevTools protocol, for tests of the HTML pages.

Only what the tests need: open a page, run script in it (clicks, reads), take a screenshot.
"""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from websockets.sync.client import connect

from ports import free_port

# Without the networking switches Chromium keeps calling Google's hosts, which a closed
# network refuses many times a second.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--allow-file-access-from-files", "--window-size=1400,900"]


def chromium_path() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser") \
        or shutil.which("google-chrome")


class Browser:
    def __init__(self, url: str, timeout: float = 30.0):
        self.port = free_port()
        self.profile = tempfile.mkdtemp(prefix="proactflow-chromium-")
        self.process = subprocess.Popen(
            [chromium_path() or "chromium", *FLAGS, f"--remote-debugging-port={self.port}",
             f"--user-data-dir={self.profile}", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        page = None
        while page is None:
            if time.monotonic() > deadline:
                self.close()
                raise TimeoutError("Chromium did not open its DevTools endpoint")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json", timeout=2) as r:
                    page = next((t for t in json.load(r) if t.get("type") == "page"), None)
            except OSError:
                time.sleep(0.2)
        self.socket = connect(page["webSocketDebuggerUrl"], max_size=2**26,
                              open_timeout=timeout)
        self.next_id = 0

    def command(self, method: str, **params: Any) -> dict:
        self.next_id += 1
        self.socket.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.socket.recv(timeout=30))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def evaluate(self, expression: str) -> Any:
        result = self.command("Runtime.evaluate", expression=expression, returnByValue=True,
                              awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"page script failed: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float = 15.0) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.1)
        raise TimeoutError(f"never true in the page: {expression}")

    def screenshot(self, path: Path) -> None:
        data = self.command("Page.captureScreenshot", format="png")["data"]
        path.write_bytes(base64.b64decode(data))

    def close(self) -> None:
        try:
            if getattr(self, "socket", None) is not None:
                self.socket.close()
        finally:
            self.process.kill()
            self.process.wait(timeout=10)
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
