"""Waiting for the temporary Prefect server (prefect_server/api.py, issue #26): it ends when the
server answers, when its process ends (one line with the last line of its log), or after the
limit a user sets (PROACTFLOW_PREFECT_SERVER_TIMEOUT); after a few seconds a line says what the
command waits for. Stand-ins for the server's process: a slow one, one that dies, one that never
answers."""

from __future__ import annotations

import socket
import sys
import time

import pytest

from proactflow.common.errors import UserError
from proactflow.prefect_server import api

SLOW_SERVER = """
import http.server, socket, sys, time
time.sleep(float(sys.argv[2]))
class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/api/health" else 404)
        self.end_headers()
        self.wfile.write(b"true")
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("127.0.0.1", 0), Health, bind_and_activate=False)
server.socket = socket.socket(fileno=int(sys.argv[1]))  # the port the command bound
server.server_activate()  # listens
server.serve_forever()
"""


class StandIn(api.TemporaryServer):
    def __init__(self, script: str, *args: str):
        super().__init__()
        self.script, self.args = script, args

    def command(self, descriptor: int) -> list[str]:
        return [sys.executable, "-c", self.script, str(descriptor), *self.args]


@pytest.fixture
def stand_ins():
    started: list[StandIn] = []
    yield started
    for server in started:
        server.stop(wait=0)


def started(stand_ins, script: str, *args: str) -> StandIn:
    server = StandIn(script, *args)
    server.start()
    stand_ins.append(server)
    return server


def test_a_slow_server_is_waited_for_with_a_line_saying_so(stand_ins, capsys, monkeypatch):
    monkeypatch.setattr(api, "PROGRESS_AFTER", 0.5)
    server = started(stand_ins, SLOW_SERVER, "2")
    server.wait_ready(api.start_timeout())  # 600 s by default: far more than it takes
    assert server.ready
    err = capsys.readouterr().err
    assert err.count("waiting for the temporary Prefect server to answer") == 1, err
    assert api.START_TIMEOUT_ENV in err


def test_a_server_that_dies_is_one_line_with_the_reason_from_its_log(stand_ins):
    server = started(stand_ins, "import sys, time; time.sleep(0.3); print('Traceback ...'); "
                                "print('sqlite3.OperationalError: unable to open database file');"
                                " sys.exit(3)")
    began = time.monotonic()
    with pytest.raises(UserError) as error:
        server.wait_ready(600)
    assert time.monotonic() - began < 60  # not the limit: its end
    message = str(error.value)
    assert "exit status 3" in message and "unable to open database file" in message
    assert "\n" not in message


def test_the_limit_is_the_users(stand_ins, monkeypatch):
    monkeypatch.setenv(api.START_TIMEOUT_ENV, "0.5")
    server = started(stand_ins, "import time; time.sleep(60)")
    with pytest.raises(UserError, match=f"did not answer within 0.5 s .*{api.START_TIMEOUT_ENV}"):
        server.wait_ready(api.start_timeout())
    monkeypatch.setenv(api.START_TIMEOUT_ENV, "soon")
    with pytest.raises(UserError, match="a positive number"):
        api.start_timeout()
    monkeypatch.delenv(api.START_TIMEOUT_ENV)
    assert api.start_timeout() == api.START_TIMEOUT >= 300


def test_the_port_is_the_commands_from_the_start(stand_ins):
    """The port is bound as the server is made, and handed to its process: not found free and
    bound by the server seconds later (after its imports), when another process could have
    taken it. One never started gives it back when stopped."""
    server = StandIn(SLOW_SERVER, "0.5")
    stand_ins.append(server)
    for stage in ("made", "started"):
        with socket.socket() as other, pytest.raises(OSError, match="in use"):
            other.bind(("127.0.0.1", server.port))
        if stage == "made":
            server.start()
    server.wait_ready(60)
    assert server.ready  # it served on that port

    unused = api.TemporaryServer()
    unused.stop(wait=0)
    with socket.socket() as other:
        other.bind(("127.0.0.1", unused.port))
