"""The video ProactiveBench's core on videos made at test time: annotations read and checked,
the streaming protocol's steps, frames and subtitles, and frames decoded once with PyAV."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import av
import pytest

import video_fixtures as vf
from proactflow.common.errors import UserError
from proactflow.suites.proactivebench_video import frames as frames_module
from proactflow.suites.proactivebench_video.annotations import (
    PARTS, parse_annotations, parse_parts, read_corpus, require_corpus)
from proactflow.suites.proactivebench_video.frames import (VideoDecodeError, decoder_versions,
                                                           stored_frames)
from proactflow.suites.proactivebench_video.protocol import (
    StreamingSettings, episode_plan, frame_indices, frame_times, frames_in_chat, is_silence,
    reply_time, settings_record, step_count, step_user_turns)

DEFAULT = StreamingSettings()


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return vf.write_corpus(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="module")
def samples(corpus):
    return {sample.part: sample for sample in read_corpus(corpus)}


def test_the_corpus_reads_as_typed_samples(corpus, samples):
    assert list(samples) == list(PARTS)
    tv = samples["TV"]
    assert (tv.sample_id, tv.question, tv.duration) == (
        "TV/tv-1%Q1", "What colour is the square Ann mentions?", 5.0)
    assert [turn.time for turn in tv.user_turns] == [0.352, 0.9, 2.0, 4.6]
    ego = samples["EGO"].answers
    assert [(a.reply_start, a.reply_end, a.related_end) for a in ego] == [(2, 6, 5), (4, 8, 7)]
    assert [s.question_id for s in read_corpus(corpus, parse_parts("tv,web"))] == \
        ["tv-1%Q1", "web-1"]


def test_a_missing_corpus_says_where_the_data_is_published(tmp_path):
    for value in (None, ""):
        with pytest.raises(UserError, match="needs --corpus DIR.*yellow-binary-tree/"
                                            "ProactiveVideoQA"):
            require_corpus(value)
    with pytest.raises(UserError, match="not a folder.*yellow-binary-tree"):
        require_corpus(tmp_path / "nowhere")
    with pytest.raises(UserError, match=r"has no VAD/anno.json.*--parts"):
        read_corpus(tmp_path, ("VAD",))


def test_parts_are_parsed_and_checked():
    assert parse_parts(None) == PARTS
    assert parse_parts(" ego, WEB,ego ") == ("EGO", "WEB")
    with pytest.raises(UserError, match="unknown part 'MOVIE'; the parts are WEB,EGO,TV,VAD"):
        parse_parts("WEB,movie")


def _sample(**change):
    item = vf.sample("v.mp4", "q1", "Q?", 6.0, [vf.gold("A", (1, 2), (1, 3))])
    item.update(change)
    return item


@pytest.mark.parametrize("items,message", [
    ([_sample(), _sample(duration="6")], "sample 1 field duration: expected a number"),
    ([_sample(answer=[])], "sample 0 field answer: expected a non-empty list"),
    ([_sample(answer=[{"role": "assistant", "content": "A", "related_timespan": [1, 2],
                       "reply_timespan": [3, 1]}])],
     r"sample 0 field answer\[0\].reply_timespan: expected 0 <= start <= end"),
    ([_sample(conversation=[{"role": "assistant", "content": "Q", "time": 0}])],
     r"sample 0 field conversation\[0\].role"),
    ([{"video": "v.mp4"}], "sample 0 field question_id: missing"),
    ([_sample(), _sample()], "sample 1 field question_id: 'q1' is also sample 0's"),
    ({"video": "v.mp4"}, "expected a non-empty JSON list"),
])
def test_a_bad_annotation_is_one_line_naming_file_sample_and_field(items, message):
    with pytest.raises(UserError, match=message) as caught:
        parse_annotations(json.dumps(items).encode(), "C/WEB/anno.json", "WEB")
    assert str(caught.value).startswith("C/WEB/anno.json: ") and "\n" not in str(caught.value)


def test_a_missing_video_is_a_user_error_before_any_call(tmp_path):
    (tmp_path / "WEB").mkdir()
    (tmp_path / "WEB" / "anno.json").write_text(json.dumps([_sample()]))
    with pytest.raises(UserError, match=r"sample 0 field video: v.mp4 is not in .*1 of 1"):
        read_corpus(tmp_path, ("WEB",))
    assert read_corpus(tmp_path, ("WEB",), check_videos=False)[0].video == "v.mp4"


def test_steps_stop_after_the_last_gold_window(samples):
    # WEB window ends at 6 = duration; EGO at 8; TV at 3.5 (4 steps); VAD at 10
    assert {part: step_count(s, DEFAULT) for part, s in samples.items()} == \
        {"WEB": 6, "EGO": 8, "TV": 4, "VAD": 10}
    make = lambda duration, end: parse_annotations(json.dumps([vf.sample(  # noqa: E731
        "v", "q", "Q", duration, [vf.gold("A", (0, end), (0, end))])]).encode(), "f", "TV")[0]
    assert step_count(make(27.67, 7.49), DEFAULT) == 8
    assert step_count(make(6.5, 9.0), DEFAULT) == 6  # never past the video's end
    assert step_count(make(0.4, 0.0), DEFAULT) == 1


def test_each_step_brings_its_frame_time_subtitles_and_stamps_replies_at_its_end(samples):
    tv = samples["TV"]
    assert [frame_times(step, DEFAULT) for step in range(3)] == [[0.0], [1.0], [2.0]]
    assert [[t.content for t in step_user_turns(tv, step, DEFAULT)] for step in range(4)] == [
        ["Subtitle: (Ann:)Watch the middle.", "Subtitle: (Bob:)Where?"], [],
        ["Subtitle: (Ann:)There!"], []]  # 4.6 s falls after the last step: never shown
    assert [reply_time(step, DEFAULT) for step in range(3)] == [1.0, 2.0, 3.0]
    two_fps = StreamingSettings(fps=2)
    assert list(frame_indices(3, two_fps)) == [6, 7] and frame_times(3, two_fps) == [3.0, 3.5]
    with pytest.raises(ValueError, match="whole number of frames"):
        StreamingSettings(fps=1.5).frames_per_step


def test_the_window_keeps_the_most_recent_frames(samples):
    window = StreamingSettings(frame_window=3)
    assert [list(frames_in_chat(step, window)) for step in (0, 1, 2, 5)] == \
        [[0], [0, 1], [0, 1, 2], [3, 4, 5]]
    assert list(frames_in_chat(5, StreamingSettings(frame_window=None))) == list(range(6))
    assert episode_plan(samples["VAD"], window) == {"steps": 10, "frames": 10,
                                                    "images_sent": 1 + 2 + 3 * 8}


def test_the_settings_record_holds_every_protocol_choice():
    record = settings_record(StreamingSettings(frame_window=8, silence_marker="SILENT"))
    assert record == {"protocol_version": 1, "fps": 1.0, "step_seconds": 1.0,
                      "frame_size": 384, "frame_window": 8, "silence_marker": "SILENT",
                      "frame_format": "jpeg", "jpeg_quality": 85}
    assert is_silence(" NO REPLY.\n", DEFAULT) and not is_silence("NO REPLY: red", DEFAULT)


@pytest.mark.parametrize("part,expected", [
    ("WEB", {2: vf.GREY, 3: vf.RED, 5: vf.RED}),
    ("EGO", {1: vf.GREY, 2: vf.GREEN, 4: vf.BLUE, 6: vf.BLUE, 7: vf.GREY}),
    ("VAD", {8: vf.GREY, 9: vf.GREEN}),
])
def test_each_step_gets_the_frame_at_its_second(corpus, samples, tmp_path, part, expected):
    sample = samples[part]
    stored = stored_frames(corpus / part / sample.video, DEFAULT, tmp_path)
    assert len(stored.frames) == step_count(sample, DEFAULT)
    for step, colour in expected.items():
        (index,) = frame_indices(step, DEFAULT)
        frame = stored.frame(index)
        assert frame.time == step and frame.path.suffix == ".jpg"
        assert vf.near(vf.centre_colour(frame.path), colour), (step, colour)


def test_a_step_takes_the_first_frame_at_or_after_its_time(tmp_path):
    # frames at 0.27, 0.6, 0.93, 1.27 ... s: step 1 takes 1.27 (not the nearer 0.93)
    video = vf.write_video(tmp_path / "clock.mp4", vf.grey_clock, 4, rate=3, offset_ticks=8,
                           ticks_per_frame=10)
    with av.open(str(video)) as container:
        times = [float(frame.time) for frame in container.decode(video=0)]
    stored = stored_frames(video, StreamingSettings(frame_format="png"), tmp_path / "store")
    for frame in stored.frames:
        first = min(t for t in times if t >= frame.index)
        assert frame.time == first and frame.path.suffix == ".png"
        level = vf.clock_level(first)
        assert vf.near(vf.centre_colour(frame.path), (level,) * 3, tolerance=3)


def test_frames_are_decoded_once_and_keyed_by_video_sampling_and_decoder(corpus, tmp_path,
                                                                         monkeypatch):
    video = corpus / "WEB" / "shape.mp4"
    first = stored_frames(video, DEFAULT, tmp_path)
    assert first.decoded and first.record["decoder"] == decoder_versions()
    assert first.record["decoder"]["pyav"] == av.__version__

    def no_decoding(*args, **kwargs):
        raise AssertionError("decoded again")

    monkeypatch.setattr(frames_module.av, "open", no_decoding)
    again = stored_frames(video, DEFAULT, tmp_path)
    assert not again.decoded and again.key == first.key and again.frames == first.frames
    # the window and the silence marker change no frame: the same set serves them
    assert stored_frames(video, StreamingSettings(frame_window=2), tmp_path).key == first.key
    monkeypatch.undo()
    smaller = stored_frames(video, StreamingSettings(frame_size=32), tmp_path)
    assert smaller.decoded and smaller.key != first.key
    assert (smaller.frames[0].width, smaller.frames[0].height) == (32, 24)
    monkeypatch.setattr(frames_module, "decoder_versions",
                        lambda: {"pyav": "0", "ffmpeg": "0"})
    assert stored_frames(video, DEFAULT, tmp_path).decoded


def test_an_undecodable_video_is_a_typed_error_and_stores_nothing(tmp_path):
    broken = tmp_path / "broken.mp4"
    broken.write_bytes(b"\x00\x00\x00\x18ftypmp42" + b"not a video at all" * 50)
    store = tmp_path / "store"
    with pytest.raises(VideoDecodeError, match="broken.mp4: cannot decode") as caught:
        stored_frames(broken, DEFAULT, store)
    assert caught.value.video == str(broken)
    with pytest.raises(VideoDecodeError, match="missing.mp4"):
        stored_frames(tmp_path / "missing.mp4", DEFAULT, store)
    assert [p for p in store.rglob("*") if p.is_file()] == []


def test_a_crash_mid_decode_leaves_no_partial_set(corpus, tmp_path, monkeypatch):
    video = corpus / "EGO" / "events.mp4"
    encode = frames_module._Encoder.encode
    calls = []

    def failing(self, frame, index):
        calls.append(index)
        if index == 3:
            raise KeyboardInterrupt
        return encode(self, frame, index)

    monkeypatch.setattr(frames_module._Encoder, "encode", failing)
    with pytest.raises(KeyboardInterrupt):
        stored_frames(video, DEFAULT, tmp_path)
    assert calls == [0, 1, 2, 3] and list(tmp_path.rglob("*.jpg")) == []
    assert [p for p in tmp_path.rglob("*") if p.is_dir() and p.name.endswith(".tmp")] == []
    monkeypatch.undo()
    stored = stored_frames(video, DEFAULT, tmp_path)
    assert stored.decoded and len(stored.frames) == 8


def test_a_steps_chat_keeps_every_text_and_output_and_only_the_windows_images(samples):
    from proactflow.suites.proactivebench_video.protocol import StepTurn, chat_turns, replies
    from proactflow.suites.proactivebench_video.pauc import Reply
    tv, window = samples["TV"], StreamingSettings(frame_window=2)
    chat = chat_turns(tv, 3, ["NO REPLY", "NO REPLY", "Blue."], window)
    assert chat == [
        StepTurn(step=0, texts=("What colour is the square Ann mentions?",
                                "Subtitle: (Ann:)Watch the middle.", "Subtitle: (Bob:)Where?"),
                 frames=()), "NO REPLY",
        StepTurn(step=1, texts=(), frames=()), "NO REPLY",
        StepTurn(step=2, texts=("Subtitle: (Ann:)There!",), frames=(2,)), "Blue.",
        StepTurn(step=3, texts=(), frames=(3,))]
    assert chat_turns(tv, 0, [], DEFAULT) == [StepTurn(step=0, texts=chat[0].texts, frames=(0,))]
    with pytest.raises(ValueError):
        chat_turns(tv, 2, ["NO REPLY"], DEFAULT)
    assert replies(["NO REPLY", "NO REPLY", "Blue.", "Blue."], DEFAULT) == \
        [Reply(3.0, "Blue."), Reply(4.0, "Blue.")]


def test_the_core_end_to_end_equals_a_hand_computation(corpus, samples, tmp_path):
    """A fake model names the square it sees in the step's decoded frame, a fake judge gives 3
    when the gold answer is in the replies, else 1; PAUC then equals the hand-worked values."""
    from proactflow.suites.proactivebench_video.pauc import (TurnResult, judge_plan,
                                                             part_metrics, score_turn)
    from proactflow.suites.proactivebench_video.protocol import replies
    from proactflow.suites.proactivebench_video.annotations import video_path

    def model(image: Path) -> str:
        colour = vf.centre_colour(image)
        names = {"red": vf.RED, "green": vf.GREEN, "blue": vf.BLUE}
        seen = [name for name, value in names.items() if vf.near(colour, value)]
        return f"A {seen[0]} square" if seen else "NO REPLY"

    turns = []
    for sample in samples.values():
        stored = stored_frames(video_path(corpus, sample), DEFAULT, tmp_path)
        outputs = [model(stored.frame(k).path)
                   for step in range(step_count(sample, DEFAULT))
                   for k in frame_indices(step, DEFAULT)]
        said = replies(outputs, DEFAULT)
        for gold in sample.answers:
            plan = judge_plan(sample.question, gold.content, said, gold.reply_start,
                              gold.reply_end)
            judged = [(request.time, "3" if gold.content.lower() in request.replies.lower()
                       else "1") for request in plan]
            turns.append(TurnResult(sample.part, sample.sample_id, score_turn(
                judged, gold.reply_start, gold.reply_end, gold.related_end)))
    table = {row["part"]: (row["turns"], row["pauc_0"], row["pauc_0.5"], row["pauc_1"])
             for row in part_metrics(turns, samples=50)}
    # WEB: "A red square" at 4 in [3, 6] scores 3 (its repeats at 5, 6 are dropped):
    #   (0.5 x 1 + 2 x 2) / 6 = 0.75 at omega 0.
    # EGO, green in [2, 6]: green at 3 (3), green + blue at 5 (3): (0.5 + 2 x 3) / 8 = 0.8125;
    #   blue in [4, 8]: step 3's repeated "A green square" is said at 4, inside this window,
    #   so it is judged first (1), then green + blue at 5 (3): (0 x 1 + 2 x 3) / 8 = 0.75;
    #   the part's mean is 0.78125.
    # TV: "A blue square" at 3 in [2, 3.5] holds "blue": (0.5 + 2 x 0.5) / 3 = 0.5.
    # VAD: "A green square" at 10 in [9, 10] lacks the gold's "appears": 1, y = 0:
    #   0.5 x 1 / 2 = 0.25 at omega 0, 0.125 at 0.5, 0 at 1 (below silence's 0.25).
    assert table == {
        "WEB": (1, pytest.approx(75.0), pytest.approx(87.5), pytest.approx(100.0)),
        "EGO": (2, pytest.approx(78.125), pytest.approx(89.0625), pytest.approx(100.0)),
        "TV": (1, pytest.approx(50.0), pytest.approx(75.0), pytest.approx(100.0)),
        "VAD": (1, pytest.approx(25.0), pytest.approx(12.5), pytest.approx(0.0))}


def test_a_folder_left_by_a_killed_build_is_removed_once_old(corpus, tmp_path):
    video = corpus / "WEB" / "shape.mp4"
    key = frames_module.frames_key(frames_module.frames_record(
        frames_module.file_sha256(video), DEFAULT))
    parent = tmp_path / key[:2]
    old, recent = parent / f".{key}.old1.tmp", parent / f".{key}.new1.tmp"
    for left in (old, recent):
        left.mkdir(parents=True)
        (left / "frame-000000.jpg").write_bytes(b"partial")
    stale = time.time() - frames_module.LEFTOVER_AGE_S - 60
    os.utime(old, (stale, stale))
    stored_frames(video, DEFAULT, tmp_path)
    assert not old.exists()  # a killed process's
    assert recent.exists()  # perhaps another process still at work
