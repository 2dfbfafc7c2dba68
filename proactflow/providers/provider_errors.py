"""What a provider's failure means for the run: retry it, retry it after waiting as asked (rate
limited), take it as the server's refusal of the request (HTTP 400, 413, 422: a refused request is
refused again, so it is an outcome, not a failure), or stop the run (bad key, unknown model,
exhausted quota).

Some refusals are recognised by their message whatever their status: a server that does not take
the `response_format` sent (llama-cpp-python answers HTTP 500 to `json_schema`), and a reply that
filled the model's context (llama.cpp's HTTP 500 "failed to find a memory slot").

litellm turns every provider's errors into its own exception types, nests the provider's text
inside several prefixes and wraps the transport's error (httpx, aiohttp, OSError) in a generic
"Connection error": this module reads through all of that once.
"""

from __future__ import annotations

import asyncio
import datetime
import email.utils
import re
import time
from typing import Any, Literal

import litellm

from ..common.errors import ProviderRejected
from ..common.redaction import redact


RefusalKind = Literal["invalid", "context", "response_format", "context_full"]
"""invalid: the request as sent (HTTP 400, 413, 422); context: its prompt does not fit the model's
context; response_format: the structured output asked for; context_full: the reply filled the
context while being written (no reply came back)."""

_FORMAT_REFUSED = re.compile(
    r"response_format|json_schema|'text' or 'json_object'|structured output", re.IGNORECASE)
_CONTEXT_EXCEEDED = re.compile(
    r"context length|context_length|context window|maximum context|exceeds? (the )?context"
    r"|too many tokens|prompt is too long|n_ctx", re.IGNORECASE)
KEY_REJECTED = re.compile(
    r"authentication error|no connected db|invalid api key|incorrect api key|invalid proxy "
    r"server token|api key (is )?(invalid|not valid|expired)|unauthori[sz]ed", re.IGNORECASE)
"""What a gateway answering HTTP 400 (the litellm proxy: "No connected db.", "Authentication
Error, ...") says about a key it does not take."""
MODEL_UNKNOWN = re.compile(
    r"invalid model name|model[ `'\"=]+\S+[`'\"]? (does not exist|not found)|no such model"
    r"|unknown model|model not found", re.IGNORECASE)
"""What a server or gateway says (HTTP 400 or 404) about a model it does not serve."""
_CONTEXT_FULL = re.compile(r"failed to find a memory slot|kv cache is full|context shift is "
                           r"disabled", re.IGNORECASE)


class AttemptFailed(Exception):
    """One HTTP attempt failed; how the call should go on."""

    def __init__(self, message: str, *, retryable: bool, rate_limited: bool = False,
                 timed_out: bool = False, retry_after: float | None = None,
                 refusal: RefusalKind | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.rate_limited = rate_limited
        self.timed_out = timed_out
        self.retry_after = retry_after
        self.refusal = refusal
        """Why the server refused the request as sent, when it did: it would refuse it again."""


_GATEWAY_PREFIX = "llm_provider-"
"""The litellm proxy passes its provider's headers on under this prefix (a 429 of its own
carries `llm_provider-retry-after` and no `Retry-After`)."""
_DURATION = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNIT_SECONDS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}


def _header(headers: Any, name: str) -> str | None:
    for spelling in (name, _GATEWAY_PREFIX + name):
        value = headers.get(spelling)
        if value is None and hasattr(headers, "items"):
            value = next((v for k, v in headers.items() if str(k).lower() == spelling), None)
        if value is not None and str(value).strip():
            return str(value).strip()
    return None


def _seconds(value: str) -> float | None:
    """A number of seconds, or a duration as OpenAI's x-ratelimit-reset-* give it ("1s",
    "6m0s", "20ms", "1h2m3.5s")."""
    try:
        return float(value)
    except ValueError:
        pass
    parts = _DURATION.findall(value)
    if not parts or "".join(number + unit for number, unit in parts) != value.replace(" ", ""):
        return None
    return sum(float(number) * _UNIT_SECONDS[unit] for number, unit in parts)


def _http_date(value: str) -> float | None:
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.timestamp() - time.time()


def retry_after_of(exc: BaseException) -> float | None:
    """How long the provider asks to wait, in seconds, if it said: `retry-after-ms`,
    `retry-after` (seconds or an HTTP date), then the reset of the exhausted limit among
    `x-ratelimit-reset-requests` and `-tokens` (the longest when none says it is exhausted);
    each also as a gateway passes it on (`llm_provider-...`). Uncapped: the caller holds the
    wait to its backoff ceiling."""
    headers = getattr(exc, "litellm_response_headers", None) or getattr(exc, "headers", None)
    if not headers:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    found: float | None = None
    if (value := _header(headers, "retry-after-ms")) is not None:
        found = _seconds(value)
        found = found / 1000 if found is not None else None
    if found is None and (value := _header(headers, "retry-after")) is not None:
        found = _seconds(value)
        if found is None:
            found = _http_date(value)
    if found is None:
        resets = {}
        for limit in ("requests", "tokens"):
            value = _header(headers, f"x-ratelimit-reset-{limit}")
            seconds = _seconds(value) if value is not None else None
            if seconds is not None:
                resets[limit] = seconds
        exhausted = [seconds for limit, seconds in resets.items()
                     if _header(headers, f"x-ratelimit-remaining-{limit}") == "0"]
        found = max(exhausted or resets.values(), default=None)
    return max(0.0, found) if found is not None else None


def _chain(exc: BaseException):
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def connection_failure(exc: BaseException, endpoint: str | None) -> str | None:
    """'connection refused by <endpoint>' and the like, read from the transport error litellm
    wrapped; None when the failure is not about reaching the endpoint."""
    where = endpoint or "the provider"
    for link in _chain(exc):
        text = f"{type(link).__name__}: {link}".lower()
        if isinstance(link, ConnectionRefusedError) or "connection refused" in text \
                or "connect call failed" in text or "errno 111" in text:
            return f"connection refused by {where} (is the server running?)"
        if "name or service not known" in text or "nodename nor servname" in text \
                or "temporary failure in name resolution" in text or "getaddrinfo" in text:
            return f"cannot resolve the host of {where}"
        if "network is unreachable" in text or "no route to host" in text:
            return f"no network route to {where}"
    return None


_HTTP_CLIENTS = ("/aiohttp/", "/httpx/", "/httpcore/", "/h11/")


def client_side_failure(exc: BaseException) -> str | None:
    """What the HTTP client itself refused to send, when it did: a ValueError or TypeError
    raised inside the client library (aiohttp, httpx) while it built the request, such as a URL
    it cannot take. litellm reports it as an HTTP 500, but no server ever saw the request and
    asking again fails the same way."""
    for link in _chain(exc):
        if type(link) not in (ValueError, TypeError):  # not JSONDecodeError, UnicodeError...
            continue
        frame = link.__traceback__
        while frame is not None and frame.tb_next is not None:
            frame = frame.tb_next
        if frame is not None and any(part in frame.tb_frame.f_code.co_filename
                                     for part in _HTTP_CLIENTS):
            return f"{type(link).__name__}: {link}"
    return None


_PYDANTIC_ERROR = re.compile(r"'loc': \((?P<loc>[^)]*)\), 'msg': (?P<q>[\"'])(?P<msg>.*?)(?P=q)")
_HEADER = re.compile(r"^\d+ validation errors?\b|:$|^(error|traceback)\b", re.IGNORECASE)


def body_message(exc: BaseException) -> str | None:
    """The message of the error body the server sent, as the HTTP client kept it (`body`:
    OpenAI's `{"error": {"message"}}`, FastAPI's `{"detail"}`), on one line; None without one."""
    for link in _chain(exc):
        body = getattr(link, "body", None)
        if isinstance(body, dict):
            found = body.get("error", body.get("detail", body.get("message")))
            if isinstance(found, dict):
                found = found.get("message", found.get("error"))
            if isinstance(found, str) and found.strip():
                return " ".join(found.split())[:300]
    return None


def describe(exc: BaseException, status: int | None) -> str:
    """A short message: litellm nests provider names and class names several times over, and
    some servers start theirs with a header ("1 validation error:"): the lines that say what is
    wrong are kept, on one line."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()] or [""]
    text = lines[0].rsplit("Exception - ", 1)[-1]
    text = re.sub(r"^(litellm\.)?\w+(Error|Timeout): ", "", text)
    if _HEADER.search(text) or len(text) < 40:
        text = " ".join([text, *lines[1:4]])
    said = body_message(exc)
    if said and said not in text:  # "Error code: 500" alone: the server's words are in its body
        text = f"{text}: {said}" if text else said
    validation = _PYDANTIC_ERROR.search(text)
    if validation:  # FastAPI's validation error as a dict: its location and what it says
        where = ".".join(part.strip(" '\"") for part in validation["loc"].split(",")
                         if part.strip(" '\"") not in ("", "body"))
        text = f"{where}: {validation['msg']}"
    kind = type(exc).__name__
    return (f"HTTP {status} {kind}: {text}" if status else f"{kind}: {text}")[:300]


_QUOTA = re.compile(r"insufficient_quota|exceeded your current quota|billing", re.IGNORECASE)


def classify(exc: BaseException, model: str, endpoint: str | None) -> AttemptFailed:
    """Sort a provider exception into retryable, rate limited, fatal for the call or (raised)
    fatal for the run."""
    status = getattr(exc, "status_code", None)
    refused = connection_failure(exc, endpoint)
    message = redact(refused or describe(exc, status))
    at = f" at {endpoint}" if endpoint else ""
    text = str(exc)
    if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError)) \
            or status in (401, 403) or (status == 400 and KEY_REJECTED.search(text)):
        raise ProviderRejected(f"{model}: the provider rejected the credentials{at} "
                               f"({message})")
    if status == 400 and MODEL_UNKNOWN.search(text):  # a gateway's answer for an unknown name
        raise ProviderRejected(f"{model}: the endpoint{at} does not serve this model "
                               f"({message})")
    client_side = client_side_failure(exc)
    if client_side is not None:
        raise ProviderRejected(f"{model}: the HTTP client could not send the request, so no "
                               f"server saw it ({redact(client_side)[:200]})")
    if isinstance(exc, litellm.NotFoundError) or status == 404:
        raise ProviderRejected(f"{model}: model or endpoint not found{at} ({message})")
    if isinstance(exc, litellm.RateLimitError) or status == 429:
        if _QUOTA.search(str(exc)):
            raise ProviderRejected(f"{model}: the provider's quota is exhausted{at} "
                                   f"({message})")
        return AttemptFailed(message, retryable=True, rate_limited=True,
                             retry_after=retry_after_of(exc))
    if refused is None and isinstance(exc, (litellm.Timeout, asyncio.TimeoutError)):
        return AttemptFailed(message, retryable=False, timed_out=True)
    if refused is None:
        if _FORMAT_REFUSED.search(text) and (status is None or status in (400, 422, 500)):
            return AttemptFailed(message, retryable=False, refusal="response_format")
        if _CONTEXT_FULL.search(text):
            return AttemptFailed(message, retryable=False, refusal="context_full")
        if isinstance(exc, litellm.ContextWindowExceededError) \
                or (status in (400, 413, 422) and _CONTEXT_EXCEEDED.search(text)):
            return AttemptFailed(message, retryable=False, refusal="context")
        if status in (400, 413, 422) or isinstance(
                exc, (litellm.BadRequestError, litellm.UnprocessableEntityError)) \
                and (status is None or status < 500):
            return AttemptFailed(message, retryable=False, refusal="invalid")
    retryable_types = (litellm.InternalServerError, litellm.ServiceUnavailableError,
                       litellm.APIConnectionError, litellm.BadGatewayError, ConnectionError)
    retryable = refused is not None or isinstance(exc, retryable_types) \
        or (status is not None and status >= 500) or status in (408, 409)
    if isinstance(exc, (litellm.BadRequestError, litellm.UnprocessableEntityError)) \
            and status is not None and status < 500:
        retryable = False
    return AttemptFailed(message, retryable=retryable, retry_after=retry_after_of(exc))
