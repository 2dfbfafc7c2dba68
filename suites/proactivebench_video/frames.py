"""A video's frames, decoded once with PyAV at the protocol's sampling and stored
content-addressed, so a second model, a re-run or another sample of the same video never
decodes it again.

Frame k is the first decoded frame whose time is >= k / fps (the protocol's rule), scaled so
that its longest side is at most `frame_size`, and encoded by FFmpeg's own encoders through
PyAV: JPEG (mjpeg) by default, PNG on request. JPEG because requests carry up to `frame_window`
images per step for hundreds of steps: a 384 px JPEG is a few tens of kB where the same PNG is
several times that, and providers bill images by their pixel size, not their bytes, so the
smaller file changes no token count. PNG is lossless, for users who want the exact pixels.

Layout under the folder given (the store wiring comes later): `<key[:2]>/<key>/` holding
`frame-<k>.<ext>` and `frames.json`, the key being the sha256 of the video's sha256, the
sampling settings and the decoder (PyAV's and FFmpeg's versions). A set is built in a temporary
folder beside it and renamed into place whole, so a crash leaves either nothing or a complete
set; frames are written as they are decoded, never all held in memory (decoding.py decodes).
A set read back keeps its frames' times, sizes and hashes only: a frame's file is read when a
request sends it (Frame.image).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import av

from ...providers.content import ImagePart
from .decoding import (EXTENSIONS, SkippedTooMuch, VideoDecodeError, _decode_into, _Encoder,
                       _write_synced)
from .protocol import StreamingSettings

__all__ = ["Frame", "FrameSet", "SkippedTooMuch", "VideoDecodeError", "stored_frames",
           "_Encoder", "_decode_into"]

MANIFEST = "frames.json"
LAYOUT_VERSION = 1


@dataclass(frozen=True)
class Frame:
    """One sampled frame as stored."""

    index: int
    """k: the frame sampled at time k / fps."""
    time: float
    """The decoded frame's own time (s), >= k / fps."""
    path: Path
    """Its encoded image file."""
    width: int
    height: int
    sha256: str
    """Its encoded bytes' hash, as the manifest records it."""

    def image(self) -> ImagePart:
        """The frame as a message's image, its file read only when the request is sent."""
        media_type = "image/jpeg" if self.path.suffix == ".jpg" else "image/png"
        return ImagePart.stored(self.path, media_type, self.sha256, (self.width, self.height))


@dataclass(frozen=True)
class FrameSet:
    """A video's stored frames: their times, sizes and hashes in compact arrays (about 40 bytes
    a frame, so that a process may remember every video of a corpus), each Frame made when
    asked for."""

    key: str
    """The content address: sha256 of `record`."""
    record: dict[str, Any]
    """What the key covers: the video's sha256, the sampling settings, the decoder."""
    folder: Path
    decoded: bool
    """True when this call decoded the video; False when the stored set was reused."""
    times: array = field(repr=False)
    widths: array = field(repr=False)
    heights: array = field(repr=False)
    digests: bytes = field(repr=False)
    """The frames' sha256, 32 bytes each."""
    extension: str
    names: tuple[str, ...] | None = field(default=None, repr=False)
    """The files' names when they are not frame-<k>.<extension> (a manifest made otherwise)."""

    @classmethod
    def of_manifest(cls, folder: Path, key: str, record: dict[str, Any], decoded: bool,
                    entries: list[dict[str, Any]]) -> "FrameSet":
        extension = Path(entries[0]["file"]).suffix.lstrip(".") if entries else "jpg"
        patterned = all(e["index"] == k and e["file"] == f"frame-{k:06d}.{extension}"
                        for k, e in enumerate(entries))
        return cls(key=key, record=record, folder=folder, decoded=decoded,
                   times=array("d", (e["time"] for e in entries)),
                   widths=array("l", (e["width"] for e in entries)),
                   heights=array("l", (e["height"] for e in entries)),
                   digests=b"".join(bytes.fromhex(e["sha256"]) for e in entries),
                   extension=extension,
                   names=None if patterned else tuple(e["file"] for e in entries))

    def __len__(self) -> int:
        return len(self.times)

    def _at(self, position: int) -> Frame:
        name = self.names[position] if self.names is not None else \
            f"frame-{position:06d}.{self.extension}"
        return Frame(index=position,  # the manifest lists frame k at position k
                     time=self.times[position], path=self.folder / name,
                     width=self.widths[position], height=self.heights[position],
                     sha256=self.digests[32 * position:32 * position + 32].hex())

    @property
    def frames(self) -> tuple[Frame, ...]:
        """Frame k at position k."""
        return tuple(self._at(position) for position in range(len(self)))

    def frame(self, index: int) -> Frame:
        """Frame `index`, or the last one when the video ended before its sampling time
        (a duration in anno.json longer than the file)."""
        return self._at(min(index, len(self) - 1))

    def image(self, index: int) -> ImagePart:
        """`frame(index).image()`, made without the Frame (a chat makes one a step)."""
        position = min(index, len(self) - 1)
        name = self.names[position] if self.names is not None else \
            f"frame-{position:06d}.{self.extension}"
        media_type = "image/jpeg" if os.path.splitext(name)[1] == ".jpg" else "image/png"
        return ImagePart(None, media_type, self.digests[32 * position:32 * position + 32].hex(),
                         self.folder / name, (self.widths[position], self.heights[position]))

    def time(self, index: int) -> float:
        """Frame `index`'s time (as `frame(index).time`)."""
        return self.times[min(index, len(self) - 1)]


def decoder_versions() -> dict[str, str]:
    """The decoder's identity, part of every key: a new FFmpeg may decode or scale differently."""
    return {"pyav": av.__version__, "ffmpeg": str(av.ffmpeg_version_info)}


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    try:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except OSError as exc:
        raise VideoDecodeError(path, exc.strerror or type(exc).__name__) from None
    return digest.hexdigest()


def frames_record(video_sha256: str, settings: StreamingSettings) -> dict[str, Any]:
    """What a frame set's key covers; the chat settings (window, silence marker) are not in it,
    as they change no frame."""
    return {"layout": LAYOUT_VERSION, "video_sha256": video_sha256, "fps": settings.fps,
            "frame_size": settings.frame_size, "frame_format": settings.frame_format,
            "jpeg_quality": settings.jpeg_quality if settings.frame_format == "jpeg" else None,
            "decoder": decoder_versions()}


def frames_key(record: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()


def _load(final: Path, key: str, record: dict[str, Any], decoded: bool) -> FrameSet:
    entries = json.loads((final / MANIFEST).read_text(encoding="utf-8"))["frames"]
    return FrameSet.of_manifest(final, key, record, decoded, entries)


LEFTOVER_AGE_S = 3600.0
"""A building folder this old was left by a killed process (a 360-s clip decodes in seconds),
not one still at work."""


def _remove_leftovers(parent: Path, key: str) -> None:
    """Remove what killed builds of this key left (the store's gc lists artifacts only)."""
    cut = time.time() - LEFTOVER_AGE_S
    for leftover in parent.glob(f".{key}.*.tmp"):
        try:
            if leftover.stat().st_mtime < cut:
                shutil.rmtree(leftover, ignore_errors=True)
        except OSError:
            continue  # removed by another process meanwhile


def stored_frames(video: Path, settings: StreamingSettings, folder: Path, *,
                  video_sha256: str | None = None) -> FrameSet:
    """The video's frames at the settings' sampling: from `folder` when stored, else decoded
    once and stored. `video_sha256` spares hashing the file again when it is known. Raises
    VideoDecodeError for a video that cannot be read or decoded."""
    video, folder = Path(video), Path(folder)
    record = frames_record(video_sha256 or file_sha256(video), settings)
    key = frames_key(record)
    final = folder / key[:2] / key
    if (final / MANIFEST).is_file():
        return _load(final, key, record, decoded=False)
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_leftovers(final.parent, key)
    # A dot and .tmp, as the store's temporary files: gc recognises what a crash left.
    building = Path(tempfile.mkdtemp(prefix=f".{key}.", suffix=".tmp", dir=final.parent))
    try:
        entries = _decode_into(video, building, settings)
        # Written last: a folder holding a manifest holds every frame it lists.
        _write_synced(building / MANIFEST, json.dumps(
            {"record": record, "frames": entries}, sort_keys=True).encode())
        try:
            os.rename(building, final)
        except OSError:
            if not (final / MANIFEST).is_file():
                raise
            # Another process stored the same set first: its frames are the same.
            return _load(final, key, record, decoded=True)
    finally:
        if building.exists():
            shutil.rmtree(building, ignore_errors=True)
    return _load(final, key, record, decoded=True)
