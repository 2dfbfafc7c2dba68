"""How a provider's failure is read (providers/provider_errors.py), on exceptions raised by the
real client stack (litellm over its default HTTP transport), not constructed by hand."""

from __future__ import annotations

import asyncio

import litellm
import pytest

from proactflow.common.errors import ProviderRejected
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
