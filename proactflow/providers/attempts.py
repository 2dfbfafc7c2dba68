"""Replies paid for that could not be used, kept as the attempts of their request.

A reply that is not usable (a judge's invalid verdict, a list of the wrong length, a reply cut
off that the suite asks again) was paid for all the same. Each is stored in the per-call cache
under its request's key and its attempt index, with its text, tokens and cost, while the client
holds the request's lease: whether to ask again is then a decision about the stored attempts.
A later run, or one running beside it (which waits for the lease), reads attempt n instead of
paying for it again, and asks only past the attempts stored (`--judge-attempts` and
`--eval-attempts` count them); `--refresh` asks every attempt again and replaces it.

The usable reply is stored under the request's own key as before: the keys of valid calls do not
change.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .chat import ChatOutcome
from .litellm_costs import estimated_cost

if TYPE_CHECKING:
    from ..cache.calls import CallStore

ATTEMPT_MARK = "#attempt"


def attempt_key(request_key: str, attempt: int) -> str:
    """Where attempt `attempt` (0-based) of a request is kept: the request's key and the
    index, so attempts of one request never meet another request's."""
    return f"{request_key}{ATTEMPT_MARK}{attempt}"


def attempt_record(outcome: ChatOutcome, attempt: int, why: str, cost_usd: float | None
                   ) -> dict[str, Any]:
    """What is kept of an unusable reply: the call's record (text, tokens, status), why it
    could not be used, and what it cost (None when the model has no known price)."""
    return {**outcome.record(), "attempt": attempt, "unusable": why, "cost_usd": cost_usd}


def stored_attempt(request_key: str, record: dict[str, Any]) -> ChatOutcome:
    """A kept attempt as the outcome of that attempt (its HTTP attempts not counted again)."""
    outcome = ChatOutcome.from_record(request_key, record)
    outcome.attempts = 0
    return outcome


async def kept_attempts(calls: "CallStore", request_key: str, tries: int
                        ) -> dict[int, dict[str, Any]]:
    """The attempts of a request kept by earlier calls, by index, in one look."""
    keys = {attempt_key(request_key, attempt): attempt for attempt in range(tries)}
    found = await calls.get_many(list(keys))
    return {keys[key]: record for key, record in found.items()}


async def keep_attempt(calls: "CallStore", model: str, outcome: ChatOutcome, attempt: int,
                       why: str, *, fresh: bool, refresh: bool) -> None:
    """Store an unusable reply `fresh`ly paid for as attempt `attempt` of its request, while
    the caller holds the request's lease (a run beside it waits, then reads it); the first
    writer wins, unless --refresh asked it again. One read from the store is not stored
    again."""
    if not fresh:
        return
    cost = estimated_cost(model, outcome.prompt_tokens or 0, outcome.completion_tokens or 0)
    await calls.put(attempt_key(outcome.request_key, attempt),
                    attempt_record(outcome, attempt, why, cost), replace=refresh)
