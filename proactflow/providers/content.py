"""What a message holds: text, or parts (text and images) for models that see.

An image is sent exactly as the suite's environment shows it: the bytes of its file, or a
transformed view encoded losslessly (PNG), never resized here. It travels as an OpenAI-style
`image_url` part with a base64 data URL (litellm maps that to every provider that takes
images); everywhere else, in the per-call cache key, logs, rows and reprs, it is its sha256.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union

_MAGIC = ((b"\x89PNG\r\n\x1a\n", "image/png"), (b"\xff\xd8\xff", "image/jpeg"),
          (b"GIF87a", "image/gif"), (b"GIF89a", "image/gif"))


def _sniff(data: bytes) -> str:
    for magic, media_type in _MAGIC:
        if data.startswith(magic):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    raise ValueError("not an image providers take (PNG, JPEG, GIF or WebP)")


@dataclass(frozen=True)
class ImagePart:
    """One image of a message: its encoded bytes as sent, known elsewhere by their hash."""

    data: bytes = field(repr=False, compare=False)
    """The encoded image (held only while its request is alive)."""
    media_type: str
    """image/png, image/jpeg, image/gif or image/webp: read from the bytes, never assumed."""
    sha256: str
    """The bytes' hash: what keys, logs and rows say of the image."""

    @classmethod
    def of(cls, data: bytes) -> "ImagePart":
        """An image from its encoded bytes; ValueError for bytes that are not an image."""
        return cls(data, _sniff(data), hashlib.sha256(data).hexdigest())

    @classmethod
    def read(cls, path: Path) -> "ImagePart":
        """An image file's own bytes, unchanged."""
        return cls.of(Path(path).read_bytes())

    def data_url(self) -> str:
        return f"data:{self.media_type};base64,{base64.b64encode(self.data).decode('ascii')}"

    def wire(self) -> dict[str, Any]:
        return {"type": "image_url", "image_url": {"url": self.data_url()}}

    def key_material(self) -> dict[str, str]:
        return {"type": "image", "media_type": self.media_type, "sha256": self.sha256}

    def estimated_tokens(self, model: str) -> int:
        """Prompt tokens of this image as litellm counts them for `model` (its size read from
        the bytes; a model litellm does not know is counted as OpenAI's high-detail tiles)."""
        key = (model, self.sha256)
        if key not in _IMAGE_TOKENS:
            if len(_IMAGE_TOKENS) >= 4096:  # keys only: never the images themselves
                _IMAGE_TOKENS.clear()
            _IMAGE_TOKENS[key] = _image_tokens(model, self.data_url())
        return _IMAGE_TOKENS[key]


Part = Union[str, ImagePart]
Content = Union[str, tuple[Part, ...]]
"""A message's content: plain text (every text suite), or parts in order."""


def wire_content(content: Content) -> str | list[dict[str, Any]]:
    """The content as the chat-completions API takes it."""
    if isinstance(content, str):
        return content
    return [{"type": "text", "text": part} if isinstance(part, str) else part.wire()
            for part in content]


def key_content(content: Content) -> str | list[Any]:
    """The content as the per-call cache key hashes it: text as it is (keys of text suites are
    unchanged), an image by its hash."""
    if isinstance(content, str):
        return content
    return [{"type": "text", "text": part} if isinstance(part, str) else part.key_material()
            for part in content]


def text_of(content: Content) -> str:
    """The text parts only: what a log or an estimate per character sees."""
    if isinstance(content, str):
        return content
    return "".join(part for part in content if isinstance(part, str))


def images_of(content: Content) -> list[ImagePart]:
    return [] if isinstance(content, str) else [p for p in content if isinstance(p, ImagePart)]


_IMAGE_TOKENS: dict[tuple[str, str], int] = {}


def _image_tokens(model: str, data_url: str) -> int:
    import litellm

    def counted(parts: list[dict[str, Any]]) -> int:
        return int(litellm.token_counter(model=model, messages=[{"role": "user",
                                                                 "content": parts}]))

    image = {"type": "image_url", "image_url": {"url": data_url}}
    return max(0, counted([image]) - counted([]))
