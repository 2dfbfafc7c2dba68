"""`PREFECT_API_URL` names a server that must answer before any work starts: a busy server that
is slow to answer its health route is asked again, longer, and a refused connection stops the
command at once, with one line."""

from __future__ import annotations

import socket
import threading

import pytest

from proactflow.cli import running
from proactflow.common.errors import UserError


class SlowServer:
    """Accepts connections on loopback; answers the `answer_from`-th ask (1-based) and later
    ones with HTTP 200, and keeps earlier ones waiting without a word."""

    def __init__(self, answer_from: int | None):
        self.answer_from, self.asks = answer_from, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/api"
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            self.asks += 1
            if self.answer_from is not None and self.asks >= self.answer_from:
                connection.recv(65536)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 4\r\n"
                                   b"Connection: close\r\n\r\ntrue")
                connection.close()
            else:
                self.held.append(connection)  # never answered

    def close(self) -> None:
        self.sock.close()
        for connection in self.held:
            connection.close()


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(running, "PREFECT_HEALTH_TIMEOUTS_S", (0.3, 0.3, 0.3))


def check(monkeypatch, url: str) -> None:
    monkeypatch.setenv("PREFECT_API_URL", url)
    from prefect.settings import PREFECT_API_URL, temporary_settings

    with temporary_settings(updates={PREFECT_API_URL: url}):
        running.check_prefect_server()


def test_a_server_slow_to_answer_is_asked_again(monkeypatch, quick):
    server = SlowServer(answer_from=3)
    try:
        check(monkeypatch, server.url)  # no error: the third ask is answered
        assert server.asks == 3
    finally:
        server.close()


def test_a_server_that_never_answers_is_one_line_after_every_ask(monkeypatch, quick):
    server = SlowServer(answer_from=None)
    try:
        with pytest.raises(UserError) as stopped:
            check(monkeypatch, server.url)
        assert server.asks == 3
        message = str(stopped.value)
        assert "does not answer within 0.9 s" in message and "\n" not in message
    finally:
        server.close()


def test_a_refused_connection_stops_at_once(monkeypatch):
    from ports import reserved_port

    with reserved_port() as port, pytest.raises(UserError) as stopped:
        check(monkeypatch, f"http://127.0.0.1:{port}/api")
    # Not asked again: the line names the refusal, not a wait.
    assert "within" not in str(stopped.value) and "refused" in str(stopped.value).lower()
