"""A sample's episode as the seam runs it: the request of each 1-s step (the growing chat of
protocol.chat_turns, its frames as images, grown by one step's work in chats.py) and the row of
each step.

Frames come from frames.stored_frames in the store's frame folder: the first request of a video
decodes it (or finds it stored); the frame set (its frames' times and hashes) is then
remembered by this process, so the steps of an episode read image files only, when a request is
sent.
"""

from __future__ import annotations

import functools
import json
import threading
from typing import Any

from ...config.settings import ModelRole
from ...providers.chat import ChatOutcome, ChatRequest
from ...providers.prompt_cache import CacheHint
from ..base import Step
from .annotations import GoldTurn, UserTurn, VideoSample
from .chats import KEPT, LEFT_WINDOW, EpisodeChats, chat_identity
from .frames import FrameSet, VideoDecodeError, stored_frames
from .prompts import SYSTEM, FrameContext, VideoPrompts
from .protocol import (StreamingSettings, frame_indices, frames_in_chat, is_silence, reply_time,
                       step_user_turns)
from .tables import StepRow

__all__ = ["LEFT_WINDOW", "FrameSets", "sample_of", "step_request", "step_row"]


def sample_of(row: dict[str, Any]) -> VideoSample:
    """The protocol's sample back from its samples row (parsed once for the steps that ask
    again: every step of an episode does, twice)."""
    return _parsed(row["part"], row["index"], row["video"], row["question_id"], row["question"],
                   row["duration"], row["user_turns_json"], row["answers_json"],
                   row["extras_json"])


# As many as the chats kept (chats.KEPT): the plan walks every episode of a corpus in step, so a
# smaller cache (256 once) parsed every sample again at every step of a 668-sample corpus, the
# TV samples' subtitles made models each time (half of the full-size plan's CPU).
@functools.lru_cache(maxsize=KEPT)
def _parsed(part: str, index: int, video: str, question_id: str, question: str,
            duration: float, user_turns_json: str, answers_json: str,
            extras_json: str) -> VideoSample:
    return VideoSample(
        part=part, index=index, video=video, question_id=question_id, question=question,
        duration=duration,
        user_turns=tuple(UserTurn(**turn) for turn in json.loads(user_turns_json)),
        answers=tuple(GoldTurn(**turn) for turn in json.loads(answers_json)),
        extras_json=extras_json)


class FrameSets:
    """Each video's frame set, decoded or loaded once per process (or the reason it cannot be
    decoded, so that every step asking again gets the same answer without trying again)."""

    def __init__(self) -> None:
        # By the video's hash alone: the sampling settings are the suite's, and a set stored
        # in another store's folder holds the same frames.
        self._sets: dict[str, FrameSet | VideoDecodeError] = {}
        self._lock = threading.Lock()
        self.decoded = 0
        """Videos decoded by this process (a run whose frames are stored decodes none)."""

    def get(self, row: dict[str, Any], context: FrameContext,
            settings: StreamingSettings) -> FrameSet:
        """Raises VideoDecodeError for a video that cannot be decoded."""
        memo = row["video_sha256"]
        with self._lock:  # one decode of a video even when two episodes show it at once
            found = self._sets.get(memo)
            if isinstance(found, FrameSet):  # every step but a video's first
                return found
            video = context.corpus / row["video_file"]
            if isinstance(found, VideoDecodeError) and found.video != str(video):
                # The same bytes fail the same way, but the error names the file at hand.
                found = self._sets[memo] = VideoDecodeError(video, found.reason)
            if found is None:
                try:
                    found = stored_frames(video, settings,
                                          context.frames, video_sha256=row["video_sha256"])
                    self.decoded += found.decoded
                except VideoDecodeError as exc:
                    found = exc
                self._sets[memo] = found
        if isinstance(found, VideoDecodeError):
            raise found
        return found

    def known(self, row: dict[str, Any]) -> FrameSet | VideoDecodeError | None:
        """What `get` gave for this sample's video (its step's request asked just before)."""
        with self._lock:
            return self._sets.get(row["video_sha256"])


def step_request(sample: dict[str, Any], earlier: list[Step], role: ModelRole,
                 prompts: VideoPrompts, frame_sets: FrameSets, settings: StreamingSettings,
                 sample_index: int, chats: EpisodeChats) -> ChatRequest | None:
    """The request of the next step; None when the video cannot be decoded."""
    assert prompts.context is not None, "the suite's generation prompts carry the context"
    try:
        frames = frame_sets.get(sample, prompts.context, settings)
    except VideoDecodeError:
        return None
    system = prompts[SYSTEM].text
    last = len(earlier) + 1 >= sample["steps"]
    chat = chats.chat(sample_of(sample), earlier, frames, system, settings,
                      chat_identity(sample, sample_index, system, frames, settings), last=last)
    # The episode's next step re-sends this chat (but the turns whose frames leave the
    # window): the prompt cache's prefix, asked for through the hint.
    hint = CacheHint(f"video:{sample['part']}:{sample['question_id']}:"
                     f"{sample['video_sha256'][:16]}:{sample_index}",
                     shared=None if last else chat.kept_by_next(), chain=True)
    return ChatRequest.build(role, chat.messages, sample_index=sample_index, cache=hint,
                             grown=chat.log)


def step_row(sample: dict[str, Any], earlier: list[Step], outcome: ChatOutcome | None,
             role: ModelRole, sample_index: int, frame_sets: FrameSets,
             settings: StreamingSettings) -> StepRow:
    step = len(earlier)
    video = sample_of(sample)
    subtitles = [turn.content for turn in step_user_turns(video, step, settings)]
    common: dict[str, Any] = dict(
        part=sample["part"], question_id=sample["question_id"], step=step,
        sample_index=sample_index, model=role.model, reply_time=reply_time(step, settings),
        subtitles=subtitles)
    frames = frame_sets.known(sample)
    if outcome is None:  # the request was not made: the video cannot be decoded
        return StepRow(**common, status="error", message=str(frames), response=None,
                       silent=None, frame_times=[], images_sent=0, finish_reason=None,
                       prompt_tokens=None, completion_tokens=None, latency_s=None,
                       attempts=0, request_key=None)
    frame_times = [frames.time(k) for k in frame_indices(step, settings)] \
        if isinstance(frames, FrameSet) else []
    response = outcome.content if outcome.ok else None
    return StepRow(**common, status=outcome.status, message=outcome.error, response=response,
                   silent=is_silence(response, settings) if response is not None else None,
                   frame_times=frame_times, images_sent=len(frames_in_chat(step, settings)),
                   finish_reason=outcome.finish_reason, prompt_tokens=outcome.prompt_tokens,
                   completion_tokens=outcome.completion_tokens, latency_s=outcome.latency_s,
                   attempts=outcome.attempts, request_key=outcome.request_key)
