"""The video suite at full size: decoding only what a step shows takes the very frames decoding
every frame takes, and an episode's chat grown step by step is the chat built from scratch,
whose leading messages the next step re-sends as its prompt cache hint says, and whose request
has the key, estimate and prompt cache shape of one built from scratch."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import av
import pytest

import video_fixtures as vf
from proactflow.config.settings import Generation, ModelRole
from proactflow.providers.chat import ChatRequest
from proactflow.providers.content import ImagePart, key_content
from proactflow.providers.prompt_cache import shape_of
from proactflow.suites.proactivebench_video.annotations import read_corpus, video_path
from proactflow.suites.proactivebench_video.chats import LEFT_WINDOW, EpisodeChats
from proactflow.suites.proactivebench_video.decoding import _sampled
from proactflow.suites.proactivebench_video.frames import stored_frames
from proactflow.suites.proactivebench_video.protocol import (StepTurn, StreamingSettings,
                                                             chat_turns, step_count)


def clip(path: Path, codec: str, gop: int, b_frames: int, rate: int = 30,
         seconds: float = 6) -> Path:
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=rate)
        stream.width, stream.height, stream.pix_fmt = vf.WIDTH, vf.HEIGHT, "yuv420p"
        stream.codec_context.gop_size = gop
        stream.codec_context.max_b_frames = b_frames
        for i in range(int(seconds * rate)):
            frame = vf.grey_clock(i / rate / 2).reformat(format="yuv420p")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


def every_frame(video: Path, fps: float) -> list[tuple[int, float, bytes]]:
    """The rule applied to every decoded frame, in order (what was done before skipping)."""
    taken, k = [], 0
    with av.open(str(video)) as container:
        for frame in container.decode(video=0):
            while frame.time is not None and frame.time >= k / fps - 1e-6:
                taken.append((k, frame.time, bytes(frame.reformat(format="rgb24").planes[0])))
                k += 1
    return taken


@pytest.mark.parametrize("codec,gop,b_frames,fps", [
    ("mpeg4", 12, 0, 1.0), ("mpeg4", 5, 0, 2.0), ("mpeg4", 12, 2, 1.0),
    ("mpeg2video", 9, 2, 1.0), ("mpeg4", 90, 0, 1.0)])
def test_frames_left_undecoded_are_never_the_ones_taken(tmp_path, codec, gop, b_frames, fps):
    video = clip(tmp_path / "clip.mp4", codec, gop, b_frames)
    with av.open(str(video)) as container:
        skipped = [(k, frame.time, bytes(frame.reformat(format="rgb24").planes[0]))
                   for k, frame in _sampled(container, fps)]
    assert skipped == every_frame(video, fps)


def test_a_short_group_decodes_fewer_frames(tmp_path, monkeypatch):
    from proactflow.suites.proactivebench_video import decoding
    video = clip(tmp_path / "clip.mp4", "mpeg4", 6, 0)
    decoded = []
    taken = decoding._ShownFrames._taken

    def counting(self, frames):
        decoded.extend(frames)
        return taken(self, frames)

    monkeypatch.setattr(decoding._ShownFrames, "_taken", counting)
    with av.open(str(video)) as container:
        assert [k for k, _ in _sampled(container, 1.0)] == list(range(6))
    assert 6 <= len(decoded) < 180 / 2  # of 180 frames, a keyframe every 6


@pytest.mark.parametrize("settings", [StreamingSettings(), StreamingSettings(frame_window=2),
                                      StreamingSettings(fps=2, frame_window=3),
                                      StreamingSettings(frame_window=None)])
def test_a_grown_chat_is_the_chat_built_from_scratch(tmp_path, settings):
    corpus = vf.write_corpus(tmp_path / "corpus")
    chats = EpisodeChats()
    for sample in read_corpus(corpus):
        frames = stored_frames(video_path(corpus, sample), settings, tmp_path / "store")
        earlier: list = []
        steps = step_count(sample, settings)
        before: list = []  # the previous step's messages, and how many it said the next keeps
        for step in range(steps):
            chat = chats.chat(sample, earlier, frames, "SYSTEM", settings, ("id", sample.part),
                              last=step + 1 >= steps)
            sent = [(role, key_content(content)) for role, content in chat.messages]
            if before:  # the prompt cache's prefix (the hint's `shared`): re-sent, and no more
                previous, kept = before
                assert sent[:kept] == previous[:kept]
                assert kept == len(previous) or sent[kept] != previous[kept]
            before = [sent, chat.kept_by_next()]
            outputs = [row["response"] or settings.silence_marker for _, row in earlier]
            expected = [("system", "SYSTEM")]
            for turn in chat_turns(sample, step, outputs, settings):
                if isinstance(turn, StepTurn):
                    images = [ImagePart.read(frames.frame(k).path) for k in turn.frames]
                    text = "\n".join(turn.texts)
                    content = (*images, text) if images and text else tuple(images) if images \
                        else text or LEFT_WINDOW
                    expected.append(("user", content))
                else:
                    expected.append(("assistant", turn))
            assert [(role, key_content(content)) for role, content in chat.messages] == \
                [(role, key_content(content)) for role, content in expected]
            earlier.append(({}, {"response": None if step % 3 else f"said {step}"}))
    # one step's work a step: every chat was found again
    assert chats.grown == sum(step_count(s, settings) for s in read_corpus(corpus)) + 4


@pytest.mark.parametrize("settings", [StreamingSettings(), StreamingSettings(fps=2, frame_window=3),
                                      StreamingSettings(frame_window=None)])
def test_a_grown_chats_request_has_the_key_estimate_and_shape_of_one_built_from_scratch(
        tmp_path, settings):
    role = ModelRole(model="openai/watcher", api_base="http://127.0.0.1:9/v1", revision="r1",
                     generation=Generation(temperature=0.0, max_tokens=64, top_p=None))
    corpus = vf.write_corpus(tmp_path / "corpus")
    chats = EpisodeChats()
    for sample in read_corpus(corpus):
        frames = stored_frames(video_path(corpus, sample), settings, tmp_path / "store")
        earlier: list = []
        steps = step_count(sample, settings)
        for step in range(steps):
            chat = chats.chat(sample, earlier, frames, "SYSTEM", settings, ("id", sample.part),
                              last=step + 1 >= steps)
            grown = ChatRequest.build(role, chat.messages, grown=chat.log, sample_index=1)
            scratch = ChatRequest.build(role, list(chat.messages), sample_index=1)
            assert scratch.grown is None
            assert grown.key == scratch.key
            assert grown.estimated_prompt_tokens == scratch.estimated_prompt_tokens
            assert grown.shape() == (None, shape_of(role.model, list(chat.messages), None)[1])
            assert scratch.shape() == shape_of(role.model, list(chat.messages), None)
            # Another model's estimate is its own; a request made again with other
            # parameters (a retry plan's) is keyed anew.
            other = dataclasses.replace(grown, model="openai/gpt-4o")
            assert other.estimated_prompt_tokens == dataclasses.replace(
                scratch, model="openai/gpt-4o").estimated_prompt_tokens
            hotter = dataclasses.replace(grown, params=(("temperature", 1.0),))
            assert hotter.key == dataclasses.replace(scratch, params=(("temperature", 1.0),)).key
            earlier.append(({}, {"response": None if step % 4 else f"said {step}"}))
