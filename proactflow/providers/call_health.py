"""What a client of one role keeps about its calls: counters for the run record and summary,
and the breaker that declares an endpoint down; the HTTP attempts under way in the process."""

from __future__ import annotations

import asyncio
import time
import weakref
from dataclasses import dataclass, field


@dataclass
class CallStats:
    """Counters of one client, for the run record and the closing summary. `paid_*` count the
    tokens of every reply a provider sent in this run (judge replies asked again included);
    answers from the cache cost nothing."""

    calls: int = 0
    http_attempts: int = 0
    cache_hits: int = 0
    failures: int = 0
    not_answers: int = 0
    invalid_replies: int = 0
    refused: int = 0
    """Calls the server refused as sent (stored: a re-run does not ask them again)."""
    rate_limited: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    paid_prompt_tokens: int = 0
    paid_completion_tokens: int = 0
    paid_cache_read_tokens: int = 0
    """Of paid_prompt_tokens, read from the provider's prompt cache (billed at its price)."""
    paid_cache_write_tokens: int = 0
    """Of paid_prompt_tokens, written to the provider's prompt cache."""

    def count_cache(self, read: int, written: int) -> None:
        self.paid_cache_read_tokens += read
        self.paid_cache_write_tokens += written

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class Breaker:
    """The endpoint is down after `down_after_s` without a success while attempts kept failing
    for reasons other than rate limiting (at least `min_failures` of them)."""

    down_after_s: float
    min_failures: int
    failures: int = 0
    since: float = field(default_factory=time.monotonic)

    def success(self) -> None:
        self.failures = 0

    def failure(self) -> bool:
        """Count a failure; True when the endpoint is now to be declared down."""
        if self.failures == 0:
            self.since = time.monotonic()
        self.failures += 1
        return self.failures >= self.min_failures \
            and time.monotonic() - self.since >= self.down_after_s


class Paying:
    """The HTTP attempts under way on one event loop, and an event set while there are none:
    a run stopping because its database stayed away lets them finish first, so that answers
    paid for are kept (a Ctrl-C does not wait)."""

    def __init__(self) -> None:
        self.count = 0
        self.idle = asyncio.Event()
        self.idle.set()

    def __enter__(self) -> "Paying":
        self.count += 1
        self.idle.clear()
        return self

    def __exit__(self, *exc: object) -> None:
        self.count -= 1
        if self.count == 0:
            self.idle.set()


_paying: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Paying] = \
    weakref.WeakKeyDictionary()


def paying() -> Paying:
    """The HTTP attempts under way on the running event loop."""
    loop = asyncio.get_running_loop()
    found = _paying.get(loop)
    if found is None:
        found = _paying[loop] = Paying()
    return found
