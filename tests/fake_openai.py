"""A local OpenAI-compatible HTTP server for tests and benchmarks.

It speaks just enough of the chat-completions API for litellm's OpenAI client: `POST
/v1/chat/completions` and `GET /v1/models`. What a model answers is decided by a responder
function per model name, so a test can script replays, failures and malformed replies, and the
server counts every request per model: the number a test asserts on is measured at the server.
"""

from __future__ import annotations

import json
import math
import sys
import threading
import time
from collections import Counter, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable


@dataclass
class Reply:
    """What the server sends back for one request."""

    content: str = ""
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    finish_reason: str = "stop"
    delay: float = 0.0
    served_model: str | None = None
    """The `model` the answer names (default: the model asked for)."""
    system_fingerprint: str | None = None
    cached_tokens: int = 0
    """Of the prompt's tokens, those the provider's prompt cache served (OpenAI's
    `usage.prompt_tokens_details.cached_tokens`)."""
    body: dict | None = None
    """An error reply's whole JSON body, as a gateway shapes it (default: OpenAI's
    {"error": {"message": content, ...}})."""


def proxy_error(message: str, kind: str = "None", status: int = 400) -> Reply:
    """An error as the litellm proxy answers it: its ProxyException's body (type, param and
    code as strings), e.g. a wrong key with no database: proxy_error("No connected db.",
    "no_db_connection")."""
    return Reply(status=status, content=message, body={"error": {
        "message": message, "type": kind, "param": "None", "code": str(status)}})


def proxy_unknown_model(model: str) -> Reply:
    """The litellm proxy's answer to a chat request for a model name it does not route."""
    return proxy_error(f"{{'error': '/chat/completions: Invalid model name passed in "
                       f"model={model}. Call `/v1/models` to view available models for your "
                       f"key.'}}")


Responder = Callable[[dict], Reply]
PROBE_PROMPT = "Reply with the single word: ready."
"""What a sweep's snapshot probe asks (proactflow.sweeps.snapshot.PROBE_PROMPT)."""


def _is_probe(request: dict) -> bool:
    messages = request.get("messages") or []
    return len(messages) == 1 and messages[0].get("content") == PROBE_PROMPT


def text(content: str) -> Responder:
    return lambda request: Reply(content=content)


def always_status(status: int, message: str = "scripted failure") -> Responder:
    return lambda request: Reply(status=status, content=message)


class PerMinuteLimit:
    """A provider's requests-per-minute limit around a responder: a request that arrives when
    more than `per_minute` requests (refused ones included) arrived in the last `window` seconds
    is answered 429 with a Retry-After, and counted in `refused`; `busiest` is the most requests
    seen in one window. One per model: wrap each model's responder in its own."""

    def __init__(self, responder: Responder, per_minute: int, window: float = 60.0):
        self.responder, self.per_minute, self.window = responder, per_minute, window
        self.refused = 0
        self.busiest = 0
        self._arrived: deque[float] = deque()
        self._lock = threading.Lock()

    def __call__(self, request: dict) -> Reply:
        with self._lock:
            now = time.monotonic()
            while self._arrived and self._arrived[0] <= now - self.window:
                self._arrived.popleft()
            self._arrived.append(now)
            self.busiest = max(self.busiest, len(self._arrived))
            if len(self._arrived) > self.per_minute:
                self.refused += 1
                wait = self._arrived[0] + self.window - now
                return Reply(status=429, content="Rate limit reached for requests per minute",
                             headers={"Retry-After": str(max(1, math.ceil(wait)))})
        return self.responder(request)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    """socketserver's 5 is too few for a sweep's 17 flows connecting at once on a loaded
    machine: connections past it wait for the kernel to retry, past a client's connect timeout."""

    def handle_error(self, request, client_address) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)  # a dropped client is not news


class FakeOpenAI:
    """Threaded fake endpoint; `responders` maps the request's `model` field to a Responder."""

    def __init__(self, responders: dict[str, Responder] | None = None, latency: float = 0.0,
                 port: int = 0):
        self.responders: dict[str, Responder] = dict(responders or {})
        self.latency = latency
        self.calls: Counter[str] = Counter()
        self.probes: Counter[str] = Counter()
        """A sweep's snapshot probes per model (proactflow.sweeps.snapshot), not in `calls`."""
        self.requests: list[dict] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self.in_flight_by_model: Counter[str] = Counter()
        self.peak_by_model: Counter[str] = Counter()
        """The most requests of each model (its `model` field) in flight at once."""
        self.call_times: list[float] = []
        self.on_request: Callable[[dict], None] | None = None
        self.responder_errors: list[str] = []
        self.model_details: dict[str, dict] = {}
        """Extra fields of a model's /models entry (e.g. {"root": "checkpoint-2"})."""
        self.listed: list[str] | None = None
        """The names /models lists (default: every model with a responder)."""
        self.models_reply: Reply | None = None
        """What /models answers instead of a listing (an error status: 404 for a server
        without the route, a gateway's 400 for a key it does not take)."""
        self.models_reads = 0
        self._lock = threading.Lock()
        # A fixed port (frozen_outputs.py): the endpoint's address is part of artifact keys.
        self._server = _QuietServer(("127.0.0.1", port), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def start(self) -> "FakeOpenAI":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FakeOpenAI":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def reset_counts(self) -> None:
        with self._lock:
            self.calls.clear()
            self.probes.clear()
            self.requests.clear()
            self.call_times.clear()
            self.peak_in_flight = 0
            self.peak_by_model.clear()

    def _answer(self, request: dict) -> Reply:
        model = request.get("model", "")
        responder = self.responders.get(model)
        if responder is None:
            return Reply(status=404, content=f"The model `{model}` does not exist.")
        if _is_probe(request):
            try:  # a responder that reads a snapshot answers it; a replay knows no such prompt
                return responder(request)
            except Exception:
                return Reply(content="ready")
        return responder(request)

    def completion_body(self, request: dict, reply: Reply) -> dict:
        """The chat completion object answering `request` with `reply` (status 200)."""
        words = len(reply.content.split())
        budget = request.get("max_completion_tokens") or request.get("max_tokens")
        if reply.finish_reason == "length" and budget:
            words = budget  # a reply cut at the request's limit used all of it
        prompt_words = sum(len(str(m.get("content", "")).split())
                           for m in request.get("messages", []))
        return {
            "id": f"chatcmpl-{self.calls[request.get('model', '')]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": reply.served_model or request.get("model", ""),
            "system_fingerprint": reply.system_fingerprint,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": reply.content},
                "finish_reason": reply.finish_reason,
            }],
            "usage": {
                "prompt_tokens": prompt_words,
                "completion_tokens": words,
                "total_tokens": prompt_words + words,
                **({"prompt_tokens_details": {"cached_tokens": reply.cached_tokens}}
                   if reply.cached_tokens else {}),
            },
        }

    def extra_route(self, handler, method: str) -> bool:
        """A subclass serving more of the API answers `handler`'s request here (True)."""
        return False

    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # A reply goes as two writes (headers, then body): with Nagle's algorithm on, the
            # body waits for the client to acknowledge the headers, which it delays by up to
            # 40 ms on a kept-alive connection. Servers set TCP_NODELAY; so does the fake.
            disable_nagle_algorithm = True

            def log_message(self, *args) -> None:  # keep test output clean
                pass

            def _send(self, status: int, payload: dict, headers: dict[str, str] | None = None):
                body = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away (a killed or interrupted run)

            def _send_error(self, reply: Reply) -> None:
                error = {"message": reply.content, "type": "fake_error", "code": reply.status}
                self._send(reply.status, reply.body or {"error": error}, reply.headers)

            def do_GET(self):
                if fake.extra_route(self, "GET"):
                    return
                if self.path.rstrip("/").endswith("/models"):
                    with fake._lock:
                        fake.models_reads += 1
                    if fake.models_reply is not None:
                        self._send_error(fake.models_reply)
                        return
                    names = fake.responders if fake.listed is None else fake.listed
                    data = [{"id": name, "object": "model", "created": int(time.time()),
                             **fake.model_details.get(name, {})} for name in names]
                    self._send(200, {"object": "list", "data": data})
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self):
                if fake.extra_route(self, "POST"):
                    return
                length = int(self.headers.get("Content-Length") or 0)
                request = json.loads(self.rfile.read(length) or b"{}")
                request["_authorization"] = self.headers.get("Authorization", "")
                request["_path"] = self.path
                model = request.get("model", "")
                with fake._lock:
                    # A sweep's snapshot probe is counted apart: `calls` are the evaluation's.
                    (fake.probes if _is_probe(request) else fake.calls)[model] += 1
                    fake.requests.append(request)
                    fake.call_times.append(time.monotonic())
                    fake.in_flight += 1
                    fake.peak_in_flight = max(fake.peak_in_flight, fake.in_flight)
                    fake.in_flight_by_model[model] += 1
                    fake.peak_by_model[model] = max(fake.peak_by_model[model],
                                                    fake.in_flight_by_model[model])
                try:
                    if fake.on_request is not None:
                        fake.on_request(request)
                    try:
                        reply = fake._answer(request)
                    except Exception as exc:  # a broken responder is a test bug: say so loudly
                        fake.responder_errors.append(repr(exc))
                        reply = Reply(status=400, content=f"responder raised {exc!r}"[:300])
                    pause = fake.latency + reply.delay
                    if pause:
                        time.sleep(pause)
                finally:
                    with fake._lock:
                        fake.in_flight -= 1
                        fake.in_flight_by_model[model] -= 1
                if reply.status != 200:
                    self._send_error(reply)
                    return
                self._send(200, fake.completion_body(request, reply), reply.headers)

        return Handler
