"""The temporary Prefect server's app (proactflow/prefect_server/app.py): a request that met a
locked SQLite database runs again in the server; any other answer passes through once."""

from __future__ import annotations

import asyncio

import pytest

from proactflow.prefect_server.app import ATTEMPTS, RetryLockedDatabase


class Flaky:
    """An ASGI app that fails `failures` times (503, or raising), then answers 200 with the
    request body it read."""

    def __init__(self, failures: int, how: str = "503"):
        self.failures, self.how = failures, how
        self.bodies: list[bytes] = []

    async def __call__(self, scope, receive, send):
        assert scope["path"] == "/api/task_runs/"  # as received, on every run
        scope["path"] = "/task_runs/"  # as a mounted app's routing rewrites it
        message = await receive()
        self.bodies.append(message["body"])
        if len(self.bodies) <= self.failures:
            if self.how == "raise":
                raise RuntimeError("(sqlite3.OperationalError) database is locked")
            status, body = (503, b"busy") if self.how == "503" else (500, b"broken")
        else:
            status, body = 200, message["body"]
        await send({"type": "http.response.start", "status": status, "headers": []})
        await send({"type": "http.response.body", "body": body})


def call(app, body: bytes = b'{"name": "x"}'):
    sent = []
    chunks = [{"type": "http.request", "body": body[:5], "more_body": True},
              {"type": "http.request", "body": body[5:], "more_body": False}]

    async def receive():
        return chunks.pop(0) if chunks else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    asyncio.run(RetryLockedDatabase(app)({"type": "http", "method": "POST",
                                                "path": "/api/task_runs/"}, receive, send))
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


@pytest.mark.parametrize("how", ["503", "raise"])
def test_a_locked_database_is_retried_in_the_server_with_the_same_body(how):
    app = Flaky(failures=2, how=how)
    assert call(app) == (200, b'{"name": "x"}')
    assert app.bodies == [b'{"name": "x"}'] * 3


def test_other_answers_pass_through_at_once():
    app = Flaky(failures=1, how="500")
    assert call(app) == (500, b"broken") and len(app.bodies) == 1


def test_a_database_locked_for_longer_answers_503_as_prefect_would():
    app = Flaky(failures=ATTEMPTS + 5)
    assert call(app) == (503, b"busy") and len(app.bodies) == ATTEMPTS


def test_writes_run_one_at_a_time_and_reads_alongside():
    inside = {"now": 0, "peak": 0}

    async def slow(scope, receive, send):
        await receive()
        inside["now"] += 1
        inside["peak"] = max(inside["peak"], inside["now"])
        await asyncio.sleep(0.02)
        inside["now"] -= 1
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    app = RetryLockedDatabase(slow)

    async def request(method: str, path: str):
        async def receive():
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message):
            pass

        await app({"type": "http", "method": method, "path": path}, receive, send)

    async def many(method: str, path: str) -> int:
        inside["peak"] = 0
        await asyncio.gather(*(request(method, path) for _ in range(5)))
        return inside["peak"]

    assert asyncio.run(many("POST", "/api/task_runs/")) == 1
    assert asyncio.run(many("POST", "/api/task_runs/filter")) == 5  # a read, sent as POST
    assert asyncio.run(many("GET", "/api/flow_runs/x")) == 5
