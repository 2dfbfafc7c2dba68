"""The billing fake in Anthropic's style (see fake_billing.py): the Messages and Message Batches
API of fake_anthropic_batches.py, whose replies bill a prompt cache as Anthropic's does.

Anthropic caches only where a request asks: a content block carrying `cache_control` (a
breakpoint; a tool definition, a system block or a message's block) ends a prefix to cache,
in Anthropic's order (tools, then the system prompt, then the messages). A breakpoint's prefix
shorter than the model's minimum (1,024 tokens; 2,048 for Haiku models) is not cached. A
request reads the longest prefix the cache holds that ends on a block boundary at or before
its last breakpoint (Anthropic looks back at most 20 blocks from a breakpoint: the fake looks
back over all of them, kinder); a request without a breakpoint reads and writes nothing. A
reply's usage is Anthropic's: `input_tokens` after the last cached or written prefix,
`cache_read_input_tokens`, `cache_creation_input_tokens` (the tokens from the end of the read
prefix to the last breakpoint cached) and `cache_creation.ephemeral_5m_input_tokens`, which
litellm turns into `prompt_tokens` (all of them) and `prompt_tokens_details`.

Interactive calls take `latency` seconds, so that calls sent together overlap and find the
cache as it was when they arrived; batch lines are served in order when they finish.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from typing import Callable

from fake_anthropic_batches import FakeAnthropic, _Batch
from fake_billing import CHARS_PER_TOKEN, Prefix, PrefixCache
from fake_openai import Responder

IMAGE_TOKENS = 1_000
"""An image block's tokens (Anthropic counts about width x height / 750)."""


def minimum_tokens(model: str) -> int:
    """Anthropic's shortest cacheable prefix for the model."""
    return 2048 if "haiku" in model.lower() else 1024


def _block_tokens(role: str, block: dict | str) -> list[str]:
    if isinstance(block, str):
        text = block
    elif block.get("type") == "text":
        text = block.get("text", "")
    elif block.get("type") == "image":
        source = json.dumps(block.get("source"), sort_keys=True).encode()
        return [hashlib.sha256(source).hexdigest()] + ["img "] * (IMAGE_TOKENS - 1)
    else:  # a tool call or result: its JSON, without the breakpoint
        text = json.dumps({k: v for k, v in block.items() if k != "cache_control"},
                          sort_keys=True)
    text = f"{role}\n{text}\n"
    return [text[i:i + CHARS_PER_TOKEN] for i in range(0, len(text), CHARS_PER_TOKEN)]


def blocks_of(params: dict) -> list[tuple[list[str], bool]]:
    """(tokens, carries a breakpoint) of each block of a Messages request, in the order
    Anthropic's cache reads them: tools, system, messages."""
    found: list[tuple[list[str], bool]] = []
    for tool in params.get("tools") or []:
        found.append((_block_tokens("tool", {k: v for k, v in tool.items()
                                             if k != "cache_control"}),
                      "cache_control" in tool))
    system = params.get("system")
    for block in [system] if isinstance(system, str) else system or []:
        found.append((_block_tokens("system", block),
                      isinstance(block, dict) and "cache_control" in block))
    for message in params.get("messages", []):
        content = message.get("content")
        for block in [content] if isinstance(content, str) else content or []:
            found.append((_block_tokens(message.get("role", ""), block),
                          isinstance(block, dict) and "cache_control" in block))
    return found


def cache_places(model: str, params: dict) -> tuple[int, list[Prefix], list[Prefix]]:
    """(prompt tokens, the prefixes the request may read, those it writes)."""
    total, digest = 0, hashlib.sha256()
    boundaries: list[Prefix] = []
    marked: list[Prefix] = []
    for tokens, breakpoint in blocks_of(params):
        digest.update("".join(tokens).encode())
        total += len(tokens)
        place = (total, (model, digest.copy().hexdigest()))
        boundaries.append(place)
        if breakpoint:
            marked.append(place)
    if not marked:
        return total, [], []
    last = marked[-1][0]
    readable = [place for place in boundaries if place[0] <= last]
    return total, readable, [place for place in marked if place[0] >= minimum_tokens(model)]


class AnthropicBillingFake(FakeAnthropic):
    def __init__(self, responders: dict[str, Responder] | None = None, *,
                 api_key: str = "sk-ant-test", latency: float = 0.0, ttl: float = 300.0,
                 completion_delay: float = 0.5, port: int = 0,
                 clock: Callable[[], float] = time.monotonic):
        super().__init__(responders, api_key=api_key, completion_delay=completion_delay,
                         port=port)
        self.latency = latency
        self.cache = PrefixCache(ttl, clock)
        self._batch_thread = threading.local()
        self.replied: list[tuple[str, dict]] = []
        """(model, usage) of every reply sent, interactive or in a batch, in order."""

    def _settle(self, batch: _Batch, now: float) -> None:
        self._batch_thread.active = True  # its lines are served without the latency
        try:
            super()._settle(batch, now)
        finally:
            self._batch_thread.active = False

    def message(self, params: dict) -> tuple[int, dict]:
        model = str(params.get("model", ""))
        total, readable, writable = cache_places(model, params)
        hit = self.cache.look(model, total, readable, writable)
        if self.latency and not getattr(self._batch_thread, "active", False):
            time.sleep(self.latency)
        status, body = super().message(params)
        if status != 200:
            return status, body
        written = self.cache.store(model, hit, writable)
        body["usage"] = {"input_tokens": total - hit - written,
                         "output_tokens": body["usage"]["output_tokens"],
                         "cache_read_input_tokens": hit,
                         "cache_creation_input_tokens": written,
                         "cache_creation": {"ephemeral_5m_input_tokens": written,
                                            "ephemeral_1h_input_tokens": 0}}
        self.replied.append((model, body["usage"]))
        return status, body
