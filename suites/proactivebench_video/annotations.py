"""The video ProactiveBench's annotations as typed samples: `<PART>/anno.json` of each part.

The official data is not on a hub proactflow can pin, so the user points `--corpus` at a folder
with the official layout: one folder per part holding `anno.json` (a JSON list of samples) and
the videos it names. Where inside the part folder the videos sit is not documented by what could
be read; both `<PART>/<video>` and `<PART>/videos/<video>` are accepted. Every problem is one
line naming the file, the sample index and the field.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from ...common.errors import UserError

PARTS = ("WEB", "EGO", "TV", "VAD")
ANNOTATION_FILE = "anno.json"
VIDEO_FOLDERS = ("", "videos")
"""Where a sample's video is looked for inside its part folder, in this order."""
SOURCE = ("the official repository, github.com/yellow-binary-tree/ProactiveVideoQA (formerly "
          "ProactiveBench)")


class UserTurn(BaseModel):
    """A user turn after the question: for TV, a subtitle line ("Subtitle: (Name:)...")."""

    model_config = ConfigDict(frozen=True)

    content: str = Field(description="The turn's text as the annotation holds it.")
    time: float = Field(ge=0, description="When it is spoken, in seconds from the video's start.")


class GoldTurn(BaseModel):
    """A gold assistant turn: the answer and when it may be given."""

    model_config = ConfigDict(frozen=True)

    content: str = Field(description="The gold answer the judge compares replies with.")
    related_start: float = Field(description="related_timespan[0]: the evidence starts (s).")
    related_end: float = Field(description=(
        "related_timespan[1]: the evidence ends (s); a later reply scoring lower than the last "
        "one by then is deleted (PAUC's late-lower rule)."))
    reply_start: float = Field(description="reply_timespan[0]: PAUC's window starts (s).")
    reply_end: float = Field(description="reply_timespan[1]: PAUC's window ends (s, inclusive).")


class VideoSample(BaseModel):
    """One sample: a question about a video, asked at its start, and the gold turns."""

    model_config = ConfigDict(frozen=True)

    part: str = Field(description="WEB, EGO, TV or VAD: the folder it was read from.")
    index: int = Field(ge=0, description="0-based position in its part's anno.json.")
    video: str = Field(description="The video's file name as anno.json names it.")
    question_id: str = Field(description="The sample's id (TV's end in %Q<n>).")
    question: str = Field(description="conversation[0].content: the question, asked at time 0.")
    duration: float = Field(gt=0, description="The video's duration in seconds.")
    user_turns: tuple[UserTurn, ...] = Field(description=(
        "conversation[1:]: later user turns (TV's subtitles), in the file's order."))
    answers: tuple[GoldTurn, ...] = Field(min_length=1, description="The gold turns.")
    extras_json: str = Field(description=(
        "The sample's other keys (EGO type, VAD num_captions, TV frame and audio) as JSON text."))

    @property
    def sample_id(self) -> str:
        """Unique across parts: question_id alone may repeat between parts."""
        return f"{self.part}/{self.question_id}"


_KNOWN_KEYS = {"video", "question_id", "duration", "conversation", "answer"}


class _SampleProblem(Exception):
    def __init__(self, field: str, problem: str):
        super().__init__(f"field {field}: {problem}")


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise _SampleProblem(field, f"expected a number, got {str(value)[:40]!r}")
    return float(value)


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise _SampleProblem(field, f"expected a string, got {str(value)[:40]!r}")
    return value


def _span(value: Any, field: str) -> tuple[float, float]:
    if not isinstance(value, list) or len(value) != 2:
        raise _SampleProblem(field, "expected a list [start, end] of two numbers")
    start, end = _number(value[0], f"{field}[0]"), _number(value[1], f"{field}[1]")
    if not 0 <= start <= end:
        raise _SampleProblem(field, f"expected 0 <= start <= end, got [{start}, {end}]")
    return start, end


def _sample(item: Any, part: str, index: int) -> VideoSample:
    if not isinstance(item, dict):
        raise _SampleProblem("(sample)", "expected an object")
    for key in ("video", "question_id", "duration", "conversation", "answer"):
        if key not in item:
            raise _SampleProblem(key, "missing")
    duration = _number(item["duration"], "duration")
    if duration <= 0:
        raise _SampleProblem("duration", f"expected a positive number, got {duration}")
    conversation = item["conversation"]
    if not isinstance(conversation, list) or not conversation:
        raise _SampleProblem("conversation", "expected a non-empty list of user turns")
    turns = []
    for n, turn in enumerate(conversation):
        where = f"conversation[{n}]"
        if not isinstance(turn, dict):
            raise _SampleProblem(where, "expected an object")
        if turn.get("role") != "user":
            raise _SampleProblem(f"{where}.role", f"expected \"user\", got {turn.get('role')!r}")
        time = _number(turn.get("time"), f"{where}.time")
        if time < 0:
            raise _SampleProblem(f"{where}.time", f"expected >= 0, got {time}")
        turns.append(UserTurn(content=_text(turn.get("content"), f"{where}.content"), time=time))
    answers = item["answer"]
    if not isinstance(answers, list) or not answers:
        raise _SampleProblem("answer", "expected a non-empty list of gold turns")
    gold = []
    for n, turn in enumerate(answers):
        where = f"answer[{n}]"
        if not isinstance(turn, dict):
            raise _SampleProblem(where, "expected an object")
        related = _span(turn.get("related_timespan"), f"{where}.related_timespan")
        reply = _span(turn.get("reply_timespan"), f"{where}.reply_timespan")
        gold.append(GoldTurn(content=_text(turn.get("content"), f"{where}.content"),
                             related_start=related[0], related_end=related[1],
                             reply_start=reply[0], reply_end=reply[1]))
    extras = {key: value for key, value in item.items() if key not in _KNOWN_KEYS}
    return VideoSample(
        part=part, index=index, video=_text(item["video"], "video"),
        question_id=_text(item["question_id"], "question_id"), question=turns[0].content,
        duration=duration, user_turns=tuple(turns[1:]), answers=tuple(gold),
        extras_json=json.dumps(extras, ensure_ascii=False, sort_keys=True))


def parse_annotations(data: bytes, source: str, part: str) -> list[VideoSample]:
    """The samples of one anno.json's bytes; `source` names the file in errors."""
    try:
        raw = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise UserError(f"{source}: not valid UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise UserError(f"{source}: invalid JSON ({exc.msg} at line {exc.lineno} column "
                        f"{exc.colno})") from None
    if not isinstance(raw, list) or not raw:
        raise UserError(f"{source}: expected a non-empty JSON list of samples")
    samples: list[VideoSample] = []
    first_index: dict[str, int] = {}
    for index, item in enumerate(raw):
        try:
            sample = _sample(item, part, index)
        except _SampleProblem as exc:
            raise UserError(f"{source}: sample {index} {exc}") from None
        if sample.question_id in first_index:
            # The id keys the sample's rows and its bootstrap unit: two would merge.
            raise UserError(f"{source}: sample {index} field question_id: "
                            f"{sample.question_id!r} is also sample "
                            f"{first_index[sample.question_id]}'s")
        first_index[sample.question_id] = index
        samples.append(sample)
    return samples


def parse_parts(value: str | None) -> tuple[str, ...]:
    """--parts: comma-separated part names (any case, repeats ignored), all four by default."""
    if value is None or not value.strip():
        return PARTS
    parts: list[str] = []
    for name in (piece.strip().upper() for piece in value.split(",")):
        if name not in PARTS:
            raise UserError(f"--parts: unknown part {name or '(empty)'!r}; the parts are "
                            f"{','.join(PARTS)}")
        if name not in parts:
            parts.append(name)
    return tuple(parts)


def require_corpus(corpus: str | Path | None) -> Path:
    """The --corpus folder, or the one-line error saying where the data is published."""
    if corpus is None or not str(corpus).strip():
        raise UserError("--suite proactivebench-video needs --corpus DIR: a folder holding "
                        "<PART>/anno.json and the videos they name, as published in "
                        f"{SOURCE}; it is on no hub proactflow can pin")
    folder = Path(corpus).expanduser()
    if not folder.is_dir():
        raise UserError(f"--corpus {folder}: not a folder (expected <PART>/anno.json and the "
                        f"videos, as published in {SOURCE})")
    return folder


def video_path(corpus: Path, sample: VideoSample) -> Path | None:
    """The sample's video file in the corpus, None when it is in none of VIDEO_FOLDERS."""
    for folder in VIDEO_FOLDERS:
        path = corpus / sample.part / folder / sample.video
        if path.is_file():
            return path
    return None


def read_corpus(corpus: str | Path | None, parts: tuple[str, ...] = PARTS, *,
                check_videos: bool = True) -> list[VideoSample]:
    """The samples of the chosen parts, part by part in the given order. With `check_videos`,
    a sample whose video is missing is a UserError before any call is paid for."""
    folder = require_corpus(corpus)
    samples: list[VideoSample] = []
    for part in parts:
        path = folder / part / ANNOTATION_FILE
        if not path.is_file():
            raise UserError(f"{folder} has no {part}/{ANNOTATION_FILE} (the corpus holds one "
                            f"folder per part: {', '.join(PARTS)}; choose some with --parts)")
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise UserError(f"cannot read {path}: {exc.strerror}") from None
        part_samples = parse_annotations(data, str(path), part)
        if check_videos:
            missing = [s for s in part_samples if video_path(folder, s) is None]
            if missing:
                raise UserError(f"{path}: sample {missing[0].index} field video: "
                                f"{missing[0].video} is not in {folder / part} (nor in its "
                                f"videos/ folder); {len(missing)} of {len(part_samples)} "
                                "videos are missing")
        samples += part_samples
    return samples
