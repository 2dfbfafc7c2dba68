"""The tests' Prefect server is the test's, not the session's: a test reports to it only when it
asks for `prefect_server`, whichever tests ran before it in the same process (tests of one file
run in order, on one worker). Likewise a temporary server that a command run in the test's
process started ends with the test."""

from __future__ import annotations

from proactflow.prefect_server.api import reports_to_prefect


def test_a_test_that_asks_for_the_server_reports_to_it(prefect_server):
    from prefect.settings import PREFECT_API_URL

    assert reports_to_prefect() and PREFECT_API_URL.value() == prefect_server


def test_the_next_test_that_does_not_ask_reports_to_none():
    assert not reports_to_prefect()


_temporary_servers: list = []


def test_a_command_in_this_process_starts_a_temporary_server():
    """As a sweep without PREFECT_API_URL does, first thing (cli/sweeping.py)."""
    from proactflow.prefect_server import api

    api.start_temporary_server()
    process = api.temporary_server_process()
    assert process is not None
    _temporary_servers.append(process)


def test_the_next_test_finds_it_stopped():
    """Stopped as the test that started it ended (conftest.py), as the command's own process
    stops it at its exit: not left up, idle, until the worker ends."""
    import subprocess

    from proactflow.prefect_server import api

    assert api.temporary_server_process() is None
    [process] = _temporary_servers
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the temporary server (pid {process.pid}) still runs") from None
