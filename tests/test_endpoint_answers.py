"""Asking only what an endpoint serves (issue #36 item 2): a model its /v1/models does not
list stops the run before any call (unless --allow-unlisted-models), and an answer saying the
key or the model is wrong, as a server or the litellm proxy gives it (HTTP 400 "Invalid model
name", "No connected db.", "Authentication Error"), stops the run with one line naming the
endpoint, the model and the server's sentence instead of being stored as a refusal. Requests
the model cannot take stay `refused`, and the last line names the cause the server gave."""

from __future__ import annotations

import pytest

from fake_openai import Reply, proxy_error, proxy_unknown_model
from helpers import cli_args, run_cli


LIMIT = ("--limit", "3")
CALLS = 7
"""Generation calls of the first three dialogues (eight triggers, one not evaluable)."""


def _err_lines(capsys) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


def test_a_model_the_endpoint_does_not_list_stops_the_run_before_any_call(fake, store, capsys):
    fake.listed = ["gen", "judge"]  # the endpoint's /v1/models: only these two
    fake.responders["nosuch"] = lambda request: proxy_unknown_model("nosuch")
    assert run_cli("run", cli_args(fake, store, eval_model="openai/nosuch", extra=LIMIT)) == 2
    err = _err_lines(capsys)
    assert len(err) == 1, err
    assert "'nosuch'" in err[0] and "gen, judge" in err[0] and fake.url in err[0]
    assert "--allow-unlisted-models" in err[0]
    assert sum(fake.calls.values()) == 0


def test_a_router_serving_unlisted_names_runs_with_allow_unlisted_models(fake, store):
    fake.listed = ["judge"]  # `gen` is served, not listed (a router's aliases)
    assert run_cli("run", cli_args(fake, store, extra=(*LIMIT, "--allow-unlisted-models"))) == 0
    assert fake.calls["gen"] == CALLS


def test_an_endpoint_without_a_listing_is_asked_as_before(fake, store):
    fake.models_reply = Reply(status=404, content="not found")  # a server without the route
    assert run_cli("run", cli_args(fake, store, extra=LIMIT)) == 0
    assert fake.calls["gen"] == CALLS and fake.models_reads >= 1


def test_a_wrong_key_that_the_listing_answers_with_a_gateway_400_stops_before_any_call(
        fake, store, capsys):
    """The litellm proxy without a database answers a key it does not know with HTTP 400 "No
    connected db." on /v1/models too: that is a key problem, not "no listing"."""
    fake.models_reply = proxy_error("No connected db.", "no_db_connection")
    assert run_cli("run", cli_args(fake, store, extra=LIMIT)) == 2
    err = _err_lines(capsys)
    assert len(err) == 1, err
    assert "rejected the API key" in err[0] and "No connected db." in err[0]
    assert fake.url in err[0]
    assert sum(fake.calls.values()) == 0


@pytest.mark.parametrize("reply, says, sentence", [
    (proxy_unknown_model("gen"), "does not serve this model",
     "Invalid model name passed in model=gen"),
    (proxy_error("No connected db.", "no_db_connection"), "rejected the credentials",
     "No connected db."),
    (proxy_error("Authentication Error, Invalid proxy server token passed.", "auth_error"),
     "rejected the credentials", "Invalid proxy server token passed"),
    (Reply(status=403, content="this key may not use that model"), "rejected the credentials",
     "this key may not use that model"),
], ids=["invalid-model-name", "no-connected-db", "authentication-error", "403"])
def test_an_answer_that_the_key_or_model_is_wrong_stops_the_run_with_one_line(
        fake, store, capsys, reply, says, sentence):
    """Listed, but each chat request is answered so (a gateway routing the name elsewhere, a
    key it takes for listing only): no row is stored as `refused`, the run stops with one
    line naming the model, the endpoint and the server's own sentence."""
    fake.responders["gen"] = lambda request: reply
    assert run_cli("run", cli_args(fake, store, extra=LIMIT)) == 2
    err = _err_lines(capsys)
    last = err[-1]
    assert last.startswith("proactflow: error: openai/gen: ") and says in last
    assert fake.url.removeprefix("http://").replace("localhost", "127.0.0.1") in last
    assert sentence in last
    assert fake.calls["gen"] <= CALLS  # the first wave at most, none retried
    assert not any("refused" in line for line in err)


def test_a_refused_request_stays_refused_and_the_last_line_names_the_servers_cause(
        fake, store, capsys):
    fake.responders["gen"] = lambda request: Reply(
        status=400, content="'temperature' is not supported with this model.")
    assert run_cli("run", cli_args(fake, store, extra=LIMIT)) == 1
    last = _err_lines(capsys)[-1]
    assert f"{CALLS} refused by the server" in last
    assert "'temperature' is not supported with this model." in last
    assert "too long for its context" not in last
    assert fake.calls["gen"] == CALLS


def test_the_last_line_of_a_run_whose_calls_failed_names_the_endpoint_and_the_cause(
        fake, store, capsys):
    """Issue #36 item 7: the cause was only in the rows."""
    fake.responders["gen"] = lambda request: Reply(status=503, content="upstream connect error")
    assert run_cli("run", cli_args(fake, store, extra=(*LIMIT, "--max-attempts", "1"))) == 1
    last = _err_lines(capsys)[-1]
    assert f"{CALLS} because calls failed ({CALLS} generation: openai/gen at " in last
    assert fake.url in last and "upstream connect error" in last
    assert "a re-run retries only those" in last
