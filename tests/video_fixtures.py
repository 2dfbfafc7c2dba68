"""Short videos made at test time with PyAV (FFmpeg's own mpeg4 encoder, not the bundled
GPL x264), with the anno.json of the video ProactiveBench's layout that describes them.

Frames are flat colours, so a decoded frame is recognised by the colour of its centre; a
"shape" is a coloured square in the middle of a grey picture. No numpy: pixels are written to
and read from PyAV's planes as bytes.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

import av

WIDTH, HEIGHT = 64, 48
GREY, RED, GREEN, BLUE = (128, 128, 128), (230, 30, 30), (30, 200, 30), (30, 30, 230)
Colour = tuple[int, int, int]


def picture(background: Colour, square: Colour | None = None) -> av.VideoFrame:
    """A frame of the background colour with a centred square (half the height) of `square`."""
    frame = av.VideoFrame(WIDTH, HEIGHT, "rgb24")
    plane = frame.planes[0]
    side = HEIGHT // 2
    left, top = (WIDTH - side) // 2, (HEIGHT - side) // 2
    rows = []
    for y in range(HEIGHT):
        row = bytearray(bytes(background) * WIDTH)
        if square is not None and top <= y < top + side:
            row[3 * left:3 * (left + side)] = bytes(square) * side
        rows.append(bytes(row) + b"\0" * (plane.line_size - 3 * WIDTH))
    plane.update(b"".join(rows))
    return frame


def write_video(path: Path, frame_at: Callable[[float], av.VideoFrame], seconds: float, *,
                rate: int = 10, offset_ticks: int = 0, ticks_per_frame: int = 1) -> Path:
    """An mpeg4 video of `seconds` at `rate` frames per second; frame i is stamped at
    (offset_ticks + i * ticks_per_frame) / (rate * ticks_per_frame) s and shows
    frame_at(its time)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    timebase = rate * ticks_per_frame
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=timebase)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "yuv420p"
        stream.codec_context.qmax = 4  # near-flat colours come through within a few levels
        i = 0
        while (ticks := offset_ticks + i * ticks_per_frame) < seconds * timebase:
            frame = frame_at(ticks / timebase).reformat(format="yuv420p")
            frame.pts = ticks
            container.mux(stream.encode(frame))
            i += 1
        container.mux(stream.encode(None))
    return path


def shape_from(second: float, colour: Colour) -> Callable[[float], av.VideoFrame]:
    """Grey until `second`, then a square of `colour`."""
    return lambda t: picture(GREY, colour if t >= second else None)


def two_events(t: float) -> av.VideoFrame:
    """A green square over [2, 5), a blue one over [4, 7) (blue drawn over green as the
    background when both show): events whose windows overlap."""
    if 4 <= t < 7:
        return picture(GREEN if t < 5 else GREY, BLUE)
    return picture(GREY, GREEN if 2 <= t < 5 else None)


def clock_level(t: float) -> int:
    """The grey level `grey_clock` paints at time t (up to 15 s): 20 per tenth of a second."""
    return min(250, 20 + round(t * 10) * 2)


def grey_clock(t: float) -> av.VideoFrame:
    """A flat grey whose level tells the frame's time (clock_level): which frame was taken is
    read back from its colour."""
    level = clock_level(t)
    return picture((level, level, level))


def centre_colour(image: Path | av.VideoFrame) -> Colour:
    """The RGB colour at the centre of an image file (decoded with PyAV) or a frame."""
    if isinstance(image, Path):
        with av.open(str(image)) as container:
            image = next(container.decode(video=0))
    rgb = image.reformat(format="rgb24")
    plane = rgb.planes[0]
    offset = (rgb.height // 2) * plane.line_size + (rgb.width // 2) * 3
    data = bytes(plane)[offset:offset + 3]
    return data[0], data[1], data[2]


def near(colour: Colour, expected: Colour, tolerance: int = 24) -> bool:
    return all(abs(a - b) <= tolerance for a, b in zip(colour, expected))


def gold(content: str, related: tuple[float, float], reply: tuple[float, float]) -> dict:
    return {"role": "assistant", "content": content, "related_timespan": list(related),
            "reply_timespan": list(reply)}


def sample(video: str, question_id: str, question: str, duration: float,
           answers: Sequence[dict], subtitles: Sequence[tuple[float, str]] = ()) -> dict:
    conversation = [{"role": "user", "content": question, "time": 0}]
    conversation += [{"role": "user", "content": f"Subtitle: {text}", "time": time}
                     for time, text in subtitles]
    return {"video": video, "question_id": question_id, "conversation": conversation,
            "answer": list(answers), "duration": duration}


def write_corpus(root: Path) -> Path:
    """A corpus of four parts, one sample each: WEB a red square appearing at 3 s; EGO two
    overlapping events; TV a blue square at 2 s with subtitle turns; VAD a late event (a
    green square at 9 s of 10 s)."""
    write_video(root / "WEB" / "shape.mp4", shape_from(3, RED), 6)
    write_video(root / "EGO" / "events.mp4", two_events, 8)
    write_video(root / "TV" / "videos" / "show.mp4", shape_from(2, BLUE), 5)
    write_video(root / "VAD" / "late.mp4", shape_from(9, GREEN), 10)
    annotations = {
        "WEB": [sample("shape.mp4", "web-1", "What appears in the middle?", 6.0,
                       [gold("A red square", (3, 6), (3, 6))])],
        "EGO": [sample("events.mp4", "ego-1", "Tell me each square that appears.", 8.0,
                       [gold("A green square", (2, 5), (2, 6)),
                        gold("A blue square", (4, 7), (4, 8))])],
        "TV": [sample("show.mp4", "tv-1%Q1", "What colour is the square Ann mentions?", 5.0,
                      [gold("Blue", (2, 2.5), (2, 3.5))],
                      subtitles=[(0.352, "(Ann:)Watch the middle."), (0.9, "(Bob:)Where?"),
                                 (2.0, "(Ann:)There!"), (4.6, "(Bob:)Gone.")])],
        "VAD": [sample("late.mp4", "vad-1", "Report anything unusual.", 10.0,
                       [gold("A green square appears", (9, 10), (9, 10))])],
    }
    for part, samples in annotations.items():
        (root / part / "anno.json").write_text(json.dumps(samples), encoding="utf-8")
    return root
