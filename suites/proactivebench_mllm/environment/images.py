"""The image a step shows, as the bytes to send: the file itself when the environment shows it
unchanged, else the transformed RGB image as lossless PNG. Never resized."""

from __future__ import annotations

import hashlib
import io
from pathlib import Path

from PIL import Image

from ....common.errors import UserError
from . import View


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


# Files sent as they are: formats every image-taking provider reads, in modes whose pixels
# decode to what convert("RGB") gives (no alpha to composite, no CMYK or palette to interpret).
SENT_AS_IS = {("PNG", "RGB"), ("PNG", "L"), ("JPEG", "RGB"), ("JPEG", "L"), ("WEBP", "RGB")}
MEDIA_TYPES = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp"}


def image_bytes(corpus: Path | str, shown: View) -> tuple[bytes, str]:
    """The bytes to send and their media type: the file's own bytes when the step shows it
    unchanged (and the file is a PNG, JPEG or WebP in RGB or grey), else the RGB image the
    environment shows (cropped, or converted) as PNG. Raises ValueError on an empty crop
    (View.empty)."""
    path = Path(corpus) / shown.image
    if shown.empty:
        raise ValueError(f"the crop {shown.crop} of {path} has no pixels")
    if shown.crop is None:
        try:
            with Image.open(path) as image:
                kind = (image.format or "", image.mode)
                transparent = "transparency" in image.info
            if kind in SENT_AS_IS and not transparent:
                return path.read_bytes(), MEDIA_TYPES[kind[0]]
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read the image {path}: {exc}") from None
    buffer = io.BytesIO()
    shown_image(corpus, shown).save(buffer, format="PNG")
    return buffer.getvalue(), "image/png"


def pixel_digest(image: Image.Image) -> str:
    """sha256 of "<width>x<height>:" followed by the RGB pixels, row by row (the golden traces'
    `pixels`)."""
    rgb = image.convert("RGB")
    header = f"{rgb.width}x{rgb.height}:".encode()
    return hashlib.sha256(header + rgb.tobytes()).hexdigest()
