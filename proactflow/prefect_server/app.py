"""The app of a command's temporary Prefect server (prefect_server/api.py): Prefect's own, with its
writes to SQLite one request at a time, and a request that still met a locked database run
again inside the server.

Prefect's server keeps its runs in SQLite. Two write transactions at once can fail at once with
"database is locked" whatever the busy timeout (both began deferred and both try to upgrade);
Prefect answers 503 (or, when the error escapes its handlers, 500), and its client retries a 503
after 2, 4, 8, 16 s. Measured on the 16-model benchmark: the burst of flow and task runs a sweep
creates at its start met about 26 such errors, and the pairs they hit started 4 to 33 s after the
others, which set the sweep's end. Retrying in the server alone made it worse (88 errors and two
stalls of 60 s, the busy timeout, in one run): more writers contending. With one write request at
a time (a write is milliseconds) the same sweep met none, and its 16 pairs started within 3 s.
Reads, including Prefect's POST filters and counts, are not held. Only the temporary server is
wrapped; a server of your own answers as Prefect's does.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import threading
import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .api import PARENT_ENV

ATTEMPTS = 8
"""Runs of one request before its 503 goes back to the client (which retries as usual)."""


def _locked(error: BaseException) -> bool:
    while error is not None:
        if "database is locked" in str(error):
            return True
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return False


class RetryLockedDatabase:
    """ASGI middleware: HTTP requests that write run one at a time; one answered 503, or
    failing with "database is locked" before its response started, is run again after a short
    random pause."""

    def __init__(self, app: ASGIApp):
        self.app = app
        self._writes: asyncio.Semaphore | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        body, more = b"", True
        while more:  # the request's body, to hand to every run of it
            message = await receive()
            if message["type"] != "http.request":
                await self.app(scope, _replay(b"", message, receive), send)
                return
            body, more = body + message.get("body", b""), message.get("more_body", False)
        if self._writes is None:
            self._writes = asyncio.Semaphore(1)
        async with self._writes if _writes(scope) else contextlib.nullcontext():
            await self._run(scope, body, receive, send)

    async def _run(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        for attempt in range(1, ATTEMPTS + 1):
            answer = _Answer(send, retry_503=attempt < ATTEMPTS)
            try:
                # A copy each time: routing rewrites the scope's path as it descends into
                # mounted apps, and a second run on the rewritten one would answer 404.
                await self.app({**scope, "headers": list(scope.get("headers", []))},
                               _replay(body, None, receive), answer.send)
            except Exception as error:
                if answer.started or attempt == ATTEMPTS or not _locked(error):
                    raise
            else:
                if not answer.held_back:
                    return
            await asyncio.sleep(random.uniform(0.01, 0.05) * attempt)


def _writes(scope: Scope) -> bool:
    """A request that writes to the database (Prefect reads with POST too: filters, counts)."""
    path = scope.get("path", "")
    return scope.get("method") in ("POST", "PUT", "PATCH", "DELETE") and not path.rstrip(
        "/").endswith(("/filter", "/count", "/paginate", "/history", "/latest"))


def _replay(body: bytes, first: Message | None, receive: Receive) -> Receive:
    """The request's body once, then the real channel (a disconnect, for instance)."""
    pending = [first or {"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()
    return replayed


class _Answer:
    """Passes a response on, unless it is a 503 to run again: then it is held back whole."""

    def __init__(self, send: Send, retry_503: bool):
        self._send = send
        self._retry_503 = retry_503
        self.started = False
        self.held_back = False

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start" and self._retry_503 \
                and message.get("status") == 503:
            self.held_back = True
        if self.held_back:
            return
        self.started = self.started or message["type"] == "http.response.start"
        await self._send(message)


def create_app() -> Any:
    """Prefect's server app (its own factory, settings from the environment), wrapped."""
    from prefect.server.api.server import create_app as prefect_app

    if os.environ.get(PARENT_ENV):
        _stop_when_orphaned(int(os.environ[PARENT_ENV]))
    return RetryLockedDatabase(prefect_app())


def _stop_when_orphaned(parent: int) -> None:
    """The server runs in a session of its own (a terminal's signals do not reach it): when
    its command ends without stopping it (kill -9, a closed terminal), it stops itself."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, daemon=True, name="stop-when-orphaned").start()
