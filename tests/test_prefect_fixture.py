"""The tests' Prefect server is the test's, not the session's: a test reports to it only when it
asks for `prefect_server`, whichever tests ran before it in the same process (tests of one file
run in order, on one worker)."""

from __future__ import annotations

from proactflow.prefect_server.api import reports_to_prefect


def test_a_test_that_asks_for_the_server_reports_to_it(prefect_server):
    from prefect.settings import PREFECT_API_URL

    assert reports_to_prefect() and PREFECT_API_URL.value() == prefect_server


def test_the_next_test_that_does_not_ask_reports_to_none():
    assert not reports_to_prefect()
