"""How a provider's failure is read (providers/provider_errors.py), on exceptions raised by the
real client stack (litellm over its default HTTP transport), not constructed by hand."""

from __future__ import annotations

import asyncio
import email.utils
import time

import litellm
import pytest

from fake_openai import FakeOpenAI, Reply
from proactflow.common.errors import ProviderRejected
from proactflow.config.settings import RuntimeOptions
from proactflow.providers.http_attempts import HttpAttempts
from proactflow.providers.provider_errors import classify, client_side_failure


def _raised(**kwargs) -> BaseException:
    async def call() -> BaseException:
        try:
            await litellm.acompletion(model="openai/m", messages=[{"role": "user",
                                                                   "content": "hi"}],
                                      api_key="k", max_retries=0, timeout=5, **kwargs)
        except Exception as exc:  # noqa: BLE001 - the exception is what is tested
            return exc
        raise AssertionError("the call succeeded")
    return asyncio.run(call())


def test_a_request_the_http_client_refuses_to_send_stops_with_one_line_not_retried():
    """User info in the URL beside a key: aiohttp refuses to build the request (litellm calls it
    an HTTP 500). No server saw it and another attempt fails the same way: the run stops with one
    line instead of retrying it as a server error (issue #31 item 5). The password is not in it."""
    exc = _raised(api_base="http://alice:s3cret@127.0.0.1:9/v1")
    assert getattr(exc, "status_code", None) == 500  # what litellm says it was
    assert client_side_failure(exc) is not None
    with pytest.raises(ProviderRejected) as raised:
        classify(exc, "openai/m", "http://127.0.0.1:9/v1")
    message = str(raised.value)
    assert "could not send the request" in message and "\n" not in message
    assert "s3cret" not in message


def test_a_refused_connection_is_not_a_client_side_failure():
    exc = _raised(api_base="http://127.0.0.1:9/v1")
    assert client_side_failure(exc) is None
    assert classify(exc, "openai/m", "http://127.0.0.1:9/v1").retryable


def _rate_limited_with(headers: dict[str, str]) -> BaseException:
    with FakeOpenAI({"m": lambda request: Reply(status=429, content="slow down",
                                                headers=headers)}) as fake:
        return _raised(api_base=fake.url)


@pytest.mark.parametrize("headers, seconds", [
    ({"Retry-After": "7"}, 7.0),
    ({"retry-after-ms": "1500"}, 1.5),
    ({"llm_provider-retry-after": "60"}, 60.0),  # the litellm proxy's own 429
    ({"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"}, 360.0),
    ({"x-ratelimit-reset-requests": "20ms", "x-ratelimit-remaining-requests": "0",
      "x-ratelimit-reset-tokens": "6m0s", "x-ratelimit-remaining-tokens": "5000"}, 0.02),
    ({"llm_provider-x-ratelimit-reset-tokens": "1m30.5s"}, 90.5),
    ({"retry-after-ms": "250", "Retry-After": "9"}, 0.25),  # the finer one wins, as OpenAI's
], ids=["retry-after", "retry-after-ms", "gateway", "resets-longest", "reset-exhausted",
        "gateway-reset", "ms-first"])
def test_the_wait_a_provider_asks_for_is_read_in_each_form_gateways_send(headers, seconds):
    failure = classify(_rate_limited_with(headers), "openai/m", None)
    assert failure.rate_limited
    assert failure.retry_after == pytest.approx(seconds)


def test_a_retry_after_given_as_an_http_date_is_read():
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    failure = classify(_rate_limited_with({"Retry-After": when}), "openai/m", None)
    assert failure.retry_after is not None and 20 < failure.retry_after <= 31


def test_no_wait_is_read_from_a_429_without_one_or_with_a_malformed_one():
    for headers in ({}, {"Retry-After": "soon"}, {"x-ratelimit-reset-tokens": "6 moons"}):
        assert classify(_rate_limited_with(headers), "openai/m", None).retry_after is None


def test_the_wait_asked_is_held_to_the_backoff_ceiling():
    """A reset minutes away (or an HTTP date read wrong) does not stall the run: the wait is
    held to the backoff ceiling, and a 429 after it is waited out again."""
    attempts = HttpAttempts()
    attempts.runtime = RuntimeOptions(retry_max_delay_s=60.0)
    asked = classify(_rate_limited_with({"x-ratelimit-reset-tokens": "6m0s"}), "openai/m", None)
    assert attempts._asked_wait(asked) == 60.0
    short = classify(_rate_limited_with({"retry-after-ms": "20"}), "openai/m", None)
    assert attempts._asked_wait(short) == pytest.approx(0.02)
