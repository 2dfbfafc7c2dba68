"""The video ProactiveBench end to end through the CLI: short videos generated here with PyAV
(video_fixtures.write_corpus: a shape appearing at a known second, two overlapping events, a
TV-style sample with subtitle turns, a late event), a fake model that answers from the colour of
the frame it is sent, and a fake judge. Every step's frame time and subtitles, the judge calls
and the PAUC table are checked against values worked out by hand; a second run makes no call and
decodes nothing; a run killed mid episode resumes without paying twice."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import polars as pl
import pytest
from PIL import Image

from fake_openai import FakeOpenAI, Reply
from helpers import killed_mid_run, request_identity, run_cli
from replay import JUDGE_PROMPT, SAMPLE_CORPUS
from video_fixtures import BLUE, GREEN, RED, near, write_corpus, write_video, shape_from

from proactflow.suites import get_suite
from proactflow.suites.proactivebench_video import frames as frames_module

COLOURS = {"red": RED, "green": GREEN, "blue": BLUE}


def newest_colour(request: dict) -> str | None:
    """The colour word of the centre of the last image of the last user turn (None: grey)."""
    user = [m for m in request["messages"] if m["role"] == "user"][-1]
    images = [part for part in user["content"] if part["type"] == "image_url"]
    data = base64.b64decode(images[-1]["image_url"]["url"].split(",", 1)[1])
    image = Image.open(io.BytesIO(data)).convert("RGB")
    centre = image.getpixel((image.width // 2, image.height // 2))
    return next((name for name, rgb in COLOURS.items() if near(centre, rgb, 40)), None)


def watcher(request: dict) -> Reply:
    colour = newest_colour(request)
    return Reply(content=f"A {colour} square" if colour else "NO REPLY")


def grader(request: dict) -> Reply:
    """3 when the replies name the gold's colour and no other, 2 when they name it among
    others, 1 otherwise."""
    user = request["messages"][-1]["content"]
    gold = user.split("Ground Truth Answer: ", 1)[1].split("\n", 1)[0].lower()
    said = user.split("Predicted Answer: ", 1)[1].lower()
    wanted = next(name for name in COLOURS if name in gold)
    named = {name for name in COLOURS if name in said}
    return Reply(content="3" if named == {wanted} else "2" if wanted in named else "1")


# Worked by hand from the fixture (see write_corpus) and the replies the watcher gives at each
# step's end: turn -> (PAUC at omega 0, 0.5, 1).
EXPECTED_TURNS = {
    # red from 3 s: replies at 4, 5, 6 (the same text: judged once, at 4); window [3, 6].
    ("WEB", 0): (4.5 / 6, 5.25 / 6, 1.0),
    # green [2, 5) then blue [4, 7): green at 3 (score 3), blue at 5 ("green blue": 2), in
    # window [2, 6]; for the blue turn, window [4, 8]: green at 4 (1), then blue at 5 (2).
    ("EGO", 0): (5.5 / 8, 4.75 / 8, 0.5),
    ("EGO", 1): (3 / 8, 3.5 / 8, 0.5),
    # blue from 2 s: reply at 3, window [2, 3.5].
    ("TV", 0): (1.5 / 3, 2.25 / 3, 1.0),
    # green at 9 s of 10: reply at 10, the window's end [9, 10].
    ("VAD", 0): (0.5 / 2, 1.25 / 2, 1.0),
}


@pytest.fixture
def corpus(tmp_path):
    return write_corpus(tmp_path / "corpus")


@pytest.fixture
def decodes(monkeypatch):
    """How many videos were decoded in this process."""
    counted = []
    original = frames_module._decode_into

    def counting(video, folder, settings):
        counted.append(Path(video).name)
        return original(video, folder, settings)

    monkeypatch.setattr(frames_module, "_decode_into", counting)
    return counted


def args_for(fake: FakeOpenAI, corpus: Path, store: Path, *extra: str) -> list[str]:
    return ["--suite", "proactivebench-video", "--eval-vision", "--corpus", str(corpus),
            "--eval-model", "openai/watcher", "--eval-api-base", fake.url,
            "--judge-model", "openai/grader", "--judge-api-base", fake.url,
            "--store", str(store), *extra]


def test_a_run_plays_each_video_second_by_second_and_scores_pauc(corpus, tmp_path, capsys,
                                                                 decodes):
    store, out = tmp_path / "store", tmp_path / "out"
    with FakeOpenAI({"watcher": watcher, "grader": grader}) as fake:
        assert run_cli("run", [*args_for(fake, corpus, store), "--dry-run"]) == 0
        plan = capsys.readouterr().out
        # WEB 6 steps, EGO 8, TV 4, VAD 10; 28 frames at 1 fps, every frame in the window.
        assert "4 samples, 5 gold turns, 28 steps, 28 frames, 122 images sent" in plan
        # Every step is planned at its own size: the video plays whatever the model says.
        assert "openai/watcher: 28 calls, 0 cached, 28 to make" in plan
        # The judge: at most one call per step whose reply time (its end) falls in a gold
        # window: WEB [3, 6] 4, EGO [2, 6] 5 and [4, 8] 5, TV [2, 3.5] 2, VAD [9, 10] 2.
        assert "openai/grader: 0 calls, 0 cached, 0 to make, and at most 18 more as replies " \
               "come" in plan
        assert fake.calls["watcher"] == 0
        assert run_cli("run", [*args_for(fake, corpus, store), "--out", str(out)]) == 0
        assert fake.calls["watcher"] == 28
        assert fake.calls["grader"] == 1 + 2 + 2 + 1 + 1
        assert sorted(decodes) == ["events.mp4", "late.mp4", "shape.mp4", "show.mp4"]

        steps = pl.read_csv(out / "steps.csv")
        tv = steps.filter(pl.col("part") == "TV").sort("step")
        assert [json.loads(s) for s in tv["subtitles"]] == [
            ["Subtitle: (Ann:)Watch the middle.", "Subtitle: (Bob:)Where?"], [],
            ["Subtitle: (Ann:)There!"], []]  # 4.6 s is after the last step
        assert tv["reply_time"].to_list() == [1.0, 2.0, 3.0, 4.0]
        # Each step's frame is the first decoded one at or after its second (10 fps video).
        for row in steps.iter_rows(named=True):
            (taken,) = json.loads(row["frame_times"])
            assert taken == pytest.approx(row["step"], abs=1e-6)
        ego = steps.filter(pl.col("part") == "EGO").sort("step")["response"].to_list()
        assert ego == ["NO REPLY"] * 2 + ["A green square"] * 2 + ["A blue square"] * 3 + [
            "NO REPLY"]
        # The chat grows: the last TV request holds every earlier output as an assistant turn.
        last_tv = [r for r in fake.requests if r["model"] == "watcher"
                   and "Ann mentions" in json.dumps(r["messages"][1])][-1]
        assert [m["content"] for m in last_tv["messages"] if m["role"] == "assistant"] == [
            "NO REPLY", "NO REPLY", "A blue square"]

        turns = pl.read_csv(out / "turns.csv")
        assert set(turns["status"]) == {"scored"}
        for row in turns.iter_rows(named=True):
            expected = EXPECTED_TURNS[(row["part"], row["turn"])]
            assert (row["pauc_0"], row["pauc_0.5"], row["pauc_1"]) == pytest.approx(expected)
        assert json.loads(turns.filter((pl.col("part") == "EGO") & (pl.col("turn") == 1))
                          ["replies"][0]) == ["A green square", "A blue square"]

        metrics = pl.read_csv(out / "metrics.csv", null_values="-")
        assert metrics.columns == ["part", "turns", "pauc_0", "pauc_0.5", "pauc_1", "refused"]
        by_part: dict[str, list[tuple[float, ...]]] = {}
        for (part, _), values in EXPECTED_TURNS.items():
            by_part.setdefault(part, []).append(values)
            by_part.setdefault("all", []).append(values)
        assert metrics["part"].to_list() == ["WEB", "EGO", "TV", "VAD", "all"]
        for row in metrics.iter_rows(named=True):
            mine = by_part[row["part"]]
            assert row["turns"] == len(mine)
            for n, column in enumerate(("pauc_0", "pauc_0.5", "pauc_1")):
                assert row[column] == pytest.approx(100 * sum(v[n] for v in mine) / len(mine))
        every = json.loads((out / "metrics.json").read_text())["parts"]
        assert [row["part"] for row in every] == ["WEB", "EGO", "TV", "VAD", "all"]
        assert every[-1]["turns"] == 5 and every[-1]["answered"] == 5

        # A second run: no call, no decoding.
        fake.reset_counts()
        decodes.clear()
        assert run_cli("run", args_for(fake, corpus, store)) == 0
        assert (fake.calls["watcher"], fake.calls["grader"], decodes) == (0, 0, [])
        # A new judge re-runs the judging only.
        fake.responders["grader2"] = grader
        assert run_cli("run", [*args_for(fake, corpus, store), "--judge-model",
                               "openai/grader2"]) == 0
        assert (fake.calls["watcher"], fake.calls["grader2"]) == (0, 7)

    # The report has a section for the suite: both judges' evaluations, per part and overall.
    report = tmp_path / "report"
    assert run_cli("report", ["--store", str(store), "--out", str(report)]) == 0
    assert "ProactiveBench (video): PAUC" in (report / "report.html").read_text()
    board = pl.read_csv(report / "proactivebench_video_leaderboard.csv")
    assert set(board["judge"]) == {"openai/grader", "openai/grader2"}
    assert board.filter(pl.col("part") == "all")["pauc_1"].to_list() == [100 * 4 / 5] * 2


@pytest.mark.parametrize("content", [b"", b"not a video at all"], ids=["zero-byte", "text"])
def test_an_undecodable_video_is_one_line_naming_it_before_any_call(corpus, tmp_path, capsys,
                                                                    content):
    broken = corpus / "VAD" / "late.mp4"
    broken.write_bytes(content)
    with FakeOpenAI({"watcher": watcher, "grader": grader}) as fake:
        code = run_cli("run", [*args_for(fake, corpus, tmp_path / "store"), "--parts", "VAD",
                               "--limit", "1"])
        assert sum(fake.calls.values()) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert str(broken) in err[0] and "--skip-undecodable-videos" in err[0]


def test_a_skipped_undecodable_video_is_named_in_the_last_line_and_no_rerun_is_promised(
        corpus, tmp_path, capsys):
    """Issue #36 item 7: the remedy names the file, and a re-run (which decodes the same bytes
    the same way) is not offered as one."""
    broken = corpus / "VAD" / "late.mp4"
    broken.write_bytes(b"")
    with FakeOpenAI({"watcher": watcher, "grader": grader}) as fake:
        assert run_cli("run", [*args_for(fake, corpus, tmp_path / "store"), "--parts", "VAD",
                               "--limit", "1", "--skip-undecodable-videos"]) == 1
        assert sum(fake.calls.values()) == 0
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "nothing scored" in last and str(broken) in last
    assert "undecodable video" in last and "replace or remove it" in last
    assert "retries only those" not in last


def test_parts_limit_an_undecodable_video_and_an_unreadable_judge(corpus, tmp_path):
    (corpus / "VAD" / "late.mp4").write_bytes(b"not a video at all")

    def wordy(request: dict) -> Reply:  # never starts with the digit for the TV turn
        if "Ground Truth Answer: Blue" in request["messages"][-1]["content"]:
            return Reply(content="Score: 3")
        return grader(request)

    with FakeOpenAI({"watcher": watcher, "grader": wordy}) as fake:
        out = tmp_path / "out"
        assert run_cli("run", [*args_for(fake, corpus, tmp_path / "store"), "--parts",
                               "vad,web,TV", "--limit", "1", "--out", str(out),
                               "--skip-undecodable-videos"]) == 1
        assert fake.calls["watcher"] == 6 + 4  # WEB and TV: the VAD video is never asked about
        assert fake.calls["grader"] == 1 + 4  # the unreadable score asked --judge-attempts times
    turns = pl.read_csv(out / "turns.csv")
    assert dict(zip(turns["part"], turns["status"])) == {
        "WEB": "scored", "TV": "judge_error", "VAD": "error"}
    assert turns.filter(pl.col("part") == "TV")["pauc_0"].to_list() == [None]
    steps = pl.read_csv(out / "steps.csv").filter(pl.col("part") == "VAD")
    assert steps["status"].to_list() == ["error"] and "cannot decode" in steps["message"][0]
    metrics = pl.read_csv(out / "metrics.csv", null_values="-")
    assert metrics.select("part", "turns").rows() == [("WEB", 1), ("TV", 0), ("VAD", 0),
                                                      ("all", 1)]
    parts = {row["part"]: row for row in json.loads((out / "metrics.json").read_text())["parts"]}
    assert (parts["TV"]["judge_errors"], parts["VAD"]["errors"]) == (1, 1)


def test_bad_flags_are_one_line_errors(corpus, tmp_path, capsys):
    with FakeOpenAI({}) as fake:
        common = ["--eval-model", "openai/m", "--eval-api-base", fake.url, "--judge-model",
                  "openai/j", "--judge-api-base", fake.url, "--store", str(tmp_path / "store"),
                  "--dry-run"]
        assert run_cli("run", ["--suite", "proactivebench-video", "--eval-vision", *common]) == 2
        err = capsys.readouterr().err
        assert "needs --corpus DIR" in err and "ProactiveVideoQA" in err
        assert len(err.strip().splitlines()) == 1
        assert run_cli("run", ["--suite", "proactivebench-video", "--eval-vision", "--corpus", str(corpus),
                               "--parts", "WEB,MOVIES", *common]) == 2
        err = capsys.readouterr().err
        assert "unknown part 'MOVIES'" in err and len(err.strip().splitlines()) == 1
        assert run_cli("run", ["--corpus", str(SAMPLE_CORPUS), "--judge-prompt",
                               str(JUDGE_PROMPT), "--parts", "WEB", *common]) == 2
        assert "--parts is the video ProactiveBench's" in capsys.readouterr().err
        assert fake.calls == {}


RUNNER = """
import sys
from proactflow.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_run_killed_mid_episode_resumes_without_paying_twice(tmp_path, prefect_server):
    corpus = tmp_path / "corpus"
    write_video(corpus / "EGO" / "long.mp4", shape_from(20, RED), 24, rate=2)
    anno = [{"video": "long.mp4", "question_id": f"q{n}", "duration": 24.0,
             "conversation": [{"role": "user", "content": f"Say when it turns red ({n}).",
                               "time": 0}],
             "answer": [{"role": "assistant", "content": "red", "related_timespan": [20, 23],
                         "reply_timespan": [20, 24]}]} for n in range(4)]
    (corpus / "EGO" / "anno.json").write_text(json.dumps(anno), encoding="utf-8")

    identity = request_identity
    with FakeOpenAI({"watcher": watcher, "grader": grader}, latency=0.05) as fake:
        args = args_for(fake, corpus, tmp_path / "store", "--parts", "EGO",
                        "--concurrency", "2")
        first = killed_mid_run(fake, "watcher", RUNNER, args, prefect_server, 40)  # of 4 x 24
        fake.latency = 0
        assert run_cli("run", [*args, "--out", str(tmp_path / "out")]) == 0
        second = [identity(r) for r in fake.requests if r["model"] == "watcher"]
    assert len(set(first) & set(second)) <= 2  # only the calls in flight at the kill
    assert len(second) == len(set(second))
    assert len(set(first) | set(second)) == 4 * 24
    assert pl.read_csv(tmp_path / "out" / "metrics.csv", null_values="-")["turns"].to_list() == [4, 4]


def test_the_suite_is_registered():
    assert get_suite("proactivebench-video").name == "proactivebench-video"


def test_a_sweep_of_two_models_gets_a_pauc_leaderboard(corpus, tmp_path, capsys,
                                                       prefect_server):
    out = tmp_path / "sweep"
    with FakeOpenAI({"watcher": watcher, "mute": lambda request: Reply(content="NO REPLY"),
                     "grader": grader}) as fake:
        config = tmp_path / "sweep.toml"
        config.write_text(f"""
suite = "proactivebench-video"
store = "{tmp_path / 'store'}"
out = "{out}"
corpus = "{corpus}"
parts = ["WEB", "VAD"]
processes = 1

[[judges]]
model = "openai/grader"
api_base = "{fake.url}"

[[models]]
model = "openai/watcher"
api_base = "{fake.url}"
vision = true

[[models]]
model = "openai/mute"
api_base = "{fake.url}"
vision = true
""", encoding="utf-8")
        assert run_cli("sweep", ["--config", str(config)]) == 0
        assert (fake.calls["watcher"], fake.calls["mute"]) == (16, 16)
    board = pl.read_csv(out / "leaderboard.csv")
    overall = {row["model"]: row for row in board.filter(pl.col("part") == "all")
               .iter_rows(named=True)}
    assert overall["openai/mute"]["pauc_0"] == pytest.approx(25.0)  # silence scores 0.25
    assert overall["openai/watcher"]["pauc_0"] == pytest.approx(100 * (0.75 + 0.25) / 2)
    summary = (out / "sweep.md").read_text()
    assert "| openai/watcher | openai/grader |" in summary


def test_a_video_is_hashed_once_per_file_version(corpus, tmp_path, monkeypatch):
    from proactflow.suites.proactivebench_video import hashes

    read = []
    monkeypatch.setattr(hashes, "file_sha256",
                        lambda path: read.append(path.name) or frames_module.file_sha256(path))
    videos = [corpus / "WEB" / "shape.mp4", corpus / "VAD" / "late.mp4"]
    first = hashes.VideoHashes().of(videos, tmp_path)
    assert first == [frames_module.file_sha256(video) for video in videos]
    assert hashes.VideoHashes().of(videos, tmp_path) == first  # another process: the memo
    assert read == ["shape.mp4", "late.mp4"]
    write_video(videos[1], shape_from(1, RED), 3)  # a new version of the file
    again = hashes.VideoHashes().of(videos, tmp_path)
    assert read[2:] == ["late.mp4"] and again[1] != first[1]


def test_a_reply_that_is_not_an_answer_is_counted_and_playback_goes_on(corpus, tmp_path):
    """An empty reply at the first red second (4 s) is the model's, on its step; the video plays
    on, the later reply (5 s) is judged, and the turn is scored from it: window [3, 6], score 3
    at 5 s."""
    def hesitant(request: dict) -> Reply:
        answered = sum(message["role"] == "assistant" for message in request["messages"])
        if newest_colour(request) == "red" and answered == 3:
            return Reply(content="")
        return watcher(request)

    with FakeOpenAI({"watcher": hesitant, "grader": grader}) as fake:
        out = tmp_path / "out"
        assert run_cli("run", [*args_for(fake, corpus, tmp_path / "store"), "--parts", "WEB",
                               "--limit", "1", "--out", str(out)]) == 0
        assert fake.calls["watcher"] == 6  # every second played
    steps = pl.read_csv(out / "steps.csv")
    assert steps["status"].to_list() == ["ok", "ok", "ok", "empty", "ok", "ok"]
    turns = pl.read_csv(out / "turns.csv")
    assert turns["status"].to_list() == ["scored"]
    assert turns.select("pauc_0", "pauc_0.5", "pauc_1").row(0) == pytest.approx(
        (3 / 6, 4.5 / 6, 1.0))


def test_every_video_is_decoded_before_the_first_call(corpus, tmp_path, decodes, monkeypatch):
    """Decoding is the samples stage's, on threads: left to a video's first step, it would
    hold the event loop (and every call in flight) for the seconds it takes."""
    from proactflow.suites import get_suite
    from proactflow.suites.proactivebench_video.episode import FrameSets

    # This process's suite remembers the frame sets of earlier tests' identical videos.
    monkeypatch.setattr(get_suite("proactivebench-video"), "frame_sets", FrameSets())
    decoded_at_first_call: list[int] = []

    def timed(request: dict) -> Reply:
        if not decoded_at_first_call:
            decoded_at_first_call.append(len(decodes))
        return watcher(request)

    with FakeOpenAI({"watcher": timed, "grader": grader}) as fake:
        assert run_cli("run", args_for(fake, corpus, tmp_path / "store")) == 0
    assert decoded_at_first_call == [len(decodes)] and len(decodes) == 4  # every video


def test_a_judge_request_the_server_refuses_is_a_refused_turn_in_the_table_and_csv(
        corpus, tmp_path, capsys):
    """Issue #36 item 7: a refusal was a judge_error, which a re-run was said to retry; it is
    `refused`, counted in its own column of the console table and metrics.csv."""
    sentence = "'top_p' is not supported with this model."
    with FakeOpenAI({"watcher": watcher,
                     "grader": lambda request: Reply(status=400, content=sentence)}) as fake:
        out = tmp_path / "out"
        assert run_cli("run", [*args_for(fake, corpus, tmp_path / "store"), "--parts", "WEB",
                               "--limit", "1", "--out", str(out)]) == 1
    printed = capsys.readouterr()
    header = next(line for line in printed.out.splitlines()
                  if line.startswith("┃") and "part" in line)
    assert header.split("┃")[-2].strip() == "refused"
    metrics = pl.read_csv(out / "metrics.csv", null_values="-")
    row = metrics.filter(pl.col("part") == "WEB").row(0, named=True)
    assert row["refused"] > 0 and row["turns"] == 0 and row["pauc_0"] is None
    assert set(pl.read_csv(out / "turns.csv")["status"]) == {"refused"}
    last = printed.err.strip().splitlines()[-1]
    assert "refused by the server" in last and sentence in last
    assert "retries only those" not in last
