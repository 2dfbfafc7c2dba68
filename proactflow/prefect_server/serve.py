"""The temporary Prefect server's process (api.py starts it, `server_command`): Prefect's app
(app.py) served by uvicorn on a socket the command bound and handed down.

The command binds the port and holds it until the server serves on it. A port merely found
free and bound by the server seconds later (after its imports) could be taken meanwhile by
another process: the server then failed to start, or the command reported to a stranger.
"""

from __future__ import annotations

import socket
import sys


def main(argv: list[str] | None = None) -> None:
    """Serve on the inherited socket. `argv`: the packages' folder (already first on sys.path,
    put there by the command line) and the socket's descriptor."""
    _, descriptor = sys.argv[1:] if argv is None else argv
    import uvicorn

    # Its family read from the descriptor (TCP), so that each connection gets TCP_NODELAY as on
    # a socket uvicorn binds itself (uvicorn's --fd takes any descriptor for a Unix socket's).
    bound = socket.socket(fileno=int(descriptor))
    bound.set_inheritable(False)  # the server's own children must not hold the port
    config = uvicorn.Config("proactflow.prefect_server.app:create_app", factory=True,
                            log_level="error", lifespan="on")
    try:
        uvicorn.Server(config).run(sockets=[bound])  # asyncio listens on it as it serves
    except KeyboardInterrupt:  # as uvicorn.run: a SIGINT sent by hand ends it without a trace
        pass
