"""Decoding a video into its sampled frames, with PyAV: frame k is the first decoded frame whose
time is >= k / fps (the protocol's rule), scaled so that its longest side is at most
`frame_size` and encoded by FFmpeg's own encoders (frames.py says which and why); each image is
written to its file as it is made, never all held in memory.

Only what a sampling time can take is decoded: the packets between keyframes whose frames all
come before the next sampling time are never sent to the decoder (_ShownFrames), so a 30 fps
video sampled at 1 fps decodes a fraction of its frames, and each frame taken is the one
decoding every frame in order gives.
"""

from __future__ import annotations

import hashlib
import math
import os
from fractions import Fraction
from pathlib import Path
from typing import Any, Iterator

import av
from av.video.reformatter import VideoReformatter

from .protocol import StreamingSettings

EXTENSIONS = {"jpeg": "jpg", "png": "png"}


class VideoDecodeError(Exception):
    """A video that cannot be decoded (missing, corrupt, no video stream, no frame): the suite
    turns it into an error row for each of its samples."""

    def __init__(self, video: Path | str, reason: str):
        self.video, self.reason = str(video), reason
        super().__init__(f"{video}: cannot decode: {reason}")


def _scaled(width: int, height: int, longest: int) -> tuple[int, int]:
    scale = min(1.0, longest / max(width, height))
    # Even sides: mjpeg's 4:2:0 chroma needs them, and PNG does not mind.
    return max(2, round(width * scale) // 2 * 2), max(2, round(height * scale) // 2 * 2)


def _sampled(container: Any, fps: float, *, skipping: bool = True
             ) -> Iterator[tuple[int, Any]]:
    """(k, frame) for each sampling time k / fps: the first decoded frame at or after it. A
    frame standing for several sampling times (a video slower than fps) is yielded for each.
    With `skipping`, what no sampling time can take is not decoded (_ShownFrames)."""
    stream = container.streams.video[0]
    # Not frame threads: they hand a frame out a frame per thread late, and the decoder is sent
    # a group's packets until the frame looked for comes out, so each step decoded two more
    # (a 1280x720 30 fps clip: 11.1 ms of CPU a step against 7.0). Threads never lower CPU
    # time; many videos are decoded at once on threads of their own (suite._decode_ahead).
    stream.thread_type = "SLICE"
    sampler = _ShownFrames(stream, fps, skipping)
    group: list[Any] = []
    ahead: list[Any] = []
    for packet in container.demux(stream):
        if not packet.size:
            continue  # the demuxer's closing empty packet: the decoder is drained below
        if packet.is_keyframe and ahead:
            # A group is decoded once the next one is known: whether a decoder can start
            # again at the next keyframe depends on it.
            yield from sampler.decoded(group, restartable=_closed(ahead))
            group, ahead = ahead, []
        ahead.append(packet)
    yield from sampler.decoded(group, restartable=_closed(ahead))
    yield from sampler.decoded(ahead, restartable=True)
    yield from sampler.drained()


class SkippedTooMuch(Exception):
    """A decoder started again at a keyframe gave fewer frames than it was sent packets: the
    stream's keyframes are not all places a decoder can start from (_ShownFrames)."""


def _packet_time(packet: Any) -> float:
    """A packet's time as its frame's (PyAV's Frame.time), +inf when it has none."""
    base = packet.time_base
    if packet.pts is None or base is None:
        return math.inf
    return float(packet.pts) * base.numerator / base.denominator


def _closed(group: list[Any]) -> bool:
    """No frame of the group is shown before its keyframe (no leading picture that needs the
    group before), every packet carrying its time: a decoder may start at its keyframe."""
    start = _packet_time(group[0])
    return start != math.inf and all(_packet_time(p) >= start for p in group[1:])


class _ShownFrames:
    """The rule of _sampled applied to a stream decoded a group of pictures at a time (a
    keyframe and the packets up to the next one), leaving out the packets none of whose frames
    can be taken: the packets of a group from the first one after which every packet's time is
    before the sampling time looked for (a whole group when it ends before it), when the next
    group is closed (_closed). The decoder is then drained (the frames it still holds are taken
    as they would have been) and reset, and starts again at the next keyframe, where every
    frame decoded is the one decoding every frame in order gives; the frames left out are ones
    the rule never takes (their times are before the sampling time looked for). A decoder
    started again that gives fewer frames than it was sent packets raises SkippedTooMuch (the
    caller then decodes every frame). At 1 frame a second of a 30 fps video with a keyframe
    every 12 frames, about one frame in five is decoded."""

    def __init__(self, stream: Any, fps: float, skipping: bool):
        self.codec, self.fps, self.skipping = stream.codec_context, fps, skipping
        self.time_base = stream.time_base
        self.k = 0
        self.reset = False
        """Packets were left out since the decoder was last sent one: it was drained and reset."""
        self.restarted = False
        self.sent = self.received = 0
        """Packets sent and frames received since the decoder was last reset."""

    def _taken(self, frames: list[Any]) -> Iterator[tuple[int, Any]]:
        self.received += len(frames)
        for frame in frames:
            if frame.time is None:
                continue
            while frame.time >= self.k / self.fps - 1e-6:
                yield self.k, frame
                self.k += 1

    def decoded(self, group: list[Any], restartable: bool) -> Iterator[tuple[int, Any]]:
        if not group:
            return
        # latest[i]: the latest time among group[i:].
        latest = [0.0] * len(group)
        running = -math.inf
        for i in range(len(group) - 1, -1, -1):
            running = latest[i] = max(running, _packet_time(group[i]))
        for i, packet in enumerate(group):
            if self.skipping and restartable and latest[i] < self.k / self.fps - 1e-6:
                if not self.reset:
                    yield from self.drained()
                    self.codec.flush_buffers()
                    self.reset = self.restarted = True
                    self.sent = self.received = 0
                return
            self.reset = False
            self.sent += 1
            yield from self._taken(self.codec.decode(packet))

    def drained(self) -> Iterator[tuple[int, Any]]:
        """The frames the decoder still holds (sent an empty packet stamped with the stream's
        time base, as PyAV's demuxer ends a stream, so that they carry their times)."""
        if self.reset:
            return
        closing = av.Packet()
        closing.time_base = self.time_base
        yield from self._taken(self.codec.decode(closing))
        if self.restarted and self.received < self.sent:
            raise SkippedTooMuch(f"{self.sent} packets gave {self.received} frames")


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
        # One scaler for every frame (a frame's own reformat sets FFmpeg's up again each time:
        # half the scaling's CPU at 1280x720); the same scaling, so the same pixels.
        self.scaler = VideoReformatter()

    def encode(self, frame: Any, index: int) -> bytes:
        image = self.scaler.reformat(frame, width=self.width, height=self.height,
                                     format=self.codec.pix_fmt)
        # PyAV rescales a frame's pts from its time base to the encoder's, which rejects a pts
        # that does not grow: stamp each frame in the encoder's own time base.
        image.time_base, image.pts = self.codec.time_base, index
        # mjpeg and png are intra-only: each frame comes out as one packet at once.
        return b"".join(bytes(packet) for packet in self.codec.encode(image))


def _decode_into(video: Path, folder: Path, settings: StreamingSettings) -> list[dict[str, Any]]:
    try:
        try:
            return _decoded_into(video, folder, settings, skipping=True)
        except SkippedTooMuch:
            # Keyframes a decoder cannot start from: every frame decoded, the files rewritten.
            return _decoded_into(video, folder, settings, skipping=False)
    except av.FFmpegError as exc:
        raise VideoDecodeError(video, str(exc)) from None


def _decoded_into(video: Path, folder: Path, settings: StreamingSettings, *,
                  skipping: bool) -> list[dict[str, Any]]:
    extension = EXTENSIONS[settings.frame_format]
    entries: list[dict[str, Any]] = []
    encoder: _Encoder | None = None
    with av.open(str(video)) as container:
        if not container.streams.video:
            raise VideoDecodeError(video, "no video stream")
        for k, frame in _sampled(container, settings.fps, skipping=skipping):
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
    if not entries:
        raise VideoDecodeError(video, "no decodable frame")
    return entries


def _write_synced(path: Path, data: bytes) -> None:
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
