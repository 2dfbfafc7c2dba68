"""An image's estimated prompt tokens (ImagePart.estimated_tokens): the count litellm gives the
image in a chat, without loading a text tokenizer for the text that cancels out of it. A model's
own tokenizer is about 40 MB held for the rest of the run (tiktoken's cl100k_base), and for some
model names litellm fetches one from the Hugging Face hub."""

from __future__ import annotations

import base64
from fractions import Fraction

import av
import litellm
import pytest

from proactflow.providers import content
from proactflow.providers.content import ImagePart

SIZES = [(384, 216), (64, 64), (1280, 720), (800, 3000)]
MODELS = ["openai/watcher", "gpt-4o", "claude-3-5-sonnet-20241022", "gemini/gemini-2.5-pro"]


def _jpeg(width: int, height: int) -> bytes:
    codec = av.CodecContext.create("mjpeg", "w")
    codec.pix_fmt, codec.width, codec.height = "yuvj420p", width, height
    codec.time_base = Fraction(1, 1)
    frame = av.VideoFrame(width, height, "yuvj420p")
    frame.pts = 0
    return b"".join(bytes(packet) for packet in codec.encode(frame))


def _with_the_models_tokenizer(model: str, data_url: str) -> int:
    """The estimate as it was made before: two counts with the model's own text tokenizer."""
    def counted(parts: list[dict]) -> int:
        return int(litellm.token_counter(model=model, messages=[{"role": "user",
                                                                 "content": parts}]))

    return max(0, counted([{"type": "image_url", "image_url": {"url": data_url}}])
               - counted([]))


@pytest.mark.parametrize("size", SIZES)
def test_an_image_counts_what_litellm_counts_with_the_models_tokenizer(size):
    data_url = "data:image/jpeg;base64," + base64.b64encode(_jpeg(*size)).decode()
    for model in MODELS:
        expected = _with_the_models_tokenizer(model, data_url)
        assert expected > 0
        assert content._image_tokens(model, data_url) == expected, model


def test_estimating_an_image_loads_no_text_tokenizer(monkeypatch):
    def no_tokenizer(*args, **kwargs):
        raise AssertionError("a text tokenizer was selected for an image's estimate")

    monkeypatch.setattr(litellm.utils, "select_tokenizer", no_tokenizer)
    monkeypatch.setattr(content, "_IMAGE_TOKENS", {})
    image = ImagePart.of(_jpeg(384, 216))
    # A model name for which litellm's own tokenizer comes from the Hugging Face hub.
    assert image.estimated_tokens("together_ai/meta-llama/Llama-3-70b-chat-hf") == 255
