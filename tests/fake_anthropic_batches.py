"""A local server speaking Anthropic's Messages API and its Message Batches API, for tests and
benchmarks.

`POST /v1/messages` answers at once; `POST /v1/messages/batches` takes `{requests: [{custom_id,
params}]}` and finishes its lines one after another over `completion_delay` seconds. A line's
fate (succeeded, errored, expired) is the test's to script; a cancelled batch's unfinished lines
end canceled. What a model answers is decided by the same responders as tests/fake_openai.py's,
which see the request as OpenAI messages; a JSON-mode request (litellm's forced
`json_tool_call` tool) gets the reply as the tool's input, as Claude gives it.

Every line ever submitted is counted per custom_id (`submitted`), so a test asserts at the
server that no request was sent twice; `api_failures` scripts the next answers of the batch API
itself (429, 500, 413...).
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone
from http.server import BaseHTTPRequestHandler
from typing import Callable
from urllib.parse import parse_qs, urlsplit

from fake_openai import Reply, Responder, _QuietServer

Fate = Callable[[str, dict], str]
"""(custom_id, params) -> "succeeded", "errored" or "expired"."""

JSON_TOOL = "json_tool_call"


def _rfc3339(moment: float | None) -> str | None:
    if moment is None:
        return None
    return datetime.fromtimestamp(moment, timezone.utc).isoformat().replace("+00:00", "Z")


def _text_of(content) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(block.get("text", "") for block in content or [] if isinstance(block, dict))


def openai_view(params: dict) -> dict:
    """The Anthropic request as the OpenAI-shaped dict fake_openai's responders read."""
    messages = []
    if params.get("system"):
        messages.append({"role": "system", "content": _text_of(params["system"])})
    messages += [{"role": m["role"], "content": _text_of(m.get("content"))}
                 for m in params.get("messages", [])]
    return {"model": params.get("model", ""), "messages": messages,
            "max_tokens": params.get("max_tokens")}


@dataclass
class _Batch:
    id: str
    created: float
    lines: list[tuple[str, dict]]
    finish_at: list[float]
    fates: list[str]
    cancel_at: float | None = None
    ended: float | None = None
    outcomes: dict[str, dict] = field(default_factory=dict)
    settling: threading.Lock = field(default_factory=threading.Lock)
    """Held while the batch's due lines are answered, one after the other in the file's order
    (a line reads what the lines before it left): other requests wait only for the fake's
    short-held lock, never for a batch's lines."""


class FakeAnthropic:
    """Threaded fake; `responders` maps the request's `model` to a fake_openai Responder."""

    def __init__(self, responders: dict[str, Responder] | None = None, *,
                 api_key: str = "sk-ant-test", completion_delay: float = 0.5,
                 fate: Fate | None = None, max_request_bytes: int = 256_000_000,
                 cancel_delay: float = 0.1, port: int = 0):
        self.responders: dict[str, Responder] = dict(responders or {})
        self.api_key = api_key
        self.completion_delay = completion_delay
        """Seconds from a batch's creation until its last line is done."""
        self.fate: Fate = fate or (lambda custom_id, params: "succeeded")
        self.max_request_bytes = max_request_bytes
        self.cancel_delay = cancel_delay
        self.submitted: Counter[str] = Counter()
        """custom_id -> times it was submitted in a batch, over the server's life."""
        self.batch_params: list[dict] = []
        self.interactive_bodies: list[dict] = []
        self.interactive_calls: Counter[str] = Counter()
        self.api_failures: list[tuple[int, str]] = []
        """Scripted answers of the next batch API requests: (HTTP status, message)."""
        self.api_requests: Counter[str] = Counter()
        """Batch API requests by kind: create, retrieve, list, results, cancel."""
        self.headers_seen: list[dict[str, str]] = []
        self.responder_errors: list[str] = []
        self.usage: dict[str, list[int]] = {}
        self.cache_usage: Callable[[dict], dict] | None = None
        """Extra usage fields of a Messages reply to these params (a test's prompt cache:
        `cache_read_input_tokens`, `cache_creation_input_tokens`)."""
        """model -> [input tokens, output tokens] of the batch lines it answered."""
        self.on_event: Callable[[str, str], None] | None = None
        """Called as (event, batch id) before the server answers "create" (the batch exists by
        then), "retrieve" and "results": a test kills its client in any phase."""
        self.batches: dict[str, _Batch] = {}
        self._order: list[str] = []
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", port), self._handler_class())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def start(self) -> "FakeAnthropic":
        self._thread.start()
        return self

    def serve(self) -> None:
        """Serve in this thread until the process ends (a benchmark's fake of its own)."""
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "FakeAnthropic":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # What a line answers.

    def message(self, params: dict) -> tuple[int, dict]:
        """(HTTP status, body) of the Messages API for `params`."""
        model = params.get("model", "")
        responder = self.responders.get(model)
        if responder is None:
            return 404, _error("not_found_error", f"model: {model}")
        try:
            reply: Reply = responder(openai_view(params))
        except Exception as exc:  # a broken responder is a test bug: say so loudly
            self.responder_errors.append(repr(exc))
            return 400, _error("invalid_request_error", f"responder raised {exc!r}"[:300])
        if reply.status != 200:
            return reply.status, _error("api_error", reply.content)
        forced = (params.get("tool_choice") or {}).get("name")
        content: list[dict]
        if forced == JSON_TOOL:
            try:
                content = [{"type": "tool_use", "id": "toolu_fake", "name": JSON_TOOL,
                            "input": json.loads(reply.content)}]
            except ValueError:
                content = [{"type": "text", "text": reply.content}]
        else:
            content = [{"type": "text", "text": reply.content}]
        words = len(reply.content.split())
        if reply.finish_reason == "length":
            words = params.get("max_tokens") or words
        prompt = openai_view(params)["messages"]
        return 200, {
            "id": "msg_fake", "type": "message", "role": "assistant",
            "model": reply.served_model or model, "content": content,
            "stop_reason": {"stop": "end_turn", "length": "max_tokens"}.get(
                reply.finish_reason, "end_turn"),
            "stop_sequence": None,
            "usage": {"input_tokens": sum(len(m["content"].split()) for m in prompt),
                      "output_tokens": words,
                      **(self.cache_usage(params) if self.cache_usage is not None else {})}}

    def stats(self) -> dict:
        return {"lines": sum(self.submitted.values()), "submitted": dict(self.submitted),
                "batches": len(self.batches),
                "interactive": sum(self.interactive_calls.values()),
                "usage": self.usage,
                "first_created": min((b.created for b in self.batches.values()), default=None),
                "last_due": max((b.finish_at[-1] for b in self.batches.values()),
                                default=None)}

    def _event(self, name: str, batch_id: str) -> None:
        if self.on_event is not None:
            self.on_event(name, batch_id)

    # Batches.

    def _settle(self, batch: _Batch, now: float) -> None:
        """Finish the lines whose time has come; end the batch when none is left. Called
        without the fake's lock: each line's outcome is recorded under it, one at a time."""
        with batch.settling:
            if batch.ended is not None:
                return
            cancelled = batch.cancel_at is not None and now >= batch.cancel_at
            for (custom_id, params), due, fate in zip(batch.lines, batch.finish_at, batch.fates):
                if custom_id in batch.outcomes:
                    continue
                outcome: dict | None = None
                if now >= due and fate == "succeeded":
                    status, body = self.message(params)
                    outcome = ({"type": "succeeded", "message": body} if status == 200 else
                               {"type": "errored", "error": body})
                elif now >= due and fate == "errored":
                    outcome = {"type": "errored", "error": _error(
                        "invalid_request_error", "scripted failure of this line")}
                elif now >= due and fate == "expired":
                    outcome = {"type": "expired"}
                elif cancelled:
                    outcome = {"type": "canceled"}
                if outcome is None:
                    continue
                with self._lock:
                    if outcome["type"] == "succeeded":
                        used = self.usage.setdefault(str(params.get("model")), [0, 0])
                        used[0] += outcome["message"]["usage"]["input_tokens"]
                        used[1] += outcome["message"]["usage"]["output_tokens"]
                    batch.outcomes[custom_id] = outcome
            with self._lock:
                if len(batch.outcomes) == len(batch.lines):
                    batch.ended = now

    def _view(self, batch: _Batch) -> dict:
        """The batch as the API shows it (under the fake's lock; `_settle` it first)."""
        counts = Counter(outcome["type"] for outcome in batch.outcomes.values())
        state = "ended" if batch.ended is not None else (
            "canceling" if batch.cancel_at is not None else "in_progress")
        return {
            "id": batch.id, "type": "message_batch", "processing_status": state,
            "request_counts": {"processing": len(batch.lines) - len(batch.outcomes),
                               "succeeded": counts["succeeded"], "errored": counts["errored"],
                               "canceled": counts["canceled"], "expired": counts["expired"]},
            "created_at": _rfc3339(batch.created), "ended_at": _rfc3339(batch.ended),
            "expires_at": _rfc3339(batch.created + 86400),
            "cancel_initiated_at": _rfc3339(batch.cancel_at and batch.cancel_at
                                            - self.cancel_delay),
            "archived_at": None,
            "results_url": (f"{self.url}/v1/messages/batches/{batch.id}/results"
                            if batch.ended is not None else None)}

    def create(self, requests: list[dict]) -> dict:
        with self._lock:
            now = time.time()
            lines = [(r["custom_id"], r["params"]) for r in requests]
            count = len(lines)
            batch = _Batch(
                id=f"msgbatch_{len(self.batches) + 1:06d}", created=now, lines=lines,
                finish_at=[now + self.completion_delay * (i + 1) / count for i in range(count)],
                fates=[self.fate(custom_id, params) for custom_id, params in lines])
            self.submitted.update(custom_id for custom_id, _ in lines)
            self.batch_params += [params for _, params in lines]
            self.batches[batch.id] = batch
            self._order.append(batch.id)
        self._settle(batch, now)
        with self._lock:
            return self._view(batch)

    def _handler_class(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # as fake_openai's: no 40 ms wait for each body

            def log_message(self, *args) -> None:
                pass

            def _send(self, status: int, payload: dict | str,
                      content_type: str = "application/json") -> None:
                body = (payload if isinstance(payload, str) else json.dumps(payload)).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                if status == 429:
                    self.send_header("retry-after", "0")
                self.end_headers()
                try:
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client went away (a killed run)

            def _refused(self, kind: str) -> bool:
                """Check the headers; answer a scripted failure. True when answered."""
                with fake._lock:
                    fake.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
                    if kind != "message":
                        fake.api_requests[kind] += 1
                if self.headers.get("x-api-key") != fake.api_key:
                    self._send(401, _error("authentication_error", "invalid x-api-key"))
                    return True
                if not self.headers.get("anthropic-version"):
                    self._send(400, _error("invalid_request_error",
                                           "anthropic-version: header is required"))
                    return True
                with fake._lock:
                    scripted = fake.api_failures.pop(0) if fake.api_failures \
                        and kind != "message" else None
                if scripted is not None:
                    self._send(scripted[0], _error("api_error", scripted[1]))
                    return True
                return False

            def _batch(self, batch_id: str) -> _Batch | None:
                batch = fake.batches.get(batch_id)
                if batch is None:
                    self._send(404, _error("not_found_error", f"no batch {batch_id}"))
                return batch

            def do_GET(self):
                parts = urlsplit(self.path)
                path = parts.path.rstrip("/").split("/")
                if path[-1] == "models":  # what proactflow's preflight reads, with a bearer key
                    if self.headers.get("Authorization") != f"Bearer {fake.api_key}" \
                            and self._refused("models"):
                        return
                    self._send(200, {"data": [{"id": name, "type": "model"}
                                              for name in fake.responders], "has_more": False})
                elif path[-1] == "stats":  # for a benchmark running the fake apart
                    with fake._lock:
                        stats = fake.stats()
                    self._send(200, stats)
                elif path[-1] == "batches":
                    if self._refused("list"):
                        return
                    self._send(200, self._list(parse_qs(parts.query)))
                elif path[-1] == "results":
                    if self._refused("results") or (batch := self._batch(path[-2])) is None:
                        return
                    fake._event("results", batch.id)
                    fake._settle(batch, time.time())
                    with fake._lock:
                        if batch.ended is None:
                            self._send(400, _error("invalid_request_error",
                                                   "batch is still processing"))
                            return
                        lines = [json.dumps({"custom_id": custom_id,
                                             "result": batch.outcomes[custom_id]})
                                 for custom_id, _ in reversed(batch.lines)]
                    self._send(200, "\n".join(lines) + "\n", "application/binary")
                else:
                    if self._refused("retrieve") or (batch := self._batch(path[-1])) is None:
                        return
                    fake._event("retrieve", batch.id)
                    fake._settle(batch, time.time())
                    with fake._lock:
                        view = fake._view(batch)
                    self._send(200, view)

            def _list(self, query: dict[str, list[str]]) -> dict:
                limit = int(query.get("limit", ["20"])[0])
                with fake._lock:
                    newest_first = list(reversed(fake._order))
                    if "after_id" in query:
                        newest_first = newest_first[newest_first.index(query["after_id"][0]) + 1:]
                for batch_id in newest_first[:limit]:
                    fake._settle(fake.batches[batch_id], time.time())
                with fake._lock:
                    page = [fake._view(fake.batches[i]) for i in newest_first[:limit]]
                return {"data": page, "has_more": len(newest_first) > limit,
                        "first_id": page[0]["id"] if page else None,
                        "last_id": page[-1]["id"] if page else None}

            def do_POST(self):
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                path = urlsplit(self.path).path.rstrip("/")
                if path.endswith("/v1/messages"):
                    if self._refused("message"):
                        return
                    body = json.loads(raw)
                    with fake._lock:
                        fake.interactive_bodies.append(body)
                        fake.interactive_calls[body.get("model", "")] += 1
                    self._send(*fake.message(body))
                elif path.endswith("/batches"):
                    if self._refused("create"):
                        return
                    if len(raw) > fake.max_request_bytes:
                        self._send(413, _error("request_too_large",
                                               "Request exceeds the maximum allowed size"))
                        return
                    created = fake.create(json.loads(raw)["requests"])
                    fake._event("create", created["id"])
                    self._send(200, created)
                elif path.endswith("/cancel"):
                    batch_id = path.split("/")[-2]
                    if self._refused("cancel") or (batch := self._batch(batch_id)) is None:
                        return
                    with fake._lock:
                        if batch.ended is None and batch.cancel_at is None:
                            batch.cancel_at = time.time() + fake.cancel_delay
                    fake._settle(batch, time.time())
                    with fake._lock:
                        view = fake._view(batch)
                    self._send(200, view)
                else:
                    self._send(404, _error("not_found_error", self.path))

        return Handler


def _error(kind: str, message: str) -> dict:
    return {"type": "error", "error": {"type": kind, "message": message}}
