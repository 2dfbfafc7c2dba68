"""llama-cpp-python's OpenAI-compatible server on loopback, serving the tiny models the tests
write (llama_model.py), behind a recording proxy: every request the server gets and the status
it answered are kept, so a test asserts on what reached the real server.

Two models: `tiny` (replies end after a few dozen tokens) and `talky` (replies run until the
context is full). Both with n_ctx 1024, as a small local server would be set up.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from ports import free_port

N_CTX = 1024
START_TIMEOUT_S = 120


class LlamaUnavailable(RuntimeError):
    pass


@dataclass
class Exchange:
    method: str
    path: str
    body: dict | None
    status: int
    reply: str


@dataclass
class RecordingProxy:
    """Forwards every request to the server and keeps the exchange."""

    upstream_port: int
    exchanges: list[Exchange] = field(default_factory=list)
    port: int = 0

    def start(self) -> "RecordingProxy":
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # as fake_openai's: no 40 ms wait for each body

            def log_message(self, *args) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                connection = http.client.HTTPConnection("127.0.0.1", proxy.upstream_port,
                                                        timeout=300)
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("host", "connection", "accept-encoding")}
                connection.request(self.command, self.path, body=raw or None, headers=headers)
                response = connection.getresponse()
                payload = response.read()
                connection.close()
                try:
                    body = json.loads(raw) if raw else None
                except ValueError:
                    body = None
                proxy.exchanges.append(Exchange(self.command, self.path, body, response.status,
                                                payload.decode("utf-8", "replace")[:2000]))
                self.send_response(response.status)
                self.send_header("Content-Type",
                                 response.getheader("Content-Type") or "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def chat(self) -> list[Exchange]:
        return [e for e in self.exchanges if e.path.endswith("/chat/completions")]


class LlamaServer:
    """`python -m llama_cpp.server` with both tiny models, on loopback, bounded in time."""

    def __init__(self, models: dict[str, Path], workdir: Path):
        self.models, self.workdir = models, workdir
        self.process: subprocess.Popen | None = None
        self.proxy: RecordingProxy | None = None

    @property
    def api_base(self) -> str:
        assert self.proxy is not None
        return f"http://127.0.0.1:{self.proxy.port}/v1"

    def start(self) -> "LlamaServer":
        try:
            import llama_cpp.server  # noqa: F401
        except ImportError as exc:
            raise LlamaUnavailable(
                f"llama-cpp-python's server is not installed ({exc}); "
                "pip install -c requirements.lock -e '.[llama]' (it builds for about 10 "
                "minutes)") from None
        port = free_port()
        config = {"host": "127.0.0.1", "port": port, "models": [
            {"model": str(path), "model_alias": alias, "n_ctx": N_CTX, "n_threads": 1,
             "n_threads_batch": 1, "verbose": False}
            for alias, path in self.models.items()]}
        config_file = self.workdir / "llama-server.json"
        config_file.write_text(json.dumps(config))
        self.log = open(self.workdir / "llama-server.log", "wb")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llama_cpp.server", "--config_file", str(config_file)],
            stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise LlamaUnavailable("llama-cpp-python's server exited at start: "
                                       + (self.workdir / "llama-server.log").read_text()[-500:])
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise LlamaUnavailable("llama-cpp-python's server did not answer within "
                                           f"{START_TIMEOUT_S} s") from None
                time.sleep(0.2)
        self.proxy = RecordingProxy(port).start()
        return self

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        if getattr(self, "log", None):
            self.log.close()
