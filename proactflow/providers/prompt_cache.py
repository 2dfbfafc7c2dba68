"""Asking a provider's prompt cache to keep what later calls share (`--prompt-cache auto`).

A suite says, per request, which calls share a prefix (`CacheHint.group`: a dialogue, a judge
template) and how many leading messages later calls of the group send again
(`CacheHint.shared`). From that:

- Anthropic (interactive and in batches): cache breakpoints (`cache_control`, through litellm)
  at the end of the shared prefix, at the end of the system prompt, and every 18 messages back
  from the first (Anthropic looks for a cached prefix at most 20 blocks before a breakpoint):
  at most 4, each only where the prefix reaches Anthropic's minimum length (1,024 tokens, 2,048
  for Haiku models), below which a breakpoint is ignored and only uses up one of the four;
- OpenAI (its own API): `prompt_cache_key`, the group, so that calls of a group reach the same
  cache; never to another OpenAI-compatible server, which may refuse a parameter it does not
  know, nor in a batch;
- any other provider: nothing; its implicit cache is still counted (billing.py).

The hints are not part of the request's key (ChatRequest.key) and the protocol's messages are
unchanged: only what goes on the wire gains them.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass, field
from typing import Any, Literal


from .content import Content, images_of, text_of

PromptCacheMode = Literal["auto", "off"]
ANTHROPIC_BREAKPOINTS = 4
ANTHROPIC_LOOKBACK = 18
"""Messages between two breakpoints: Anthropic looks for a cached prefix at most 20 content
blocks before a breakpoint (a message may hold more than one)."""
EPHEMERAL = {"type": "ephemeral"}


@dataclass(frozen=True)
class CacheHint:
    """Which calls share a prompt prefix with this one: not part of the request's key."""

    group: str
    """Calls sending the same prefix: a dialogue's triggers, a judge template's calls."""
    shared: int | None = None
    """Leading messages that later calls of the group send again; None: the system
    prompt(s) only."""


def minimum_tokens(model: str) -> int:
    """The shortest prefix Anthropic caches for this model."""
    return 2048 if "haiku" in model.lower() else 1024


@functools.lru_cache(maxsize=256)
def provider_of(model: str) -> str:
    """litellm's provider of a model name, looked up once per name (it is on every call)."""
    import litellm  # here, not at import: every command imports this module, few call

    try:
        return litellm.get_llm_provider(model=model)[1]
    except Exception:  # litellm raises several types for a model it cannot place
        return model.split("/", 1)[0] if "/" in model else ""


def _estimated_tokens(model: str, content: Content) -> int:
    """About four characters a token, errs high as ChatRequest's estimate does."""
    return len(text_of(content)) // 4 + sum(image.estimated_tokens(model)
                                            for image in images_of(content))


def anthropic_breakpoints(model: str, messages: list[tuple[str, Content]],
                          hint: CacheHint | None) -> list[int]:
    """Indices of the messages that end a prefix worth caching, in order; at most 4."""
    systems = 0
    while systems < len(messages) and messages[systems][0] == "system":
        systems += 1
    shared = hint.shared if hint is not None and hint.shared is not None else systems
    shared = min(shared, len(messages))
    wanted: set[int] = set()
    if systems:
        wanted.add(systems - 1)
    position = shared - 1
    while position >= 0 and position >= systems:
        wanted.add(position)
        position -= ANTHROPIC_LOOKBACK
    reached, long_enough = 0, []
    minimum = minimum_tokens(model)
    for index, (_, content) in enumerate(messages):
        reached += _estimated_tokens(model, content)
        if index in wanted and reached >= minimum and text_of(content).strip():
            long_enough.append(index)
    if len(long_enough) > ANTHROPIC_BREAKPOINTS:  # the system prompt, then the latest ones
        first = long_enough[:1] if systems and long_enough[0] == systems - 1 else []
        long_enough = first + long_enough[len(long_enough) - ANTHROPIC_BREAKPOINTS + len(first):]
    return long_enough


def _marked(content: Any) -> list[dict[str, Any]]:
    """Wire content with a breakpoint on its last block."""
    blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] \
        if isinstance(content, str) else [dict(block) for block in content]
    blocks[-1] = {**blocks[-1], "cache_control": EPHEMERAL}
    return blocks


def with_hints(model: str, api_base: str | None, messages: list[dict[str, Any]],
               protocol: list[tuple[str, Content]], hint: CacheHint | None,
               mode: PromptCacheMode, batched: bool) -> tuple[list[dict[str, Any]],
                                                              dict[str, Any]]:
    """The wire messages and extra parameters of a call with the prompt cache hints its
    provider takes (`messages` are the wire form of `protocol`)."""
    if mode == "off" or not messages:
        return messages, {}
    provider = provider_of(model)
    if provider == "anthropic":
        marks = anthropic_breakpoints(model, protocol, hint)
        if not marks:
            return messages, {}
        return [{**message, "content": _marked(message["content"])} if index in marks
                else message for index, message in enumerate(messages)], {}
    if provider == "openai" and hint is not None and not batched \
            and (api_base is None or "api.openai.com" in api_base):
        return messages, {"prompt_cache_key": hint.group[:64]}
    return messages, {}


@dataclass
class FirstOfGroup:
    """A call sharing a prompt prefix with others goes out once the first of them is answered,
    so that it finds the prefix in the provider's cache (a judge's first call on a template,
    then the rest)."""

    answered: dict[str, asyncio.Event] = field(default_factory=dict)

    async def wait_for_first(self, hint: CacheHint | None) -> asyncio.Event | None:
        """Waits while the group's first call is under way; returns the event to set once
        answered when this call is that first one."""
        if hint is None:
            return None
        gate = self.answered.get(hint.group)
        if gate is None:
            self.answered[hint.group] = gate = asyncio.Event()
            return gate
        await gate.wait()
        return None
