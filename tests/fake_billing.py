"""A fake OpenAI-compatible server that bills like a provider with a prompt cache.

A prompt is tokens of four characters (each message as `role` and content, in order). A reply
reports in `usage.prompt_tokens_details.cached_tokens` the longest prefix of its prompt that the
cache holds, in whole blocks (`block` tokens) and only from `minimum` tokens on, as OpenAI and
Anthropic cache; a prefix enters the cache when its call is answered (not when it arrives: two
calls sent together both find the cache empty) and leaves it `ttl` seconds after it was last
used. With `writes` it also reports the blocks it stored
(`prompt_tokens_details.cache_creation_tokens`, billed at the write price, as Anthropic does).

Beside what a run got, it counts what an ideal order would have got: each call reading every
prefix sent before it, answered or not, never expired (`ideal_cached`).
"""

from __future__ import annotations

import hashlib
import time
from collections import Counter

from fake_openai import FakeOpenAI, Reply, Responder

CHARS_PER_TOKEN = 4


def prompt_tokens(request: dict) -> list[str]:
    text = "".join(f"{m.get('role')}\n{m.get('content')}\n" for m in request.get("messages", []))
    return [text[i:i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


class BillingFake(FakeOpenAI):
    def __init__(self, responders: dict[str, Responder] | None = None, *, latency: float = 0.0,
                 minimum: int = 1024, block: int = 128, ttl: float = 300.0,
                 writes: bool = False):
        super().__init__(responders, latency)
        self.minimum, self.block, self.ttl, self.writes = minimum, block, ttl, writes
        self._cache: dict[tuple[str, str], float] = {}
        """(model, digest of a prefix) -> when it expires."""
        self._sent: set[tuple[str, str]] = set()
        self.prompt: Counter[str] = Counter()
        self.cached: Counter[str] = Counter()
        self.written: Counter[str] = Counter()
        self.ideal_cached: Counter[str] = Counter()

    def _prefixes(self, model: str, tokens: list[str]) -> list[tuple[int, tuple[str, str]]]:
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
        now = time.monotonic()
        with self._lock:
            hit = max((length for length, key in prefixes
                       if self._cache.get(key, 0.0) > now), default=0)
            ideal = max((length for length, key in prefixes if key in self._sent), default=0)
            self._sent.update(key for _, key in prefixes)
            for length, key in prefixes:
                if length <= hit:
                    self._cache[key] = now + self.ttl  # used: kept longer
            request["_billing"] = (len(tokens), hit, prefixes)
            self.prompt[model] += len(tokens)
            self.cached[model] += hit
            self.ideal_cached[model] += ideal
        return super()._answer(request)

    def completion_body(self, request: dict, reply: Reply) -> dict:
        body = super().completion_body(request, reply)
        total, hit, prefixes = request.get("_billing", (0, 0, []))
        now = time.monotonic()
        with self._lock:  # answered: its prefixes are in the cache from now on
            stored = max((length for length, _ in prefixes), default=0)
            for _, key in prefixes:
                self._cache[key] = now + self.ttl
            written = stored - hit if self.writes and stored > hit else 0
            self.written[request.get("model", "")] += written
        details = {"cached_tokens": hit, **({"cache_creation_tokens": written}
                                             if written else {})}
        body["usage"].update(prompt_tokens=total, total_tokens=total
                             + body["usage"]["completion_tokens"],
                             prompt_tokens_details=details)
        return body
