"""Fake providers that bill like a provider with a prompt cache, in two styles.

- OpenAI's (`BillingFake`, an OpenAI-compatible server with the files and batches API): the
  provider caches by itself. A reply reports in `usage.prompt_tokens_details.cached_tokens` the
  longest prefix of its prompt that the cache holds, in whole blocks (`block` tokens) and only
  from `minimum` tokens on; with `writes` it also reports the blocks it stored
  (`prompt_tokens_details.cache_creation_tokens`).
- Anthropic's (`AnthropicBillingFake` in fake_billing_anthropic.py, the Messages and Message
  Batches API): the provider caches only where the request asks, with `cache_control`
  breakpoints.

Both: a prompt is tokens of four characters; a prefix enters the cache when its call is
answered (not when it arrives: two calls sent together both find the cache empty) and leaves
it `ttl` seconds after it was last written or read; each model has a cache of its own. A
batch's lines are served one after the other in the order of its file, when the batch is
done, each reading what the lines and calls answered before it left (a real provider serves a
batch's lines in an order of its own, several at once: the fake is kinder, never different in
kind).

Beside what a run got, `PrefixCache` counts what an ideal order would have got: each call
reading every prefix sent before it, answered or not, never expired (`ideal_cached`).
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from typing import Callable

from fake_batches import FakeBatches
from fake_openai import Reply, Responder

CHARS_PER_TOKEN = 4
Prefix = tuple[int, tuple[str, str]]
"""(length in tokens, (model, digest of the prefix)): a place in a prompt the cache may hold."""


def prompt_tokens(request: dict) -> list[str]:
    text = "".join(f"{m.get('role')}\n{m.get('content')}\n" for m in request.get("messages", []))
    return [text[i:i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


class PrefixCache:
    """The provider's cache and what it billed, per model (thread-safe).

    A call first `looks` (when it arrives): of the prefixes it may read, the longest the cache
    holds is read, and refreshed; once answered it `stores` the prefixes it may write: those
    not read are billed as written."""

    def __init__(self, ttl: float = 300.0, clock: Callable[[], float] = time.monotonic):
        self.ttl, self.clock = ttl, clock
        self._expires: dict[tuple[str, str], float] = {}
        self._sent: set[tuple[str, str]] = set()
        self._lock = threading.Lock()
        self.prompt: Counter[str] = Counter()
        self.cached: Counter[str] = Counter()
        self.written: Counter[str] = Counter()
        self.ideal_cached: Counter[str] = Counter()

    def look(self, model: str, total: int, readable: list[Prefix],
             writable: list[Prefix]) -> int:
        """Tokens of the longest readable prefix the cache holds: read now, kept longer."""
        now = self.clock()
        with self._lock:
            hit = max((length for length, key in readable
                       if self._expires.get(key, 0.0) > now), default=0)
            ideal = max((length for length, key in readable if key in self._sent), default=0)
            self._sent.update(key for _, key in writable)
            for length, key in readable:
                if length <= hit and key in self._expires:
                    self._expires[key] = now + self.ttl
            self.prompt[model] += total
            self.cached[model] += hit
            self.ideal_cached[model] += ideal
        return hit

    def store(self, model: str, hit: int, writable: list[Prefix]) -> int:
        """The call is answered: its writable prefixes are in the cache from now on. Returns
        the tokens written (beyond the part read)."""
        now = self.clock()
        with self._lock:
            for _, key in writable:
                self._expires[key] = now + self.ttl
            written = max(0, max((length for length, _ in writable), default=0) - hit)
            self.written[model] += written
        return written


class BillingFake(FakeBatches):
    """OpenAI's style: every prompt of `minimum` tokens or more is cached, in blocks."""

    def __init__(self, responders: dict[str, Responder] | None = None, *, latency: float = 0.0,
                 minimum: int = 1024, block: int = 128, ttl: float = 300.0,
                 writes: bool = False, completion_delay: float = 0.0):
        super().__init__(responders, latency, completion_delay)
        self.minimum, self.block, self.writes = minimum, block, writes
        self.cache = PrefixCache(ttl)
        self.prompt, self.cached = self.cache.prompt, self.cache.cached
        self.written, self.ideal_cached = self.cache.written, self.cache.ideal_cached

    def _prefixes(self, model: str, tokens: list[str]) -> list[Prefix]:
        """(length, key) of each cacheable prefix, shortest first."""
        found, digest = [], hashlib.sha256()
        for end in range(self.block, len(tokens) + 1, self.block):
            digest.update("".join(tokens[end - self.block:end]).encode())
            if end >= self.minimum:
                found.append((end, (model, digest.copy().hexdigest())))
        return found

    def _answer(self, request: dict) -> Reply:
        model, tokens = request.get("model", ""), prompt_tokens(request)
        prefixes = self._prefixes(model, tokens)
        hit = self.cache.look(model, len(tokens), prefixes, prefixes)
        request["_billing"] = (len(tokens), hit, prefixes)
        return super()._answer(request)

    def completion_body(self, request: dict, reply: Reply) -> dict:
        body = super().completion_body(request, reply)
        total, hit, prefixes = request.get("_billing", (0, 0, []))
        written = self.cache.store(request.get("model", ""), hit, prefixes)
        details = {"cached_tokens": hit, **({"cache_creation_tokens": written}
                                             if self.writes and written else {})}
        body["usage"].update(prompt_tokens=total, total_tokens=total
                             + body["usage"]["completion_tokens"],
                             prompt_tokens_details=details)
        return body
