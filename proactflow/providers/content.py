"""What a message holds: text, or parts (text and images) for models that see.

An image is sent exactly as the suite's environment shows it: the bytes of its file, or a
transformed view encoded losslessly (PNG), never resized here. It travels as an OpenAI-style
`image_url` part with a base64 data URL (litellm maps that to every provider that takes
images); everywhere else, in the per-call cache key, logs, rows and reprs, it is its sha256.

An image stored in a file whose hash is already known (a video's frame store) can be a part
without its bytes (`ImagePart.stored`): they are read when the request is sent, and its data
URL is built once and kept in a cache bounded in bytes, so that a chat re-sending the same
frames step after step neither holds every image nor encodes it again at each step.
"""

from __future__ import annotations

import base64
import hashlib
import threading
from collections import OrderedDict
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

    held: bytes | None = field(repr=False, compare=False)
    """The encoded image (held only while its request is alive), or None for a stored image
    read from `path` when its bytes are needed."""
    media_type: str
    """image/png, image/jpeg, image/gif or image/webp: read from the bytes, never assumed."""
    sha256: str
    """The bytes' hash: what keys, logs and rows say of the image."""
    path: Path | None = field(default=None, repr=False, compare=False)
    """The file a stored image is read from."""
    size: tuple[int, int] | None = field(default=None, repr=False, compare=False)
    """A stored image's width and height, as recorded with it."""

    @classmethod
    def of(cls, data: bytes) -> "ImagePart":
        """An image from its encoded bytes; ValueError for bytes that are not an image."""
        return cls(data, _sniff(data), hashlib.sha256(data).hexdigest())

    @classmethod
    def read(cls, path: Path) -> "ImagePart":
        """An image file's own bytes, unchanged."""
        return cls.of(Path(path).read_bytes())

    @classmethod
    def stored(cls, path: Path, media_type: str, sha256: str,
               size: tuple[int, int] | None = None) -> "ImagePart":
        """An image file whose media type, hash (and size) are known (written by proactflow,
        which recorded them): nothing is read until its bytes are sent, and then they are
        checked against the hash."""
        return cls(None, media_type, sha256, Path(path), size)

    @property
    def data(self) -> bytes:
        if self.held is not None:
            return self.held
        assert self.path is not None, "a stored image has its file"
        data = self.path.read_bytes()
        if hashlib.sha256(data).hexdigest() != self.sha256 or _sniff(data) != self.media_type:
            raise ValueError(f"{self.path}: the image changed since it was stored "
                             f"(sha256 {self.sha256} expected)")
        return data

    def data_url(self) -> str:
        if self.held is not None:
            return _data_url(self.media_type, self.held)
        return _STORED_URLS.get(self.sha256, lambda: _data_url(self.media_type, self.data))

    def wire(self) -> dict[str, Any]:
        return {"type": "image_url", "image_url": {"url": self.data_url()}}

    def key_material(self) -> dict[str, str]:
        return {"type": "image", "media_type": self.media_type, "sha256": self.sha256}

    def estimated_tokens(self, model: str) -> int:
        """Prompt tokens of this image as litellm counts them for `model` (its size read from
        the bytes; a model litellm does not know is counted as OpenAI's high-detail tiles)."""
        # litellm counts an image from its pixel size: stored images of one size (a video's
        # frames) are counted once.
        key = (model, self.sha256) if self.size is None else (model, self.media_type,
                                                              *self.size)
        if key not in _IMAGE_TOKENS:
            if len(_IMAGE_TOKENS) >= 4096:  # keys only: never the images themselves
                _IMAGE_TOKENS.clear()
            # Built here, not through the URL cache: a plan estimates every frame of a corpus
            # once and would only push the frames being sent out of it.
            _IMAGE_TOKENS[key] = _image_tokens(model, _data_url(self.media_type, self.data))
        return _IMAGE_TOKENS[key]


def _data_url(media_type: str, data: bytes) -> str:
    return f"data:{media_type};base64,{base64.b64encode(data).decode('ascii')}"


class _UrlCache:
    """Data URLs of stored images by their hash, the least recently used dropped past
    `limit` characters: the frames of every chat in flight stay encoded (a window of 32 frames
    in each of 32 episodes is about 35 MB at the video suite's defaults), and memory stays
    bounded however many episodes a run holds."""

    def __init__(self, limit: int):
        self.limit, self.size = limit, 0
        self._urls: OrderedDict[str, str] = OrderedDict()
        self._lock = threading.Lock()
        self.built = 0
        """URLs built so far (a measure for benchmarks and tests)."""

    def get(self, sha256: str, build: Any) -> str:
        with self._lock:
            url = self._urls.get(sha256)
            if url is not None:
                self._urls.move_to_end(sha256)
                return url
        url = build()
        with self._lock:
            self.built += 1
            if sha256 not in self._urls:
                self._urls[sha256] = url
                self.size += len(url)
            while self.size > self.limit and len(self._urls) > 1:
                self.size -= len(self._urls.popitem(last=False)[1])
        return url


_STORED_URLS = _UrlCache(64 << 20)


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


_IMAGE_TOKENS: dict[tuple[Any, ...], int] = {}


class _NoText:
    """A tokenizer counting no text, in the shape litellm's `custom_tokenizer` takes (a
    `tokenizers.Tokenizer`'s `encode_batch_fast`). An image's count is the difference of two
    counts whose text is the same, so the text's tokens cancel whatever the tokenizer; with
    the model's own, litellm loads a whole text encoding (tiktoken's cl100k_base: about 40 MB
    held for the rest of the process) only for them to cancel."""

    @staticmethod
    def encode_batch_fast(texts: list[str]) -> list[list[int]]:
        return [[] for _ in texts]


_COUNTING_NO_TEXT = {"type": "huggingface_tokenizer", "tokenizer": _NoText()}


def _image_tokens(model: str, data_url: str) -> int:
    import litellm

    def counted(parts: list[dict[str, Any]]) -> int:
        return int(litellm.token_counter(model=model, custom_tokenizer=_COUNTING_NO_TEXT,
                                         messages=[{"role": "user", "content": parts}]))

    image = {"type": "image_url", "image_url": {"url": data_url}}
    return max(0, counted([image]) - counted([]))
