"""FakeOpenAI that also speaks OpenAI's files and batches API, as litellm's client calls it:
upload a JSONL file (`POST /v1/files`), create a batch of it with metadata (`POST /v1/batches`),
retrieve, list (newest first, paged) and cancel batches, read the output and error files
(`GET /v1/files/{id}/content`).

A batch runs its lines through the same responders as interactive calls, `completion_delay`
seconds after it was created, when it is next looked at; a line whose responder answers an error
status goes to the error file. `expire_next` batches expire having run only their first half.
Every line of every batch created is counted per custom_id (`lines_submitted`): the number the
tests assert on is measured here. `on_event(name, batch_or_file_id)` is called before the
server answers "upload", "create" (the batch exists by then), "retrieve" and "content", so a
test can kill its client in any phase.

`files_unconfigured` (a message) makes every files and batches route answer HTTP 500 with it, as
the litellm proxy does until its files settings are configured; `unconfigured_routes` narrows
that to some ("files" alone: the batches route answers, the upload fails).
`bare_500_batch_reads` (a count) makes that many reads of the batches route answer HTTP 500 with
the plain text "Internal Server Error", as the real litellm proxy (1.110.2, no files settings)
answers `GET /v1/batches`, without its files sentence.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
import threading
import time
from collections import Counter
from typing import Callable
from urllib.parse import parse_qs, urlsplit

from fake_openai import FakeOpenAI, Reply, Responder


class FakeBatches(FakeOpenAI):
    def __init__(self, responders: dict[str, Responder] | None = None, latency: float = 0.0,
                 completion_delay: float = 0.0, port: int = 0):
        super().__init__(responders, latency, port)
        self.completion_delay = completion_delay
        self.expire_next = 0
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.lines_submitted: Counter[str] = Counter()
        self.batch_sizes: list[int] = []
        self.on_event: Callable[[str, str], None] | None = None
        self.authorizations: list[str] = []
        self.files_unconfigured: str | None = None
        self.unconfigured_routes: frozenset[str] = frozenset({"files", "batches"})
        self.bare_500_batch_reads = 0
        self.route_requests: Counter[str] = Counter()
        """Requests per method and route kind ("GET batches", "POST files"...)."""
        self._batch_lock = threading.Lock()

    # What a test reads.

    @property
    def twice(self) -> dict[str, int]:
        """custom_ids submitted in more than one batch."""
        return {key: count for key, count in self.lines_submitted.items() if count > 1}

    # The API.

    def extra_route(self, handler, method: str) -> bool:
        path = urlsplit(handler.path).path.rstrip("/")
        if "/files" not in path and "/batches" not in path:
            return False
        self.authorizations.append(handler.headers.get("Authorization", ""))
        length = int(handler.headers.get("Content-Length") or 0)
        raw = handler.rfile.read(length) if length else b""
        parts = path.split("/")
        kind = "files" if "/files" in path else "batches"
        self.route_requests[f"{method} {kind}"] += 1
        if method == "GET" and kind == "batches" and self.bare_500_batch_reads > 0:
            self.bare_500_batch_reads -= 1
            body = b"Internal Server Error"
            handler.send_response(500)
            handler.send_header("Content-Type", "text/plain; charset=utf-8")
            handler.send_header("Content-Length", str(len(body)))
            handler.end_headers()
            handler.wfile.write(body)
        elif self.files_unconfigured is not None and kind in self.unconfigured_routes:
            handler._send(500, {"error": {"message": self.files_unconfigured, "type": "None",
                                          "param": "None", "code": "500"}})
        elif method == "POST" and path.endswith("/files"):
            file_id = self._upload(handler.headers.get("Content-Type", ""), raw)
            self._event("upload", file_id)
            handler._send(200, self._file_object(file_id))
        elif method == "GET" and path.endswith("/content"):
            file_id = parts[-2]
            self._event("content", file_id)
            self._send_raw(handler, self.files.get(file_id, b""))
        elif method == "POST" and path.endswith("/batches"):
            batch = self._create(json.loads(raw or b"{}"))
            self._event("create", batch["id"])
            handler._send(200, batch)
        elif method == "POST" and path.endswith("/cancel"):
            handler._send(200, self._cancel(parts[-2]))
        elif method == "GET" and path.endswith("/batches"):
            query = parse_qs(urlsplit(handler.path).query)
            handler._send(200, self._list(int(query.get("limit", ["20"])[0]),
                                          query.get("after", [None])[0]))
        elif method == "GET" and parts[-2] == "batches":
            self._event("retrieve", parts[-1])
            found = self._retrieve(parts[-1])
            handler._send(200 if found else 404, found or {"error": {"message": "no batch"}})
        else:
            handler._send(404, {"error": {"message": f"not found: {method} {path}"}})
        return True

    def _event(self, name: str, subject: str) -> None:
        if self.on_event is not None:
            self.on_event(name, subject)

    @staticmethod
    def _send_raw(handler, body: bytes) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/octet-stream")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        try:
            handler.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _upload(self, content_type: str, raw: bytes) -> str:
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw)
        content = b""
        for part in message.iter_parts():
            if part.get_param("name", header="content-disposition") == "file":
                content = part.get_payload(decode=True) or b""
        with self._batch_lock:
            file_id = f"file-{len(self.files) + 1}"
            self.files[file_id] = content
        return file_id

    def _file_object(self, file_id: str) -> dict:
        return {"id": file_id, "object": "file", "bytes": len(self.files[file_id]),
                "created_at": int(time.time()), "filename": f"{file_id}.jsonl",
                "purpose": "batch", "status": "processed"}

    def _create(self, request: dict) -> dict:
        lines = [json.loads(raw) for raw in
                 self.files.get(request.get("input_file_id", ""), b"").decode().splitlines()
                 if raw.strip()]
        with self._batch_lock:
            batch_id = f"batch_{len(self.batches) + 1}"
            expires = self.expire_next > 0
            self.expire_next -= expires
            self.batches[batch_id] = {
                "id": batch_id, "object": "batch", "endpoint": request.get("endpoint"),
                "input_file_id": request.get("input_file_id"),
                "completion_window": request.get("completion_window", "24h"),
                "status": "in_progress", "created_at": int(time.time()),
                "metadata": request.get("metadata") or {}, "output_file_id": None,
                "error_file_id": None, "errors": None,
                "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
                "_lines": lines, "_due": time.monotonic() + self.completion_delay,
                "_expires": expires}
            for line in lines:
                self.lines_submitted[line["custom_id"]] += 1
            self.batch_sizes.append(len(lines))
            return self._public(self.batches[batch_id])

    @staticmethod
    def _public(batch: dict) -> dict:
        return {name: value for name, value in batch.items() if not name.startswith("_")}

    def _retrieve(self, batch_id: str) -> dict | None:
        with self._batch_lock:
            batch = self.batches.get(batch_id)
            if batch is None:
                return None
            if batch["status"] == "in_progress" and time.monotonic() >= batch["_due"]:
                self._finish(batch)
            return self._public(batch)

    def _finish(self, batch: dict) -> None:
        lines = batch["_lines"]
        ran = lines[:len(lines) // 2] if batch["_expires"] else lines
        output, errors = [], []
        for number, line in enumerate(ran):
            request = dict(line["body"])
            try:
                reply = self._answer(request)
            except Exception as exc:  # a broken responder is a test bug: say so loudly
                self.responder_errors.append(repr(exc))
                reply = Reply(status=400, content=f"responder raised {exc!r}"[:300])
            self.requests.append({**request, "_path": "batch"})
            entry = {"id": f"batch_req_{number}", "custom_id": line["custom_id"], "error": None}
            if reply.status == 200:
                entry["response"] = {"status_code": 200, "request_id": f"req_{number}",
                                     "body": self.completion_body(request, reply)}
                output.append(entry)
            else:
                entry["response"] = {"status_code": reply.status, "request_id": f"req_{number}",
                                     "body": {"error": {"message": reply.content,
                                                        "type": "fake_error"}}}
                errors.append(entry)
        for kind, entries in (("output_file_id", output), ("error_file_id", errors)):
            if entries:
                file_id = f"file-{len(self.files) + 1}"
                self.files[file_id] = "".join(json.dumps(e) + "\n" for e in entries).encode()
                batch[kind] = file_id
        batch["request_counts"] = {"total": len(lines), "completed": len(output),
                                   "failed": len(errors)}
        batch["status"] = "expired" if batch["_expires"] else "completed"

    def _cancel(self, batch_id: str) -> dict:
        with self._batch_lock:
            batch = self.batches[batch_id]
            if batch["status"] == "in_progress":
                batch["status"] = "cancelled"
            return self._public(batch)

    def _list(self, limit: int, after: str | None) -> dict:
        with self._batch_lock:
            newest_first = sorted(self.batches.values(),
                                  key=lambda b: int(b["id"].split("_")[1]), reverse=True)
            if after is not None:
                ids = [batch["id"] for batch in newest_first]
                newest_first = newest_first[ids.index(after) + 1:] if after in ids else []
            page = [self._public(batch) for batch in newest_first[:limit]]
            return {"object": "list", "data": page,
                    "first_id": page[0]["id"] if page else None,
                    "last_id": page[-1]["id"] if page else None,
                    "has_more": len(newest_first) > limit}


__all__ = ["FakeBatches", "Reply"]
