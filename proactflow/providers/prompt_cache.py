"""Asking a provider's prompt cache to keep what later calls share (`--prompt-cache auto`).

A suite says, per request, which calls share a prefix (`CacheHint.group`: a dialogue, a judge
template) and how many leading messages later calls of the group send again
(`CacheHint.shared`). From that:

- Anthropic (interactive and in batches): cache breakpoints (`cache_control`, through litellm)
  at the end of the shared prefix, at the end of the system prompt, and every 18 content blocks
  back from the first (Anthropic looks for a cached prefix at most 20 blocks before a breakpoint):
  at most 4, each only where the prefix reaches Anthropic's minimum length (1,024 tokens, 2,048
  for Haiku models), below which a breakpoint is ignored and only uses up one of the four;
- OpenAI (its own API, interactive and in a batch line's body): `prompt_cache_key`, the group,
  so that calls of a group reach the same cache; never to another OpenAI-compatible server,
  which may refuse a parameter it does not know;
- any other provider: nothing; its implicit cache is still counted (billing.py).

The hints are not part of the request's key (ChatRequest.key) and the protocol's messages are
unchanged: only what goes on the wire gains them. The same hints order a client's calls
(CallOrder): a call goes out once those whose prompt it extends are answered.
"""

from __future__ import annotations

import asyncio
import functools
from operator import itemgetter
from dataclasses import dataclass
from typing import Any, Literal


from .content import Content, images_of, text_of

PromptCacheMode = Literal["auto", "off"]
ANTHROPIC_BREAKPOINTS = 4
ANTHROPIC_LOOKBACK = 18
"""Content blocks between two breakpoints: Anthropic looks for a cached prefix at most 20
blocks before a breakpoint (a message holds one block per image, and one for its text)."""
EPHEMERAL = {"type": "ephemeral"}


@dataclass(frozen=True)
class CacheHint:
    """Which calls share a prompt prefix with this one: not part of the request's key."""

    group: str
    """Calls sending the same prefix: a dialogue's triggers, a judge template's calls."""
    shared: int | None = None
    """Leading messages that later calls of the group send again; None: the system
    prompt(s) only."""
    chain: bool = False
    """Each call of the group sends the prompt of the one before it again, then more (a
    dialogue's triggers): it goes out once that one is answered (CallOrder)."""
    subgroup: str | None = None
    """Calls of the group that share a longer prefix than the group's (a judge's calls on one
    trigger): they go out once the first of them is answered (CallOrder)."""


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


def _blocks(content: Content) -> int:
    return max(1, len(images_of(content)) + bool(text_of(content)))


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
    budget = 0
    for index in range(shared - 1, systems - 1, -1):
        if budget <= 0:
            wanted.add(index)
            budget = ANTHROPIC_LOOKBACK
        budget -= _blocks(messages[index][1])
    reached, long_enough = 0, []
    minimum = minimum_tokens(model)
    for index, (_, content) in enumerate(messages):
        reached += _estimated_tokens(model, content)
        # Not on an empty text block, which Anthropic refuses to mark; an image block
        # takes one (a video step's frames without subtitles).
        if index in wanted and reached >= minimum \
                and (text_of(content).strip() or images_of(content)):
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
               mode: PromptCacheMode) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The wire messages and extra parameters of a call (interactive or a batch line) with the
    prompt cache hints its provider takes (`messages` are the wire form of `protocol`)."""
    if mode == "off" or not messages:
        return messages, {}
    provider = provider_of(model)
    if provider == "anthropic":
        marks = anthropic_breakpoints(model, protocol, hint)
        if not marks:
            return messages, {}
        return [{**message, "content": _marked(message["content"])} if index in marks
                else message for index, message in enumerate(messages)], {}
    if provider == "openai" and hint is not None \
            and (api_base is None or "api.openai.com" in api_base):
        return messages, {"prompt_cache_key": hint.group[:64]}
    return messages, {}


class Turn:
    """One call's place in the order of its group: what it waits for before going out, and
    what it tells the calls after it once answered (`done`, whatever became of it: a reply
    read from the per-call cache, an error, a cancellation)."""

    def __init__(self, after: list[asyncio.Event]):
        self._after = after
        self.answered = asyncio.Event()

    async def wait(self) -> None:
        for event in self._after:
            await event.wait()

    def done(self) -> None:
        self.answered.set()


class CallOrder:
    """The order that lets a provider's prompt cache serve what calls share: a call goes out
    once the calls whose prompt it extends are answered (a provider caches a prefix once a
    call sending it is answered; calls sent together all find the cache empty):

    - the group's first call (a judge's first call on its template: the system prompt);
    - the first call of its subgroup (a judge's first call on a trigger: the system prompt,
      the rubric and the dialogue, which the trigger's other replies share);
    - in a chain, the call before it (a dialogue's earlier trigger, whose whole prompt the
      next one sends again).

    A call takes its place when it is made (`enter`, before anything is awaited: the order
    the stage makes its calls in), so that the order does not depend on which lookup in the
    per-call cache returns first."""

    def __init__(self) -> None:
        self._first: dict[str, asyncio.Event] = {}
        self._last: dict[str, asyncio.Event] = {}

    def enter(self, hint: CacheHint | None) -> Turn:
        if hint is None:
            return Turn([])
        after: list[asyncio.Event] = []
        turn = Turn(after)
        keys = [hint.group] + ([f"{hint.group}|{hint.subgroup}"] if hint.subgroup else [])
        for key in keys:
            first = self._first.setdefault(key, turn.answered)
            if first is not turn.answered:
                after.append(first)
        if hint.chain:
            before = self._last.get(hint.group)
            self._last[hint.group] = turn.answered
            if before is not None:
                after.append(before)
        return turn


PROVIDER_MINIMUM = 1024
"""The shortest prefix OpenAI and Anthropic cache (tokens)."""
Shape = tuple[CacheHint | None, tuple[tuple[int, int], ...]]
"""What the plan keeps of a request: its hint, and each message's hash and estimated tokens
(not the request: its images would stay in memory)."""


def shape_of(model: str, messages: list[tuple[str, Content]], hint: CacheHint | None) -> Shape:
    # hash(): a string's and an image's (its type and sha256) are computed once per object,
    # and a growing chat (a video episode's) hands the same objects to every step.
    return hint, tuple((hash((role, content)), _estimated_tokens(model, content))
                       for role, content in messages)


class SharedPrefixes:
    """The plan's estimate of what a provider's cache can serve: of each call to make, the
    estimated tokens of the leading messages that the call CallOrder makes it wait for sent
    before it (the group's first, its subgroup's first, the chain's previous one), counted
    from PROVIDER_MINIMUM tokens on. Calls are seen in the order the run makes them."""

    def __init__(self) -> None:
        self._sent: dict[str, tuple[tuple[int, int], ...]] = {}

    def cacheable(self, shape: Shape) -> int:
        hint, messages = shape
        if hint is None:
            return 0
        firsts = [f"first|{hint.group}"] + ([f"first|{hint.group}|{hint.subgroup}"]
                                             if hint.subgroup else [])
        earlier = firsts + ([f"last|{hint.group}"] if hint.chain else [])
        best = max((_common_tokens(self._sent[key], messages) for key in earlier
                    if key in self._sent), default=0)
        for key in firsts:
            self._sent.setdefault(key, messages)
        if hint.chain:
            self._sent[f"last|{hint.group}"] = messages
        return best if best >= PROVIDER_MINIMUM else 0


def _common_tokens(before: tuple[tuple[int, int], ...], now: tuple[tuple[int, int], ...]) -> int:
    """The tokens of the leading messages both send: the longest common prefix, found by
    comparing prefixes whole (a long chat's calls share hundreds of messages)."""
    low, high = 0, min(len(before), len(now))  # before[:low] == now[:low]; high: at most
    while low < high:
        middle = (low + high + 1) // 2
        if before[low:middle] == now[low:middle]:
            low = middle
        else:
            high = middle - 1
    return sum(map(itemgetter(1), before[:low]))
