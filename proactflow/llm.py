"""The edge to LLM providers: litellm calls with one retry policy, a rate limit, a circuit
breaker and the per-call cache.

Retries live here and nowhere else: litellm and the OpenAI client are told not to retry
(`max_retries=0`), and this module retries only what can succeed on a second try (429, 5xx,
timeouts, connection errors), with exponential backoff, full jitter and `Retry-After`. A 401/403
or an unknown model stops the run at once; any other 4xx fails that one call.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import time
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Awaitable, Callable, Iterable, Sequence, TypeVar

from .cache.calls import CallCache
from .cache.keys import content_key
from .errors import EndpointDown, ProviderRejected
from .ratelimit import SharedPacer
from .settings import ModelRole, RuntimeOptions

import litellm

litellm.suppress_debug_info = True
litellm.telemetry = False

T = TypeVar("T")

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD)", re.IGNORECASE)


def secret_values() -> list[str]:
    """Values of environment variables that look like credentials."""
    return [value for name, value in os.environ.items()
            if _SECRET_NAME.search(name) and len(value) >= 8]


def redact(text: str) -> str:
    """Remove every credential value from a message before it is logged or stored."""
    for value in secret_values():
        text = text.replace(value, "***")
    return text


def api_key_for(role: ModelRole) -> str | None:
    """The key for a role, read from the environment at call time and never stored."""
    if role.api_key_env:
        return os.environ.get(role.api_key_env)
    if role.api_base and role.model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
        # Local OpenAI-compatible servers (vLLM, Ollama) need no key, but the client insists on one.
        return "no-key-needed"
    return None


@dataclass(frozen=True)
class ChatRequest:
    """One call exactly as sent: its key identifies it in the per-call cache."""

    model: str
    api_base: str | None
    messages: tuple[tuple[str, str], ...]
    params: tuple[tuple[str, Any], ...]
    sample_index: int = 0

    @classmethod
    def build(cls, role: ModelRole, messages: Iterable[tuple[str, str]], *, sample_index: int = 0,
              extra: dict[str, Any] | None = None) -> "ChatRequest":
        gen = role.generation
        params: dict[str, Any] = {"max_tokens": gen.max_tokens}
        if gen.temperature is not None:
            params["temperature"] = gen.temperature
        if gen.top_p is not None:
            params["top_p"] = gen.top_p
        if gen.reasoning_effort is not None:
            params["reasoning_effort"] = gen.reasoning_effort
        params.update(extra or {})
        return cls(role.model, role.endpoint, tuple(messages), tuple(sorted(params.items())),
                   sample_index)

    @property
    def estimated_prompt_tokens(self) -> int:
        """A provider-neutral estimate: about four characters per token (errs high)."""
        return sum(len(content) for _, content in self.messages) // 4

    @cached_property
    def key(self) -> str:
        return content_key({"model": self.model, "api_base": self.api_base,
                            "messages": [list(m) for m in self.messages],
                            "params": dict(self.params), "sample_index": self.sample_index})


@dataclass
class ChatOutcome:
    """The result of one logical call: success (content) or failure (error), never both."""

    request_key: str
    content: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    attempts: int = 0
    from_cache: bool = False
    error: str | None = None
    parsed: Any = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class CallStats:
    """Counters of one client, for the run record and the closing summary."""

    calls: int = 0
    http_attempts: int = 0
    cache_hits: int = 0
    failures: int = 0
    invalid_replies: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class _AttemptFailed(Exception):
    def __init__(self, message: str, *, retryable: bool, retry_after: float | None = None):
        super().__init__(message)
        self.retryable = retryable
        self.retry_after = retry_after


def _retry_after(exc: BaseException) -> float | None:
    headers = getattr(exc, "litellm_response_headers", None) or getattr(exc, "headers", None)
    if not headers:
        response = getattr(exc, "response", None)
        headers = getattr(response, "headers", None)
    if not headers:
        return None
    value = headers.get("retry-after") or headers.get("Retry-After")
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None


def _describe(exc: BaseException, status: int | None) -> str:
    """A short message: litellm nests provider names and class names several times over."""
    text = (str(exc).strip().splitlines() or [""])[0]
    text = text.rsplit("Exception - ", 1)[-1]
    text = re.sub(r"^(litellm\.)?\w+(Error|Timeout): ", "", text)
    kind = type(exc).__name__
    return (f"HTTP {status} {kind}: {text}" if status else f"{kind}: {text}")[:300]


def _classify(exc: BaseException, role: ModelRole) -> _AttemptFailed:
    """Map a provider exception to retryable / fatal-for-call / fatal-for-run."""
    status = getattr(exc, "status_code", None)
    message = redact(_describe(exc, status))
    if isinstance(exc, (litellm.AuthenticationError, litellm.PermissionDeniedError)) \
            or status in (401, 403):
        raise ProviderRejected(f"{role.model}: the provider rejected the credentials ({message})")
    if isinstance(exc, litellm.NotFoundError) or status == 404:
        raise ProviderRejected(f"{role.model}: model or endpoint not found ({message})")
    retryable_types = (litellm.RateLimitError, litellm.InternalServerError,
                       litellm.ServiceUnavailableError, litellm.Timeout,
                       litellm.APIConnectionError, litellm.BadGatewayError,
                       asyncio.TimeoutError, ConnectionError)
    retryable = isinstance(exc, retryable_types) or (status is not None and status >= 500) \
        or status in (408, 409, 429)
    if isinstance(exc, (litellm.BadRequestError, litellm.UnprocessableEntityError)) \
            and status is not None and status < 500:
        retryable = False
    return _AttemptFailed(message, retryable=retryable, retry_after=_retry_after(exc))


class ChatClient:
    """Makes the calls of one role, through the per-call cache, with retries and a breaker."""

    def __init__(self, role: ModelRole, cache: CallCache, runtime: RuntimeOptions,
                 completion: Callable[..., Awaitable[Any]] | None = None,
                 request_pacer: SharedPacer | None = None,
                 token_pacer: SharedPacer | None = None):
        self.role = role
        self.cache = cache
        self.runtime = runtime
        self.stats = CallStats()
        self._completion = completion or litellm.acompletion
        self._request_pacer = request_pacer
        self._token_pacer = token_pacer
        self._consecutive_failures = 0
        self._down: EndpointDown | None = None
        self._lease_ttl = runtime.timeout_s + 60

    def cached(self, request: ChatRequest) -> bool:
        return request.key in self.cache

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
        if request.api_base:
            kwargs["api_base"] = request.api_base
        key = api_key_for(self.role)
        if key:
            kwargs["api_key"] = key
        started = time.monotonic()
        self.stats.http_attempts += 1
        response = await self._completion(
            model=request.model,
            messages=[{"role": role, "content": content} for role, content in request.messages],
            timeout=self.runtime.timeout_s,
            max_retries=0,
            **kwargs,
        )
        if self._token_pacer is not None:
            usage = getattr(response, "usage", None)
            used = getattr(usage, "total_tokens", None) or 0
            self._token_pacer.settle(used - estimate)
        return response, time.monotonic() - started

    def _backoff(self, attempt: int, retry_after: float | None) -> float:
        ceiling = min(self.runtime.retry_max_delay_s,
                      self.runtime.retry_base_delay_s * (2 ** (attempt - 1)))
        delay = random.uniform(0, ceiling)
        return max(delay, retry_after) if retry_after is not None else delay

    def _note_failure(self, message: str) -> None:
        self._consecutive_failures += 1
        if self._down is None and \
                self._consecutive_failures >= self.runtime.max_consecutive_failures:
            self._down = EndpointDown(
                f"{self.role.model}{' at ' + self.role.endpoint if self.role.endpoint else ''}: "
                f"{self._consecutive_failures} failed attempts in a row, none succeeded "
                f"(last: {message}); stopping. Finished calls are cached: re-run to continue.")

    async def _call_once(self, request: ChatRequest) -> ChatOutcome:
        """One logical call with HTTP retries; no parsing."""
        attempt = 0
        while True:
            if self._down is not None:
                raise self._down
            attempt += 1
            if attempt > 1:  # the claim itself set the first lease period
                self.cache.renew(request.key, self._lease_ttl)
            try:
                response, latency = await self._attempt(request)
            except (ProviderRejected, asyncio.CancelledError):
                raise
            except Exception as exc:  # provider errors arrive as many types; _classify sorts them
                failure = _classify(exc, self.role)
                self._note_failure(str(failure))
                if not failure.retryable or attempt >= self.runtime.max_attempts:
                    return ChatOutcome(request.key, attempts=attempt, error=str(failure))
                await asyncio.sleep(self._backoff(attempt, failure.retry_after))
                continue
            self._consecutive_failures = 0
            choice = response.choices[0]
            usage = getattr(response, "usage", None)
            return ChatOutcome(
                request.key,
                content=choice.message.content or "",
                finish_reason=choice.finish_reason,
                prompt_tokens=getattr(usage, "prompt_tokens", None),
                completion_tokens=getattr(usage, "completion_tokens", None),
                latency_s=round(latency, 4),
                attempts=attempt,
            )

    async def call(self, request: ChatRequest,
                   accept: Callable[[str], T] | None = None) -> ChatOutcome:
        """Answer `request` from the cache or the provider.

        `accept` parses a reply and raises ValueError when it is unusable: the call is then made
        again (up to `judge_parse_attempts` times) and an unusable reply is never cached.
        """
        self.stats.calls += 1
        while True:
            hit = self.cache.get(request.key)
            if hit is not None:
                outcome = ChatOutcome(request.key, from_cache=True, **hit)
                try:
                    if accept is not None:
                        outcome.parsed = accept(outcome.content or "")
                except ValueError:
                    pass  # cached before a stricter parser: ask again
                else:
                    self.stats.cache_hits += 1
                    return outcome
            if self.cache.claim(request.key, self._lease_ttl):
                break
            # Another run (or another trigger with the same request) is making this call.
            await asyncio.sleep(0.2)
        try:
            return await self._call_uncached(request, accept)
        finally:
            self.cache.release(request.key)

    async def _call_uncached(self, request: ChatRequest,
                             accept: Callable[[str], T] | None) -> ChatOutcome:
        tries = self.runtime.judge_parse_attempts if accept is not None else 1
        attempts = 0
        for _ in range(tries):
            outcome = await self._call_once(request)
            attempts += outcome.attempts
            outcome.attempts = attempts
            if not outcome.ok:
                self.stats.failures += 1
                return outcome
            self.stats.prompt_tokens += outcome.prompt_tokens or 0
            self.stats.completion_tokens += outcome.completion_tokens or 0
            if accept is not None:
                try:
                    outcome.parsed = accept(outcome.content or "")
                except ValueError as exc:
                    self.stats.invalid_replies += 1
                    last_error = f"invalid judge reply: {str(exc).splitlines()[0][:300]}"
                    continue
            self.cache.put(request.key, {
                "content": outcome.content, "finish_reason": outcome.finish_reason,
                "prompt_tokens": outcome.prompt_tokens,
                "completion_tokens": outcome.completion_tokens,
                "latency_s": outcome.latency_s, "attempts": outcome.attempts,
            })
            return outcome
        self.stats.failures += 1
        return ChatOutcome(request.key, attempts=attempts, error=last_error)


def estimated_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Dollars for these tokens from litellm's bundled price map; None when the model is not in
    it (local and custom models)."""
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    except Exception:  # litellm raises several types for models it has no price for
        return None
    return prompt_cost + completion_cost


async def run_pool(take: Callable[[], Awaitable[Any]], worker: Callable[[Any], Awaitable[T]],
                   concurrency: int, on_result: Callable[[T], None] | None = None) -> list[T]:
    """Apply `worker` to items from `take()` (None ends) with `concurrency` workers.

    A fixed pool of worker tasks pulls items, so 624 triggers never become 624 pending tasks.
    Results come in completion order. If a worker raises, the others are cancelled and the error
    propagates.
    """
    results: list[T] = []

    async def drain() -> None:
        while (item := await take()) is not None:
            result = await worker(item)
            results.append(result)
            if on_result is not None:
                on_result(result)

    workers = [asyncio.create_task(drain()) for _ in range(max(1, concurrency))]
    try:
        await asyncio.gather(*workers)
    except BaseException:
        for task in workers:
            task.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        raise
    return results


async def run_bounded(items: Sequence[Any], worker: Callable[[Any], Awaitable[T]],
                      concurrency: int,
                      on_result: Callable[[T], None] | None = None) -> list[T]:
    """`run_pool` over a list, with no more workers than items."""
    pending = iter(items)

    async def take() -> Any:
        return next(pending, None)

    return await run_pool(take, worker, min(concurrency, max(1, len(items))), on_result)
