"""The temporary Prefect server's process (api.py starts it): Prefect's app (app.py) served by
uvicorn on a listening socket the command bound and handed down.

The command binds the port and holds it until the server serves on it. A port merely found
free and bound by the server seconds later (after its imports) could be taken meanwhile by
another process: the server then failed to start, or the command reported to a stranger.

    python -m proactflow.prefect_server.serve PACKAGES_FOLDER DESCRIPTOR
"""

from __future__ import annotations

import socket
import sys


def main(argv: list[str] | None = None) -> None:
    packages, descriptor = sys.argv[1:] if argv is None else argv
    # The packages' folder first on sys.path, not the current one (uvicorn's --app-dir): a
    # folder named like a package where the command was started shadows nothing.
    sys.path.insert(0, packages)
    import uvicorn

    # Its family read from the descriptor (TCP), so that each connection gets TCP_NODELAY as on
    # a socket uvicorn binds (uvicorn's own --fd takes any descriptor for a Unix socket's).
    listening = socket.socket(fileno=int(descriptor))
    config = uvicorn.Config("proactflow.prefect_server.app:create_app", factory=True,
                            log_level="error", lifespan="on")
    uvicorn.Server(config).run(sockets=[listening])


if __name__ == "__main__":
    main()
