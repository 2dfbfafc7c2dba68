"""Is a host reachable? Asked once per host, answered within seconds.

Offline, the hub client and litellm each retry for tens of seconds before failing, and say
little about why. A TCP connection attempt to the host tells "no network" (the name does not
resolve, or nothing answers) apart in about a second, before any of that starts.
"""

from __future__ import annotations

import socket
import threading
from functools import lru_cache
from urllib.parse import urlsplit

PROBE_TIMEOUT_S = 2.0


def _connect(host: str, port: int, outcome: list[str | None]) -> None:
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            outcome.append(None)
    except socket.gaierror:
        outcome.append(f"the name {host} does not resolve")
    except ConnectionRefusedError:
        outcome.append(f"{host}:{port} refused the connection")
    except OSError as exc:
        outcome.append(f"{host}:{port} does not answer ({exc.strerror or exc})")


@lru_cache(maxsize=64)
def _probe(host: str, port: int) -> str | None:
    outcome: list[str | None] = []
    # Name resolution has no timeout of its own: give the whole attempt a thread and a deadline.
    worker = threading.Thread(target=_connect, args=(host, port, outcome), daemon=True)
    worker.start()
    worker.join(PROBE_TIMEOUT_S + 0.5)
    return outcome[0] if outcome else f"{host}:{port} does not answer (timed out)"


def unreachable(url: str) -> str | None:
    """None when `url`'s host accepts a connection; otherwise why not, in a few words."""
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    return _probe(parts.hostname, port)
