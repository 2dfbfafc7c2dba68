"""Each episode's chat, grown by one step's work: a step's request re-sends the whole chat (its
texts and outputs, and the window's frames, as protocol.chat_turns says), but nothing of it is
built again. The next step adds the last output and its own user turn, and rebuilds only the
user turns whose frames have just left the window; a frame's image part is made once while it
stays in the window, its file read and encoded only when a request is sent
(providers.content's cache of stored images' data URLs). What a request computes over its
whole chat (its per-call cache key's material and JSON, its estimated tokens, the plan's prompt
cache shape) is kept per message as the chat grows (providers.growing): a step builds these for
its new and rebuilt messages only, and its key's hashing goes on from the prefix the next step
shares (a kept sha256 copy), not from the chat's start.

A chat is found again from the step rows the seam hands back: the list of earlier steps only
grows, so the chat built for the request of step s is the one whose last step row is the
second-to-last of step s + 1's list. A chat that is not found (a new process, or more episodes
at once than the chats kept) is grown from the first step: the same steps, so the same chat.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Hashable

from ...providers.content import Content, ImagePart
from ...providers.growing import GrowingMessages
from ..base import Step
from .annotations import VideoSample
from .frames import FrameSet
from .protocol import StepTurn, StreamingSettings, frames_in_chat, step_turn

LEFT_WINDOW = "(earlier frames no longer shown)"
"""The text of an earlier step's user turn that has neither frames left in the window nor
subtitles: a chat message may not be empty."""

KEPT = 16384
"""Chats kept for the episodes under way at once (the plan walks every episode of a corpus in
step); one holds its texts and the window's image parts, never images' bytes."""


class EpisodeChat:
    """The chat of one episode up to its latest step's user turn."""

    def __init__(self, video: VideoSample, frames: FrameSet, system: str,
                 settings: StreamingSettings, identity: Hashable):
        self.video, self.frames, self.settings, self.identity = video, frames, settings, identity
        self.log = GrowingMessages()
        """The messages, with what a request computes over them kept per message."""
        self.log.append("system", system)
        self.steps = 0
        """User turns in the chat: the step asked now is steps - 1."""
        self.shown = range(0)
        """The frames whose images the chat carries."""
        self.images: dict[int, ImagePart] = {}
        self.anchor: Step | None = None
        """The last step row the chat holds the output of (None before the first)."""

    def grow(self, output: str | None) -> None:
        """The output of the step asked last (None before the first step), then the next
        step's user turn, with the user turns whose frames leave the window rebuilt."""
        step = self.steps
        if step:
            assert output is not None, "every earlier step has its output"
            self.log.append("assistant", output)
        shown = frames_in_chat(step, self.settings)
        leaving = range(self.shown.start, min(shown.start, self.shown.stop))
        per_step = self.settings.frames_per_step
        for earlier in sorted({k // per_step for k in leaving}):
            turn = step_turn(self.video, earlier, shown, self.settings)
            self.log.replace(1 + 2 * earlier, "user", self._content(turn))
        for k in leaving:
            self.images.pop(k, None)
        self.shown = shown
        self.log.append("user", self._content(step_turn(self.video, step, shown,
                                                         self.settings)))
        self.steps += 1

    @property
    def messages(self) -> list[tuple[str, Content]]:
        return self.log.messages

    def kept_by_next(self) -> int:
        """Leading messages the next step's request sends again unchanged (the prompt
        cache's prefix): all of them, up to the first user turn whose frames leave the
        window then (rebuilt without them)."""
        upcoming = frames_in_chat(self.steps, self.settings)
        leaving = range(self.shown.start, min(upcoming.start, self.shown.stop))
        if not leaving:
            return len(self.messages)
        return 1 + 2 * (leaving.start // self.settings.frames_per_step)

    def _image(self, k: int) -> ImagePart:
        image = self.images.get(k)
        if image is None:
            image = self.images[k] = self.frames.image(k)
        return image

    def _content(self, turn: StepTurn) -> Content:
        images: list[str | ImagePart] = [self._image(k) for k in turn.frames]
        text = "\n".join(turn.texts)
        if not images:
            return text or LEFT_WINDOW
        return (*images, text) if text else tuple(images)


class EpisodeChats:
    """The chats of the episodes under way, by their last step row."""

    def __init__(self, kept: int = KEPT) -> None:
        self.kept = kept
        self._chats: OrderedDict[int, EpisodeChat] = OrderedDict()
        self._lock = threading.Lock()
        self.grown = 0
        """Steps grown so far (a measure: one per request when every chat is found again)."""

    def chat(self, video: VideoSample, earlier: list[Step], frames: FrameSet, system: str,
             settings: StreamingSettings, identity: Hashable, last: bool) -> EpisodeChat:
        """The chat of step len(earlier)'s request; kept for the next step unless `last`."""
        found = self._found(earlier, identity)
        chat = found or EpisodeChat(video, frames, system, settings, identity)
        if found is None:
            chat.grow(None)
            self.grown += 1
        for _, row in earlier[chat.steps - 1:]:
            chat.grow(row["response"] if row["response"] is not None
                      else settings.silence_marker)  # a step without an answer: silence
            self.grown += 1
        chat.anchor = earlier[-1] if earlier else None
        if chat.anchor is not None and not last:
            with self._lock:
                self._chats[id(chat.anchor)] = chat
                while len(self._chats) > self.kept:
                    self._chats.popitem(last=False)
        return chat

    def _found(self, earlier: list[Step], identity: Hashable) -> EpisodeChat | None:
        if len(earlier) < 2:
            return None
        with self._lock:
            chat = self._chats.pop(id(earlier[-2]), None)
        # The anchor held by the chat keeps its id from being reused by another row.
        if chat is None or chat.anchor is not earlier[-2] or chat.steps != len(earlier) \
                or chat.identity != identity:
            return None
        return chat

    def end(self, earlier: list[Step]) -> None:
        """The episode ended after its last row (its chat is no longer needed)."""
        if len(earlier) >= 2:
            with self._lock:
                self._chats.pop(id(earlier[-2]), None)

    def __len__(self) -> int:
        return len(self._chats)


def chat_identity(sample: dict[str, Any], sample_index: int, system: str, frames: FrameSet,
                  settings: StreamingSettings) -> Hashable:
    """What a chat is made of besides its steps' outputs."""
    return (sample["part"], sample["question_id"], sample["video_sha256"], sample_index,
            system, frames.key, settings)
