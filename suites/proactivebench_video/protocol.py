"""The streaming protocol of the video ProactiveBench's online models, as settings.

A sample is an episode of steps of `step_seconds` (1 s): step r covers [r, r+1) s; playback
stops after the last gold window. At each step the model gets that step's frame(s) (the first
decoded frame at or after each sampling time) and, for TV, the subtitle turns whose time falls
in the step, in one growing chat with its own earlier outputs (an earlier silence marker stays
as its step's assistant turn); a reply is stamped at its step's end. The ports keep only a
window of recent frames in the chat; the rest of the chat (texts, replies) stays.

Every choice is a setting whose default is the one the ports agree on (the shared facts); what
they leave unsaid (the frame size of online models, the window's length) is a default chosen
here, recorded in every key through `settings_record`. Pure functions, no I/O.
"""

from __future__ import annotations

import math
from typing import Any, Literal, Sequence

from pydantic import BaseModel, ConfigDict, Field

from .annotations import UserTurn, VideoSample
from .pauc import Reply

PROTOCOL_VERSION = 1
"""Bumped when a function below changes what a step holds for the same settings."""


class StreamingSettings(BaseModel):
    """How a video is played to the model under test; every field enters the keys."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fps: float = Field(default=1.0, gt=0, description=(
        "Frames sampled per second of video (the ports' 1 fps)."))
    step_seconds: float = Field(default=1.0, gt=0, description=(
        "Length of a step: the model is asked once per step (the ports' 1 s)."))
    frame_size: int = Field(default=384, ge=16, description=(
        "Longest side of a frame sent, in pixels (never upscaled). The online ports' size is not "
        "known; 384 is the size the offline baselines use."))
    frame_window: int | None = Field(default=32, ge=1, description=(
        "How many of the most recent frames stay in the chat (None: all). The ports keep a "
        "window whose length the facts do not give; 32 frames is about 30 s of context at "
        "1 fps and bounds an EGO request (360 steps) to 32 images."))
    silence_marker: str = Field(default="NO REPLY", min_length=1, description=(
        "What the model outputs to stay silent; such an output is no reply."))
    frame_format: Literal["jpeg", "png"] = Field(default="jpeg", description=(
        "How frames are encoded (frames.py says why JPEG by default)."))
    jpeg_quality: int = Field(default=85, ge=1, le=100, description=(
        "JPEG quality in the usual 1-100 scale (ignored for PNG)."))

    @property
    def frames_per_step(self) -> int:
        count = round(self.fps * self.step_seconds)
        if count < 1 or not math.isclose(count, self.fps * self.step_seconds):
            raise ValueError(f"fps x step_seconds must be a whole number of frames, got "
                             f"{self.fps} x {self.step_seconds}")
        return count


def settings_record(settings: StreamingSettings) -> dict[str, Any]:
    """Everything a key must record about the protocol, JSON-ready."""
    return {"protocol_version": PROTOCOL_VERSION, **settings.model_dump(mode="json")}


def step_count(sample: VideoSample, settings: StreamingSettings) -> int:
    """max(1, min(int(duration), ceil(min(duration, last reply end)))) in steps: the video
    plays until the last gold window ends, never past its end."""
    step = settings.step_seconds
    last_end = max(turn.reply_end for turn in sample.answers)
    # The small tolerance keeps 7.000000001 s (float noise in a file) from adding a step.
    full_steps = math.floor(sample.duration / step + 1e-9)
    needed = math.ceil(min(sample.duration, last_end) / step - 1e-9)
    return max(1, min(full_steps, needed))


def step_span(step: int, settings: StreamingSettings) -> tuple[float, float]:
    """[start, end) of a step, in seconds."""
    return step * settings.step_seconds, (step + 1) * settings.step_seconds


def reply_time(step: int, settings: StreamingSettings) -> float:
    """When a reply given at a step counts as said: the step's end."""
    return step_span(step, settings)[1]


def frame_indices(step: int, settings: StreamingSettings) -> range:
    """The sampled frames a step brings, as indices into the video's sampled frames (frame k is
    the first decoded frame whose time is >= k / fps)."""
    per_step = settings.frames_per_step
    return range(step * per_step, (step + 1) * per_step)


def sampling_time(index: int, settings: StreamingSettings) -> float:
    """The time frame `index` is sampled at: index / fps."""
    return index / settings.fps


def frame_times(step: int, settings: StreamingSettings) -> list[float]:
    """The sampling times of a step's frames."""
    return [sampling_time(k, settings) for k in frame_indices(step, settings)]


def step_user_turns(sample: VideoSample, step: int,
                    settings: StreamingSettings) -> list[UserTurn]:
    """The user turns after the question (TV's subtitles) with time in the step's [start, end),
    in the file's order. A turn at or after the last step's end is never shown."""
    start, end = step_span(step, settings)
    return [turn for turn in sample.user_turns if start <= turn.time < end]


def frames_in_chat(step: int, settings: StreamingSettings) -> range:
    """The frame indices whose images the request of a step carries: the step's own and the
    most recent earlier ones, `frame_window` in all (every frame so far without a window).
    Earlier steps' user turns keep their texts; only their images leave."""
    shown = frame_indices(step, settings).stop
    window = settings.frame_window
    return range(0 if window is None else max(0, shown - window), shown)


def is_silence(output: str, settings: StreamingSettings) -> bool:
    """Whether an output is the silence marker (surrounding blanks and a final full stop
    ignored): it then stays in the chat but is no reply to judge."""
    return output.strip().rstrip(".").strip() == settings.silence_marker


def episode_plan(sample: VideoSample, settings: StreamingSettings) -> dict[str, int]:
    """Counts for the plan printed before a run: steps, frames sampled, images sent (every
    request's frames, with the window)."""
    steps = step_count(sample, settings)
    images = sum(len(frames_in_chat(step, settings)) for step in range(steps))
    return {"steps": steps, "frames": steps * settings.frames_per_step, "images_sent": images}


class StepTurn(BaseModel):
    """A step's user turn in the chat, before the seam turns frames into images."""

    model_config = ConfigDict(frozen=True)

    step: int = Field(ge=0, description="The step it belongs to.")
    texts: tuple[str, ...] = Field(description=(
        "Its texts in order: at step 0 the question first, then the step's user turns "
        "(TV's subtitles) as the annotation holds them."))
    frames: tuple[int, ...] = Field(description=(
        "The frame indices whose images it carries now: its own frames when they are still in "
        "the window, none once they have left it."))


def chat_turns(sample: VideoSample, step: int, outputs: Sequence[str],
               settings: StreamingSettings) -> list[StepTurn | str]:
    """The chat of a step's request after the system prompt (which the seam supplies): for
    every step so far a StepTurn, followed by the model's output of that step (a str, the
    silence marker included) for the earlier steps; `outputs` holds the outputs of steps
    0..step-1."""
    if len(outputs) != step:
        raise ValueError(f"step {step} needs the outputs of the {step} earlier steps, got "
                         f"{len(outputs)}")
    shown = frames_in_chat(step, settings)
    chat: list[StepTurn | str] = []
    for current in range(step + 1):
        chat.append(step_turn(sample, current, shown, settings))
        if current < step:
            chat.append(outputs[current])
    return chat


def step_turn(sample: VideoSample, step: int, shown: range,
              settings: StreamingSettings) -> StepTurn:
    """Step `step`'s user turn in a chat whose images are the frames `shown` (frames_in_chat of
    the step being asked)."""
    texts = [sample.question] if step == 0 else []
    texts += [turn.content for turn in step_user_turns(sample, step, settings)]
    return StepTurn(step=step, texts=tuple(texts), frames=tuple(
        k for k in frame_indices(step, settings) if k in shown))


def replies(outputs: Sequence[str], settings: StreamingSettings) -> list[Reply]:
    """The episode's replies for PAUC: each output that is not the silence marker, stamped at
    its step's end (outputs[r] is step r's)."""
    return [Reply(time=reply_time(step, settings), text=output)
            for step, output in enumerate(outputs) if not is_silence(output, settings)]
