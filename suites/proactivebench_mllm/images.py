"""The image a step shows, as the bytes to send: the file itself when the environment shows it
unchanged, else the transformed RGB image as lossless PNG. Never resized."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from PIL import Image

from ...errors import UserError
from .environment import View


def open_rgb(path: Path) -> Image.Image:
    """The image as the package loads it: opened and converted to RGB (data_utils.py:103)."""
    try:
        with Image.open(path) as image:
            return image.convert("RGB")
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read the image {path}: {exc}") from None


def shown_image(corpus: Path | str, shown: View) -> Image.Image:
    """The RGB image the model sees at this step (the crop beyond the image is black, as PIL
    pads it)."""
    image = open_rgb(Path(corpus) / shown.image)
    return image if shown.crop is None else image.crop(shown.crop)


def image_bytes(corpus: Path | str, shown: View) -> tuple[bytes, str]:
    """The bytes to send and their media type: the file's own bytes for the identity, else the
    transformed image as PNG."""
    path = Path(corpus) / shown.image
    if shown.crop is None:
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UserError(f"cannot read the image {path}: {exc.strerror or exc}") from None
        return data, media_type(data, path)
    buffer = io.BytesIO()
    shown_image(corpus, shown).save(buffer, format="PNG")
    return buffer.getvalue(), "image/png"


def media_type(data: bytes, path: Path) -> str:
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if data[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    raise UserError(f"{path}: not a PNG, JPEG, GIF or WebP image")


def pixel_digest(image: Image.Image) -> str:
    """sha256 of "<width>x<height>:" followed by the RGB pixels, row by row (the golden traces'
    `pixels`)."""
    rgb = image.convert("RGB")
    header = f"{rgb.width}x{rgb.height}:".encode()
    return hashlib.sha256(header + rgb.tobytes()).hexdigest()
