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
set; frames are written as they are decoded, never all held in memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

import av

from .protocol import StreamingSettings

MANIFEST = "frames.json"
LAYOUT_VERSION = 1
_EXTENSIONS = {"jpeg": "jpg", "png": "png"}


class VideoDecodeError(Exception):
    """A video that cannot be decoded (missing, corrupt, no video stream, no frame): the suite
    turns it into an error row for each of its samples."""

    def __init__(self, video: Path | str, reason: str):
        self.video, self.reason = str(video), reason
        super().__init__(f"{video}: cannot decode: {reason}")


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


@dataclass(frozen=True)
class FrameSet:
    """A video's stored frames."""

    key: str
    """The content address: sha256 of `record`."""
    record: dict[str, Any]
    """What the key covers: the video's sha256, the sampling settings, the decoder."""
    frames: tuple[Frame, ...]
    """Frame k at position k."""
    decoded: bool
    """True when this call decoded the video; False when the stored set was reused."""

    def frame(self, index: int) -> Frame:
        """Frame `index`, or the last one when the video ended before its sampling time
        (a duration in anno.json longer than the file)."""
        return self.frames[min(index, len(self.frames) - 1)]


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


def _scaled(width: int, height: int, longest: int) -> tuple[int, int]:
    scale = min(1.0, longest / max(width, height))
    # Even sides: mjpeg's 4:2:0 chroma needs them, and PNG does not mind.
    return max(2, round(width * scale) // 2 * 2), max(2, round(height * scale) // 2 * 2)


def _sampled(container: Any, fps: float) -> Iterator[tuple[int, Any]]:
    """(k, frame) for each sampling time k / fps: the first decoded frame at or after it. A
    frame standing for several sampling times (a video slower than fps) is yielded for each."""
    stream = container.streams.video[0]
    stream.thread_type = "AUTO"
    k = 0
    for frame in container.decode(stream):
        if frame.time is None:
            continue
        while frame.time >= k / fps - 1e-6:
            yield k, frame
            k += 1


def _encoder(settings: StreamingSettings, width: int, height: int) -> Any:
    if settings.frame_format == "jpeg":
        codec = av.CodecContext.create("mjpeg", "w")
        codec.pix_fmt = "yuvj420p"
        # FFmpeg's qscale (2 best .. 31 worst) from the 1-100 quality scale.
        codec.qmin = codec.qmax = max(2, min(31, round(31 - (settings.jpeg_quality - 1)
                                                       * 29 / 99)))
    else:
        codec = av.CodecContext.create("png", "w")
        codec.pix_fmt = "rgb24"
    codec.width, codec.height = width, height
    codec.time_base = Fraction(1, 1)
    return codec


class _Encoder:
    """Encodes frames of one size into image files; made for the video's first frame (every
    frame of a stream has its size), reused for the rest."""

    def __init__(self, settings: StreamingSettings, width: int, height: int):
        self.settings = settings
        self.width, self.height = _scaled(width, height, settings.frame_size)
        self.codec = _encoder(settings, self.width, self.height)

    def encode(self, frame: Any, index: int) -> bytes:
        image = frame.reformat(width=self.width, height=self.height, format=self.codec.pix_fmt)
        # PyAV rescales a frame's pts from its time base to the encoder's, which rejects a pts
        # that does not grow: stamp each frame in the encoder's own time base.
        image.time_base, image.pts = self.codec.time_base, index
        # mjpeg and png are intra-only: each frame comes out as one packet at once.
        return b"".join(bytes(packet) for packet in self.codec.encode(image))


def _decode_into(video: Path, folder: Path, settings: StreamingSettings) -> list[dict[str, Any]]:
    extension = _EXTENSIONS[settings.frame_format]
    entries: list[dict[str, Any]] = []
    encoder: _Encoder | None = None
    try:
        with av.open(str(video)) as container:
            if not container.streams.video:
                raise VideoDecodeError(video, "no video stream")
            for k, frame in _sampled(container, settings.fps):
                encoder = encoder or _Encoder(settings, frame.width, frame.height)
                data = encoder.encode(frame, k)
                if not data:
                    raise VideoDecodeError(video, f"the {settings.frame_format} encoder gave "
                                                  f"no image for frame {k}")
                name = f"frame-{k:06d}.{extension}"
                _write_synced(folder / name, data)
                entries.append({"index": k, "time": float(frame.time), "file": name,
                                "width": encoder.width, "height": encoder.height,
                                "sha256": hashlib.sha256(data).hexdigest()})
    except av.FFmpegError as exc:
        raise VideoDecodeError(video, str(exc)) from None
    if not entries:
        raise VideoDecodeError(video, "no decodable frame")
    return entries


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def _load(final: Path, key: str, record: dict[str, Any], decoded: bool) -> FrameSet:
    entries = json.loads((final / MANIFEST).read_text(encoding="utf-8"))["frames"]
    return FrameSet(key=key, record=record, decoded=decoded, frames=tuple(
        Frame(index=e["index"], time=e["time"], path=final / e["file"], width=e["width"],
              height=e["height"]) for e in entries))


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
