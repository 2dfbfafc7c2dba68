"""A chat that grows a message at a time (a video episode's), with what each request of it
computes over all of its messages kept per message: the material of the per-call cache key,
the estimated prompt tokens, and the prompt cache's shape (prompt_cache.shape_of). A request of
a long chat then builds nothing for the messages it shares with the one before, and its key,
estimate and shape are the ones ChatRequest computes from its messages
(tests/test_proactivebench_video_scale.py checks them against each other).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .content import Content, images_of, key_content, text_of


@dataclass(frozen=True)
class GrownFacts:
    """A request's key material, estimate and shape, taken from its chat when it was built
    (the chat grows on after it)."""

    model: str
    """The model the estimate and shape are for."""
    key_messages: tuple[list[Any], ...]
    """[role, key_content(content)] of each message, as ChatRequest.key hashes them."""
    text_chars: int
    image_tokens: int
    hashes: tuple[int, ...]
    estimates: tuple[int, ...]
    """Each message's hash and estimated tokens."""

    @property
    def estimated_prompt_tokens(self) -> int:
        return self.text_chars // 4 + self.image_tokens

    @property
    def shape(self) -> tuple[tuple[int, int], ...]:
        """prompt_cache.Shape's second part (made only when asked: the plan's)."""
        return tuple(zip(self.hashes, self.estimates))


class GrowingMessages:
    """The messages of a chat, appended or replaced one at a time, with their key material,
    hash and size kept beside them."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, Content]] = []
        self._material: list[list[Any]] = []
        self._hashes: list[int] = []
        self._chars: list[int] = []
        self._chars_total = 0
        self._estimates: dict[str, list[int]] = {}
        """By model: each message's estimated tokens (text and images)."""
        self._image_totals: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self.messages)

    def append(self, role: str, content: Content) -> None:
        self.messages.append((role, content))
        self._material.append([])
        self._hashes.append(0)
        self._chars.append(0)
        for estimates in self._estimates.values():
            estimates.append(0)
        self._describe(len(self.messages) - 1)

    def replace(self, index: int, role: str, content: Content) -> None:
        self._chars_total -= self._chars[index]
        for model, estimates in self._estimates.items():
            self._image_totals[model] -= estimates[index] - self._chars[index] // 4
        self.messages[index] = (role, content)
        self._describe(index)

    def _describe(self, index: int) -> None:
        role, content = self.messages[index]
        self._material[index] = [role, key_content(content)]
        # As prompt_cache.shape_of takes it (an image hashes its type and sha256).
        self._hashes[index] = hash((role, content))
        chars = len(text_of(content))
        self._chars[index] = chars
        self._chars_total += chars
        for model, estimates in self._estimates.items():
            images = _image_tokens(model, content)
            estimates[index] = chars // 4 + images
            self._image_totals[model] += images

    def _estimates_for(self, model: str) -> list[int]:
        estimates = self._estimates.get(model)
        if estimates is None:
            images = [_image_tokens(model, content) for _, content in self.messages]
            estimates = self._estimates[model] = [chars // 4 + tokens for chars, tokens
                                                  in zip(self._chars, images)]
            self._image_totals[model] = sum(images)
        return estimates

    def facts(self, model: str) -> GrownFacts:
        estimates = self._estimates_for(model)
        return GrownFacts(model, tuple(self._material), self._chars_total,
                          self._image_totals[model], tuple(self._hashes), tuple(estimates))


def _image_tokens(model: str, content: Content) -> int:
    return sum(image.estimated_tokens(model) for image in images_of(content))
