"""Decoding cost of the video ProactiveBench at an EGO clip's size: 360 s, 360 steps.

Run by hand from the repository root (not part of the tests; needs nothing but PyAV):

    .venv/bin/python benchmarks/video_frames.py [WIDTH HEIGHT FPS] [--noise]

It writes a 360 s mpeg4 video (640x360 at 30 fps by default; content changing every frame, so
that no frame is a copy: flat shades and a moving square, which JPEG compresses far better than
real footage, or with --noise random pixels, which it compresses far worse: a real clip's frame
sizes lie between the two), then in a child process decodes it once into stored frames at the
default protocol (1 fps, 384 px JPEG) and prints the wall time, the CPU time per step, the
child's peak memory, the frame sizes and the image bytes a request carries with the default
window (base64, as a data URL sends them); then the time of a second call, which decodes
nothing.
"""

from __future__ import annotations

import multiprocessing
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import av

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from proactflow.suites.proactivebench_video.frames import stored_frames  # noqa: E402
from proactflow.suites.proactivebench_video.protocol import StreamingSettings  # noqa: E402

SECONDS = 360


def write_clip(path: Path, width: int, height: int, fps: int, noise: bool) -> None:
    grain = [os.urandom(width * height) for _ in range(7)] if noise else []
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        stream.bit_rate = 1_500_000
        side = height // 4
        for i in range(SECONDS * fps):
            frame = av.VideoFrame(width, height, "yuv420p")
            luma, blue, red = frame.planes
            shade = (i // fps * 37) % 200 + 20
            row = bytearray([shade]) * luma.line_size
            left = (i * 3) % (width - side)
            row[left:left + side] = bytes([255 - shade]) * side
            luma.update(bytes(row) * height if not noise else b"".join(
                grain[i % 7][y * width:(y + 1) * width] + bytes(luma.line_size - width)
                for y in range(height)))
            blue.update(bytes([(i * 5) % 256]) * (blue.line_size * (height // 2)))
            red.update(bytes([128]) * (red.line_size * (height // 2)))
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))


def decode(video: Path, store: Path, result: "multiprocessing.Queue[tuple]") -> None:
    wall, cpu = time.perf_counter(), time.process_time()
    stored = stored_frames(video, StreamingSettings(), store)
    result.put((time.perf_counter() - wall, time.process_time() - cpu, len(stored.frames),
                [frame.path.stat().st_size for frame in stored.frames],
                (stored.frames[0].width, stored.frames[0].height)))


def decoded_apart(video: Path, store: Path) -> tuple:
    """`decode` run in a spawned process of its own, so that its CPU and peak memory are the
    decoding's alone: (wall s, CPU s, frames, each frame's file size, (width, height))."""
    context = multiprocessing.get_context("spawn")
    result = context.Queue()
    child = context.Process(target=decode, args=(video, store, result))
    child.start()
    got = result.get()
    child.join()
    return got


def main() -> None:
    arguments = [a for a in sys.argv[1:] if a != "--noise"]
    noise = "--noise" in sys.argv[1:]
    width, height, fps = (int(v) for v in arguments) if arguments else (640, 360, 30)
    settings = StreamingSettings()
    with tempfile.TemporaryDirectory() as folder:
        video = Path(folder) / "clip.mp4"
        started = time.perf_counter()
        write_clip(video, width, height, fps, noise)
        print(f"clip: {SECONDS} s {width}x{height} at {fps} fps{' of noise' * noise}, "
              f"{video.stat().st_size / 1e6:.1f} MB, written in "
              f"{time.perf_counter() - started:.1f} s")
        wall, cpu, count, sizes, size = decoded_apart(video, Path(folder) / "store")
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        window = settings.frame_window or count
        recent = sizes[-window:]
        print(f"first decode: {wall:.2f} s wall, {cpu:.2f} s CPU, {1000 * cpu / count:.1f} ms "
              f"CPU per step, peak memory of the decoding process {peak:.0f} MB")
        print(f"frames: {count} at {size[0]}x{size[1]}, JPEG {sum(sizes) / count / 1e3:.1f} kB "
              f"on average, {sum(sizes) / 1e6:.2f} MB in all")
        print(f"a late step's request carries {len(recent)} frames: "
              f"{sum(4 * ((s + 2) // 3) for s in recent) / 1e6:.2f} MB of base64 images")
        started = time.perf_counter()
        again = stored_frames(video, settings, Path(folder) / "store")
        print(f"second call: {1000 * (time.perf_counter() - started):.0f} ms (hashing the "
              f"video included), decoded: {again.decoded}")


if __name__ == "__main__":
    main()
