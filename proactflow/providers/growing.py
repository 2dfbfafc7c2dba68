"""A chat that grows a message at a time (a video episode's), with what each request of it
computes over all of its messages kept per message: the canonical JSON its per-call cache key
hashes, the estimated prompt tokens, and the prompt cache's shape (prompt_cache.shape_of). A
request of a long chat then builds nothing for the messages it shares with the one before, and
its key, estimate and shape are the ones ChatRequest computes from its messages
(tests/test_proactivebench_video_scale.py checks them against each other).

The key is content_key of the request's material, whose JSON holds the messages' JSON in a row:
sha256 is fed the part before them and each message once (cache.keys.HashedItems), and a copy
of the hasher is kept where a later request's messages may first differ (the prefix its prompt
cache hint says the next request shares, and the last message), so that a step hashes only the
messages from there on, not the whole chat again: the same bytes, so the same key.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from ..cache.keys import HashedItems, canonical_json
from .content import Content, images_of, key_content, text_of

_CHECKPOINTS = 4
"""Hasher copies kept per head (older ones only serve a change further back)."""


@dataclass(frozen=True)
class GrownFacts:
    """A request's key material, estimate and shape, taken from its chat when it was built
    (the chat grows on after it)."""

    model: str
    """The model the estimate and shape are for."""
    key_messages: HashedItems
    """[role, key_content(content)] of each message, as ChatRequest.key hashes them, with
    their JSON already hashed after the key's head when the request gave it."""
    text_chars: int
    image_tokens: int
    shape: tuple[tuple[int, int], ...]
    """prompt_cache.Shape's second part: each message's hash and estimated tokens."""

    @property
    def estimated_prompt_tokens(self) -> int:
        return self.text_chars // 4 + self.image_tokens


class GrowingMessages:
    """The messages of a chat, appended or replaced one at a time, with their key JSON, hash
    and size kept beside them."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, Content]] = []
        self._material: list[list[Any]] = []
        self._json: list[str] = []
        """canonical_json of each message's material."""
        self._hashes: list[int] = []
        self._chars: list[int] = []
        self._chars_total = 0
        self._shapes: dict[str, list[tuple[int, int]]] = {}
        """By model: each message's hash and estimated tokens (text and images)."""
        self._image_totals: dict[str, int] = {}
        self._hashers: dict[str, list[tuple[int, Any]]] = {}
        """By key head: (n, sha256 fed the head and the first n messages' JSON), n rising;
        every one valid (a replaced message drops those past it)."""

    def __len__(self) -> int:
        return len(self.messages)

    def append(self, role: str, content: Content) -> None:
        self.messages.append((role, content))
        self._material.append([])
        self._json.append("")
        self._hashes.append(0)
        self._chars.append(0)
        for shape in self._shapes.values():
            shape.append((0, 0))
        self._describe(len(self.messages) - 1)

    def replace(self, index: int, role: str, content: Content) -> None:
        self._chars_total -= self._chars[index]
        for model, shape in self._shapes.items():
            self._image_totals[model] -= shape[index][1] - self._chars[index] // 4
        self.messages[index] = (role, content)
        for checkpoints in self._hashers.values():
            while checkpoints and checkpoints[-1][0] > index:
                checkpoints.pop()
        self._describe(index)

    def _describe(self, index: int) -> None:
        role, content = self.messages[index]
        self._material[index] = [role, key_content(content)]
        self._json[index] = canonical_json(self._material[index])
        # As prompt_cache.shape_of takes it (an image hashes its type and sha256).
        self._hashes[index] = hash((role, content))
        chars = len(text_of(content))
        self._chars[index] = chars
        self._chars_total += chars
        for model, shape in self._shapes.items():
            images = _image_tokens(model, content)
            shape[index] = (self._hashes[index], chars // 4 + images)
            self._image_totals[model] += images

    def _shape_for(self, model: str) -> list[tuple[int, int]]:
        shape = self._shapes.get(model)
        if shape is None:
            images = [_image_tokens(model, content) for _, content in self.messages]
            shape = self._shapes[model] = [(hashed, chars // 4 + tokens) for hashed, chars, tokens
                                           in zip(self._hashes, self._chars, images)]
            self._image_totals[model] = sum(images)
        return shape

    def _hashed(self, head: str, shared: int | None) -> Any:
        """sha256 fed `head` and every message's JSON, comma-separated, never to be fed again;
        copies are kept at `shared` messages (where the next request may first differ) and at
        the end, to start later requests from."""
        checkpoints = self._hashers.setdefault(head, [])
        if not checkpoints:
            checkpoints.append((0, hashlib.sha256(head.encode("utf-8"))))
        count = len(self._json)
        stops = [count] if shared is None or not checkpoints[-1][0] < shared < count \
            else [shared, count]
        for stop in stops:
            done, hasher = checkpoints[-1]
            if stop > done:
                hasher = hasher.copy()  # a checkpoint is never fed
                hasher.update(((',' if done else '') + ",".join(self._json[done:stop]))
                              .encode("utf-8"))
                checkpoints.append((stop, hasher))
        del checkpoints[:-_CHECKPOINTS]
        return checkpoints[-1][1]

    def facts(self, model: str, head: str | None = None, shared: int | None = None
              ) -> GrownFacts:
        """What a request of these messages computes, now; with `head` (the key JSON's part
        before the messages), the messages' JSON hashed after it, a copy kept at `shared`
        messages (the prefix the next request sends again) to start the next request from."""
        shape = self._shape_for(model)
        return GrownFacts(model, HashedItems(self._material, head, None if head is None
                                             else self._hashed(head, shared)),
                          self._chars_total, self._image_totals[model], tuple(shape))


def _image_tokens(model: str, content: Content) -> int:
    return sum(image.estimated_tokens(model) for image in images_of(content))
