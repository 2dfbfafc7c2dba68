"""The HTTP-attempt layer of ChatClient (llm.py): one logical call sent with its retries, paced
by the shared rate limits and the limit on calls in flight, watched by the circuit breaker, and
the provider's response or refusal turned into a ChatOutcome. No cache, no parsing.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import random
import time
from importlib import metadata
from typing import Any, Awaitable, Callable

from . import litellm_costs
from .billing import cache_tokens_of
from . import structured_output as formats
from .call_health import Breaker, CallStats, paying
from .chat import ChatOutcome, ChatRequest, api_key_for, context_cut_message, reply_status
from .content import wire_content
from .prompt_cache import with_hints
from .provider_errors import AttemptFailed, classify
from ..common.errors import EndpointDown, ProviderRejected
from ..config.endpoints import split_credentials
from ..config.settings import ModelRole, RuntimeOptions
from ..limits.ratelimit import InFlightLimit, Pacer

LITELLM_VERSION = metadata.version("litellm")


class HttpAttempts:
    """ChatClient's HTTP attempts; the attributes are set by ChatClient's constructor."""

    role: ModelRole
    runtime: RuntimeOptions
    stats: CallStats
    in_flight: InFlightLimit
    _completion: Callable[..., Awaitable[Any]]
    _batched: Callable[..., Awaitable[Any]] | None
    _request_pacer: Pacer | None
    _token_pacer: Pacer | None
    _breaker: Breaker
    _down: EndpointDown | None
    _timeout: float

    def _asked_wait(self, failure: AttemptFailed) -> float | None:
        """The wait the provider asked for, held to the backoff ceiling: a reset minutes away
        (or a date read wrong) does not stall the run; a 429 after it is waited out again."""
        if failure.retry_after is None:
            return None
        return min(failure.retry_after, self.runtime.retry_max_delay_s)

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        ceiling = min(self.runtime.retry_max_delay_s,
                      self.runtime.retry_base_delay_s * (2 ** (attempt - 1)))
        delay = random.uniform(0, ceiling)
        return max(delay, retry_after) if retry_after is not None else delay

    def _estimated_tokens(self, request: ChatRequest) -> float:
        prompt = request.estimated_prompt_tokens
        answered = self.stats.completion_tokens / max(1, self.stats.calls - self.stats.cache_hits)
        expected = answered if self.stats.completion_tokens else 512
        return prompt + min(expected, dict(request.params).get("max_tokens", expected))

    async def _attempt(self, request: ChatRequest) -> tuple[Any, float]:
        if self._request_pacer is not None:
            await self._request_pacer.acquire()
        estimate = 0.0
        if self._token_pacer is not None:
            estimate = self._estimated_tokens(request)
            await self._token_pacer.acquire(estimate)
        kwargs: dict[str, Any] = dict(request.params)
        if self.role.api_base:
            # User info in the URL goes as a header of its own, which replaces the key's
            # bearer token (one Authorization header; docs/running.md).
            kwargs["api_base"], basic = split_credentials(self.role.api_base)
            if basic:
                kwargs["extra_headers"] = {"Authorization": basic}
        key = api_key_for(self.role)
        if key:
            kwargs["api_key"] = key
        started = time.monotonic()
        self.stats.http_attempts += 1
        completion = self._completion if self._batched is None else \
            functools.partial(self._batched, request.key)
        # A batched call is not waited for when the database is lost: its batch stays recorded
        # and its answer at the provider, for the next run to read.
        messages, hints = with_hints(
            request.model, self.role.api_base,
            [{"role": role, "content": wire_content(content)} for role, content in request.messages],
            list(request.messages), request.cache, self.runtime.prompt_cache)
        with litellm_costs.priced_per_stage(), \
                paying() if self._batched is None else contextlib.nullcontext():
            response = await completion(
                model=request.model, messages=messages,
                timeout=self._timeout, max_retries=0, **kwargs, **hints)
        usage = getattr(response, "usage", None)
        self.stats.paid_prompt_tokens += getattr(usage, "prompt_tokens", None) or 0
        self.stats.paid_completion_tokens += getattr(usage, "completion_tokens", None) or 0
        self.stats.count_cache(*cache_tokens_of(usage))
        if self._token_pacer is not None:
            await self._token_pacer.settle((getattr(usage, "total_tokens", None) or 0) - estimate)
        return response, time.monotonic() - started

    def _declare_down(self, message: str) -> EndpointDown:
        where = f" at {self.role.endpoint}" if self.role.endpoint else ""
        self._down = EndpointDown(
            f"{self.role.model}{where}: no call succeeded for "
            f"{self.runtime.down_after_s:g} s, {self._breaker.failures} failed attempts in a row "
            f"(last: {message}); stopping. Finished calls are cached: re-run to continue.")
        return self._down

    async def _call_once(self, request: ChatRequest) -> ChatOutcome:
        """One logical call with HTTP retries; no parsing."""
        attempt = failures = rate_limited = 0
        while True:
            if self._down is not None:
                raise self._down
            attempt += 1
            started = await self.in_flight.acquire()
            failure: AttemptFailed | None = None
            try:
                response, latency = await self._attempt(request)
            except (ProviderRejected, asyncio.CancelledError):
                self.in_flight.release(started)
                raise
            except Exception as exc:  # provider errors arrive as many types; classify sorts them
                try:
                    failure = classify(exc, self.role.model, request.api_base)
                finally:
                    self.in_flight.release(started, rate_limited=failure is not None
                                           and failure.rate_limited)
            else:
                self.in_flight.release(started)
            if failure is None:
                self._breaker.success()
                return self._outcome(request, response, latency, attempt)
            if failure.rate_limited:
                self.stats.rate_limited += 1
                rate_limited += 1
                asked = self._asked_wait(failure)
                if asked and self._request_pacer is not None:
                    await self._request_pacer.defer(asked)
                if rate_limited >= self.runtime.rate_limited_attempts:
                    return ChatOutcome(request.key, status="error", attempts=attempt,
                                       error=f"still rate limited after {rate_limited} tries: "
                                             f"{failure}")
                await asyncio.sleep(self._backoff(rate_limited, asked))
                continue
            if failure.refusal is not None:  # the server answered: it is up
                self._breaker.success()
                return self._refusal(request, failure, attempt)
            if self._breaker.failure():
                raise self._declare_down(str(failure))
            failures += 1
            if not failure.retryable or failures >= self.runtime.max_attempts:
                note = f" after {self._timeout:g} s, not retried: the provider may have " \
                       "billed it; a re-run asks again" if failure.timed_out else ""
                return ChatOutcome(request.key, status="error", attempts=attempt,
                                   error=f"{failure}{note}")
            await asyncio.sleep(self._backoff(failures, self._asked_wait(failure)))

    @staticmethod
    def _refusal(request: ChatRequest, failure: AttemptFailed, attempt: int) -> ChatOutcome:
        kind = failure.refusal
        if kind == "context_full":
            return ChatOutcome(request.key, status="truncated", attempts=attempt,
                               refusal=kind, finish_reason="length",
                               error=context_cut_message(None, None, f"the server: {failure}"),
                               litellm_version=LITELLM_VERSION)
        if kind == "response_format" and formats.format_of(request) == "none":
            kind = "invalid"
        remedy = {"context": "the prompt does not fit the model's context: a larger context "
                             "or another model, then --refresh",
                  "response_format": "--judge-response-format json_object or none",
                  "invalid": "change the request (another model or setting) or --refresh"}
        return ChatOutcome(request.key, status="refused", attempts=attempt, refusal=kind,
                           error=f"refused by the server: {failure} ({remedy[kind or 'invalid']})",
                           litellm_version=LITELLM_VERSION)

    @staticmethod
    def _outcome(request: ChatRequest, response: Any, latency: float,
                 attempt: int) -> ChatOutcome:
        choice = response.choices[0]
        message = choice.message
        usage = getattr(response, "usage", None)
        cache_read, cache_write = cache_tokens_of(usage)
        status, why = reply_status(message.content, choice.finish_reason,
                                   getattr(message, "refusal", None),
                                   max_tokens=dict(request.params).get("max_tokens"),
                                   prompt_tokens=getattr(usage, "prompt_tokens", None),
                                   completion_tokens=getattr(usage, "completion_tokens", None))
        return ChatOutcome(
            request.key, status=status, content=message.content, error=why,
            finish_reason=choice.finish_reason,
            prompt_tokens=getattr(usage, "prompt_tokens", None),
            completion_tokens=getattr(usage, "completion_tokens", None),
            cache_read_tokens=cache_read, cache_write_tokens=cache_write,
            latency_s=round(latency, 4), attempts=attempt,
            served_model=getattr(response, "model", None),
            system_fingerprint=getattr(response, "system_fingerprint", None),
            litellm_version=LITELLM_VERSION)
