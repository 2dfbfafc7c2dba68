"""Loopback ports for the tests' servers and fakes, in one place."""

from __future__ import annotations

import socket
from contextlib import contextmanager
from typing import Iterator


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free now, for servers that bind their own port from a number
    (PostgreSQL, SeaweedFS, llama.cpp's server, the litellm proxy, Chromium, `prefect server
    start`). Another process could take one before its server binds it: where a server takes a
    socket, it is handed one instead (proactflow/prefect_server/serve.py)."""
    held = [socket.socket() for _ in range(count)]
    try:
        for sock in held:  # all bound at once: no port twice
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in held]
    finally:
        for sock in held:
            sock.close()


def free_port() -> int:
    return free_ports(1)[0]


@contextmanager
def reserved_port() -> Iterator[int]:
    """A loopback port held for the block, bound and not listening: a connection there is
    refused (a test of "nothing listens there"), and fakes started one after another can take
    turns on the same address (an endpoint's address is part of what a run keys and records).
    It is bound with SO_REUSEADDR, as the fakes' server binds: the next fake can bind it, and
    nothing else gets it (a bind without SO_REUSEADDR is refused, and the kernel picked it for
    none of 80,000 binds to port 0 and 20,000 outgoing connections, 2026-11-29). A port merely
    found free could be taken meanwhile by another test worker's server or a client's
    connection."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", 0))
        yield holder.getsockname()[1]
    finally:
        holder.close()
