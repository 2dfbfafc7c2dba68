"""How the database's errors reach the user (one line naming host:port/database, never a user
name or a password) and which of them are a lost connection, after which an idempotent
statement is run once more on a new one."""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import socket
from typing import Any, Iterator
from urllib.parse import urlsplit

from .errors import UserError
from .redaction import redact

CONNECT_TIMEOUT_S = 10.0


def where(url: str) -> str:
    """host:port/database, for messages: never the user name, never a password."""
    parts = urlsplit(url)
    try:
        port: Any = parts.port
    except ValueError:
        port = None
    host = parts.hostname or os.environ.get("PGHOST") or "localhost"
    port = port or os.environ.get("PGPORT") or 5432
    name = parts.path.lstrip("/") or os.environ.get("PGDATABASE") or "(default database)"
    return f"{host}:{port}/{name}"


def connection_lost(exc: BaseException) -> bool:
    """Whether `exc` says the connection is gone (the server ended the session, the network
    dropped it, or asyncpg's protocol lost its state with it), not that a statement failed."""
    import asyncpg

    return isinstance(exc, (OSError, asyncpg.PostgresConnectionError,
                            asyncpg.OperatorInterventionError, asyncpg.InternalClientError,
                            asyncpg.InterfaceError))


def reason(exc: BaseException) -> str:
    import asyncpg

    if isinstance(exc, ConnectionRefusedError):
        return "refused the connection: is PostgreSQL running there, on that port?"
    if isinstance(exc, socket.gaierror):
        return "cannot be reached: the host name does not resolve"
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return f"did not answer within {CONNECT_TIMEOUT_S:g} s"
    if isinstance(exc, OSError):
        return f"cannot be reached ({exc.strerror or exc})"
    message = " ".join(str(exc).split()) or type(exc).__name__
    message = redact(re.sub(r'\b(user|role) "[^"]*"', r'\1 "***"', message))
    if isinstance(exc, (asyncpg.InvalidPasswordError,
                        asyncpg.InvalidAuthorizationSpecificationError)):
        return f"refused the connection: {message} (a password comes from PGPASSWORD or " \
               "~/.pgpass)"
    if isinstance(exc, asyncpg.PostgresError) and not connection_lost(exc):
        return f"refused: {message}"
    return f"lost the connection ({message})"


@contextlib.contextmanager
def translated(place: str) -> Iterator[None]:
    """Connection and server errors as one line naming `place` (host:port/database)."""
    import asyncpg

    try:
        yield
    except (OSError, asyncio.TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError,
            asyncpg.InternalClientError) as exc:
        raise UserError(f"database {place} {reason(exc)}") from None


def _asyncpg_cancel_noise(context: dict[str, Any]) -> bool:
    """asyncpg's own unheard future when a statement is cancelled: it sends the server a
    CancelRequest on an auxiliary connection, and when that connection ends while asyncpg waits
    for its TLS answer (the statement's connection closed meanwhile), the answer's future gets
    ConnectionError('unexpected connection_lost() call') with nobody left to read it. Nothing
    of ours is lost: the statement was cancelled and its connection is discarded."""
    exception = context.get("exception")
    return context.get("message") == "Future exception was never retrieved" \
        and isinstance(exception, ConnectionError) \
        and str(exception) == "unexpected connection_lost() call"


def quiet_asyncpg_cancel_noise(loop: asyncio.AbstractEventLoop) -> None:
    """On `loop`, drop `_asyncpg_cancel_noise` before the loop's exception handler (or the
    default one) sees it; every other context goes on to it unchanged. Installed once a loop."""
    previous = loop.get_exception_handler()
    if getattr(previous, "drops_asyncpg_cancel_noise", False):
        return

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if _asyncpg_cancel_noise(context):
            return
        if previous is not None:
            previous(loop, context)
        else:
            loop.default_exception_handler(context)

    handler.drops_asyncpg_cancel_noise = True  # type: ignore[attr-defined]
    loop.set_exception_handler(handler)
