"""The edge to LLM providers: litellm calls through the per-call cache, with one retry policy,
shared rate limits, an adaptive limit on calls in flight and a circuit breaker.

Retries live here and nowhere else: litellm and the OpenAI client are told not to retry
(`max_retries=0`). A 429 is waited out (Retry-After, backoff, fewer calls in flight) and never
counts towards declaring the endpoint down; 5xx and connection errors are retried with
exponential backoff and full jitter; a timeout is not retried (the provider may have finished
and billed the call); a 401/403, an unknown model or an exhausted quota stops the run at once;
a request the server refuses as sent (400, 413, 422: too long for its context, a parameter it does
not take) is the call's outcome, status refused, cached like an answer: the same server would
refuse it again, so only --refresh or a changed key asks again. A refused `response_format` is
not a refusal of the call: the call is sent again with the next format the server may take
(structured_output.py).
The HTTP attempts themselves (retries, pacing, breaker, the response as an outcome) are
http_attempts.py's; this module owns the cache, the lease, parsing and format adaptation.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, TypeVar

import litellm

from ..cache.calls import CallCache, CallStore, as_call_store
from .chat import ChatOutcome, ChatRequest
from . import structured_output as formats
from .prompt_cache import CallOrder, Turn
from .litellm_costs import estimated_cost
from .attempts import keep_attempt, kept_attempts, stored_attempt
from .call_health import Breaker, CallStats, paying
from .http_attempts import LITELLM_VERSION, HttpAttempts
from ..common.errors import DatabaseLost, EndpointDown
from ..limits.leases import HeldLeases
from ..limits.ratelimit import AdaptiveLimit, InFlightLimit, Pacer
from ..config.settings import ModelRole, RuntimeOptions


T = TypeVar("T")
__all__ = ["ChatClient", "estimated_cost", "LITELLM_VERSION", "JUDGE_PARSE_ATTEMPTS",
           "INVALID_MODEL_REPLY"]
JUDGE_PARSE_ATTEMPTS = 4
"""Judge calls per request while its replies are unusable, unless the user or the suite's
protocol says otherwise."""
INVALID_MODEL_REPLY = "invalid model reply"
"""How an error of the model under test starts when none of its replies parsed."""


class ChatClient(HttpAttempts):
    """Makes the calls of one role through the per-call cache: a CallStore, or a local
    CallCache, which it wraps as one; its HTTP attempts are http_attempts.py's."""

    def __init__(self, role: ModelRole, cache: CallStore | CallCache, runtime: RuntimeOptions,
                 completion: Callable[..., Awaitable[Any]] | None = None,
                 request_pacer: Pacer | None = None,
                 token_pacer: Pacer | None = None, *, refresh: bool = False,
                 in_flight: InFlightLimit | None = None, reply_kind: str = "judge",
                 batched: Callable[..., Awaitable[Any]] | None = None):
        self.role = role
        self.cache = cache
        self.calls = as_call_store(cache)
        self.runtime = runtime
        self.refresh = refresh
        self.reply_kind = reply_kind
        """Whose replies `accept` parses: "judge", or "model" (the model under test)."""
        self.stats = CallStats()
        self.in_flight: InFlightLimit = in_flight or AdaptiveLimit(runtime.concurrency)
        """Waited on around each HTTP attempt: the model's limit shared by every client and
        process calling it (inflight.model_limit), or one of this client's own."""
        self._completion = completion or litellm.acompletion
        self._batched = batched
        """--batch: the completion, called with the request's key first (its line's id), that
        sends the call in a provider batch (proactflow.batches.transport)."""
        self._request_pacer = request_pacer
        self._token_pacer = token_pacer
        self._breaker = Breaker(runtime.down_after_s, runtime.max_consecutive_failures)
        self._down: EndpointDown | None = None
        self._timeout = runtime.call_timeout(role.generation.max_tokens)
        self._replace: set[str] = set()
        self._leases = HeldLeases(self.calls, runtime.lease_ttl_s)
        self._order = CallOrder()
        """Not in batches: there a call waits its batch out anyway."""

    async def cached(self, request: ChatRequest) -> bool:
        return await self.calls.get(request.key) is not None

    # The cache and the lease.

    def _hit(self, request: ChatRequest, record: dict[str, Any],
             accept: Callable[[str], T] | None) -> ChatOutcome | None:
        """A stored record as this call's outcome, or None when `accept` rejects it (a reply
        cached before a stricter parser: it is asked again, and replaced)."""
        outcome = ChatOutcome.from_record(request.key, record)
        if accept is not None and not outcome.final:
            try:
                if not outcome.ok:
                    raise ValueError(outcome.error)
                outcome.parsed = self._accepted(request, accept, outcome.content or "")
            except ValueError:
                self._replace.add(request.key)
                return None
        self.stats.cache_hits += 1
        return outcome

    async def call(self, request: ChatRequest,
                   accept: Callable[[str], T] | None = None) -> ChatOutcome:
        turn = self._order.enter(request.cache if self.runtime.prompt_cache == "auto"
                                 and self._batched is None else None)
        try:
            return await self._call(request, accept, turn)
        except DatabaseLost:
            # The run stops: first the calls still being answered finish, so that their
            # answers, paid for, are kept on this host (calls_postgres.py) for the next run.
            await paying().idle.wait()
            raise
        finally:
            turn.done()

    async def _call(self, request: ChatRequest, accept: Callable[[str], T] | None,
                    turn: Turn) -> ChatOutcome:
        """Answer `request` from the cache or the provider.

        `accept` parses a reply and raises ValueError when it is unusable: the call is then made
        again (up to `model_parse_attempts` or `judge_parse_attempts` times, as the request's
        RetryPlan says); an unusable reply is kept as an attempt (attempts.py), which later
        calls read instead of paying for it again. Two
        clients needing the same request (two runs on one store) make it once: the first claims
        it, looks in the cache again, calls; the other waits and uses the stored result. The
        look, the claim and the second look are one operation of the store, as are storing
        the result and giving the lease back: two round trips per call.
        """
        self.stats.calls += 1
        await turn.wait()  # prompt_cache.CallOrder; unclaimed, so no other run waits on it
        look = not self.refresh
        while True:
            record, claimed = await self.calls.look_or_claim(
                request.key, self.runtime.lease_ttl_s, look=look)
            if record is not None:
                if (hit := self._hit(request, record, accept)) is not None:
                    return hit
                look = False  # unusable: claim it, to ask again
                continue
            if claimed:
                break
            await asyncio.sleep(0.2)  # another client is making this call: wait for its result
            look = not self.refresh
        self._leases.hold(request.key)  # renewed for as long as it is held
        released = False
        try:
            outcome, released = await self._call_uncached(request, accept)
            return outcome
        finally:
            await self._leases.let_go(request.key, released=released)

    async def _store(self, request: ChatRequest, outcome: ChatOutcome,
                     accept: Callable[[str], T] | None) -> tuple[ChatOutcome, bool]:
        """Cache a finished call and give its lease back; when another run stored this request
        first, use its record (first writer wins), so every stage pairs the same answer with the
        same verdict."""
        replace = self.refresh or request.key in self._replace
        record = outcome.record()
        stored = await self.calls.store_and_release(request.key, record, replace=replace)
        if stored == record:
            return outcome, True
        winner = ChatOutcome.from_record(request.key, stored)
        try:
            winner.parsed = accept(winner.content or "") if accept is not None else None
        except ValueError:
            return outcome, True
        return winner, True

    async def _call_uncached(self, request: ChatRequest,
                             accept: Callable[[str], T] | None) -> tuple[ChatOutcome, bool]:
        """The outcome, and whether the lease is given back already (with the stored result)."""
        plan = request.retry
        if accept is None:
            tries = 1
        elif self.reply_kind == "model":
            tries = self.runtime.model_parse_attempts
        else:  # the user's number, else the suite protocol's, else the default
            tries = self.runtime.judge_parse_attempts or (
                plan.attempts if plan is not None and plan.attempts else JUDGE_PARSE_ATTEMPTS)
        attempts, last_error = 0, "no reply"
        cut_off: ChatOutcome | None = None
        kept = {} if accept is None or self.refresh else \
            await kept_attempts(self.calls, request.key, tries)
        paid = False
        for attempt in range(tries):
            if attempt in kept:  # paid for by an earlier run, or one beside this
                outcome = stored_attempt(request.key, kept[attempt])
            else:
                asked = plan.request_for(request, attempt) if plan is not None else request
                outcome = await self._call_adapting(asked)
                paid = True
            fresh = attempt not in kept
            outcome.request_key = request.key  # the call is the first request, on every try
            attempts += outcome.attempts
            outcome.attempts = attempts
            if outcome.status == "error":
                self.stats.failures += 1
                return outcome, False
            if outcome.status == "refused":
                # The server's answer to this request as sent: kept, never asked again unless
                # --refresh or a changed key says so.
                self.stats.refused += 1
                return await self._store(request, outcome, accept)
            if accept is None or (not outcome.ok and plan is not None
                                  and plan.keep_non_answers):
                # The model under test, or a judge read as its benchmark reads it: a
                # non-answer is its answer, cached.
                self.stats.not_answers += not outcome.ok
                self._count_kept(outcome)
                return await self._store(request, outcome, accept)
            if outcome.status == "truncated" and plan is not None \
                    and plan.ask_again_when_truncated:
                self.stats.not_answers += 1
                cut_off, last_error = outcome, outcome.error or "cut off"
                await keep_attempt(self.calls, self.role.model, outcome, attempt, last_error,
                                   fresh=fresh, refresh=self.refresh)
                continue
            if outcome.final:  # the reply filled the context: kept, as a refusal is
                self.stats.not_answers += 1
                return await self._store(request, outcome, accept)
            if outcome.status in ("truncated", "blocked"):
                # Asking again would be cut or blocked the same way: a judge error, kept as
                # an attempt (a re-run reads it; --refresh asks again).
                self.stats.not_answers += 1
                await keep_attempt(self.calls, self.role.model, outcome, attempt,
                                   outcome.error or "", fresh=fresh, refresh=self.refresh)
                self.stats.cache_hits += not paid
                return outcome, False
            cut_off = None
            try:
                if not outcome.ok:
                    raise ValueError(outcome.error)
                outcome.parsed = self._accepted(request, accept, outcome.content or "")
            except ValueError as exc:
                self.stats.invalid_replies += fresh
                last_error = f"invalid {self.reply_kind} reply: " \
                             f"{str(exc).splitlines()[0][:300]}"
                await keep_attempt(self.calls, self.role.model, outcome, attempt, last_error,
                                   fresh=fresh, refresh=self.refresh)
                continue
            self._count_kept(outcome)
            return await self._store(request, outcome, accept)
        self.stats.cache_hits += not paid  # every attempt was read, none paid again
        if cut_off is not None:  # the last try was cut off too: said as such, kept as attempts
            return cut_off, False
        self.stats.failures += 1
        return ChatOutcome(request.key, status="error", attempts=attempts, error=last_error), False

    @staticmethod
    def _accepted(request: ChatRequest, accept: Callable[[str], T], content: str) -> T:
        """The parsed reply, once the request's own check (RetryPlan.check) passes too."""
        parsed = accept(content)
        if request.retry is not None and request.retry.check is not None:
            request.retry.check(content)
        return parsed

    async def _call_adapting(self, request: ChatRequest) -> ChatOutcome:
        """`_call_once` with the response_format this server takes: a format not yet known to
        work is tried by one call at a time; a refused one is replaced, for the run."""
        if formats.format_of(request) == "none":
            return await self._call_once(request)
        state = formats.state_for(self.role.model, request.api_base)
        if not state.loaded:
            async with state.lock():  # the others wait: none sends a format refused before
                if not state.loaded and not self.refresh:
                    for name in formats.LADDER[:-1]:
                        if await self.calls.get(formats.refusal_key(request, name)) is not None:
                            state.refused.add(name)
                state.loaded = True
        while True:
            sent = formats.adapted(request, state)
            outcome: ChatOutcome | None = None
            if not formats.known_to_work(state, sent):
                async with state.lock():
                    sent = formats.adapted(request, state)
                    # Asked again under the lock: the call this one waited for has most often
                    # confirmed the format, and a call sent here would make every call queued
                    # behind it go one at a time (issue #26: a sweep's judge at 1 in flight;
                    # with --batch, a batch each).
                    if not formats.known_to_work(state, sent):
                        outcome = await self._call_once(sent)
                        if outcome.status not in ("error", "refused"):
                            state.working.add(formats.format_of(sent))
            if outcome is None:
                outcome = await self._call_once(sent)
            name = formats.format_of(sent)
            if outcome.refusal != "response_format" or name == "none":
                return outcome
            if name not in state.refused:
                formats.note_refused(state, self.role.model, self.role.endpoint, name,
                                     outcome.error or "")
                await self.calls.put(formats.refusal_key(request, name), outcome.record(),
                                     replace=True)

    def _count_kept(self, outcome: ChatOutcome) -> None:
        self.stats.prompt_tokens += outcome.prompt_tokens or 0
        self.stats.completion_tokens += outcome.completion_tokens or 0

