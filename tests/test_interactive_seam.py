"""The seam takes environments and images: a suite defined only in tests/
(tiny_interactive_suite.py), whose next view depends on the model's reply and is an image, runs
end to end through the CLI, the generic stages, the store and a Prefect flow; it is cached, and a
run killed mid-episode resumes from the per-call cache without paying twice."""

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
from tiny_interactive_suite import QUESTION, GuessTheNumber, ReviewedGuesses, bounds_image

from proactflow.providers.content import ImagePart
from proactflow.suites import register_suite

pytestmark = pytest.mark.usefixtures("prefect_server")

GAMES = [  # binary search from the middle: a in 3 guesses (50, 24, 37), c in 1 (5);
    # b reaches its limit of 3 (127, 191, 223) without finding 200
    {"game": "a", "size": "small", "secret": 37, "low": 0, "high": 100, "steps": 8},
    {"game": "b", "size": "large", "secret": 200, "low": 0, "high": 255, "steps": 3},
    {"game": "c", "size": "small", "secret": 5, "low": 0, "high": 10, "steps": 4},
]


def read_bounds(request: dict) -> tuple[int, int]:
    """What the fake model sees: the bounds decoded from the image's pixels, so a request
    without the image, or with another image, cannot guess right."""
    (message,) = request["messages"]  # one single-turn chat per step
    image_part, text_part = message["content"]
    assert text_part == {"type": "text", "text": QUESTION}
    header, encoded = image_part["image_url"]["url"].split(",", 1)
    assert header == "data:image/png;base64"
    image = Image.open(io.BytesIO(base64.b64decode(encoded))).convert("RGB")
    return image.getpixel((0, 0))[0], image.getpixel((1, 0))[0]


def bisect(request: dict) -> Reply:
    low, high = read_bounds(request)
    return Reply(content=str((low + high) // 2))


@pytest.fixture
def games(tmp_path):
    register_suite(GuessTheNumber())
    corpus = tmp_path / "games.json"
    corpus.write_text(json.dumps(GAMES), encoding="utf-8")
    return corpus


def test_an_environment_with_images_runs_through_the_seam(games, tmp_path, capsys):
    with FakeOpenAI({"seer": bisect}) as fake:
        args = ["--suite", "tiny-guess", "--corpus", str(games), "--eval-model", "openai/seer",
                "--eval-api-base", fake.url, "--store", str(tmp_path / "store")]
        assert run_cli("run", [*args, "--dry-run"]) == 0
        plan = capsys.readouterr().out
        assert "3 calls, 0 cached, 3 to make, and at most 12 more" in plan  # 7 + 2 + 3
        assert fake.calls["seer"] == 0

        assert run_cli("run", [*args, "--out", str(tmp_path / "out")]) == 0
        assert fake.calls["seer"] == 7
        steps = pl.read_csv(tmp_path / "out" / "steps.csv", schema_overrides={"response": pl.String})
        assert steps.select("game", "step", "response", "verdict").rows() == [
            ("a", 0, "50", "lower"), ("a", 1, "24", "higher"), ("a", 2, "37", "correct"),
            ("b", 0, "127", "higher"), ("b", 1, "191", "higher"), ("b", 2, "223", "lower"),
            ("c", 0, "5", "correct")]
        # Each step records the image it showed, by hash.
        assert steps.filter(pl.col("game") == "a")["image_sha256"].to_list() == [
            ImagePart.of(bounds_image(low, high)).sha256
            for low, high in ((0, 100), (0, 49), (25, 49))]
        scores = {row["size"]: row for row in
                  json.loads((tmp_path / "out" / "scores.json").read_text())}
        assert (scores["small"]["games"], scores["small"]["solved"]) == (2, 2)
        assert (scores["large"]["games"], scores["large"]["solved"], scores["large"]["steps"]) \
            == (1, 0, 3)
        # Images are keyed and stored by hash: no base64 in the store's tables or cache.
        for path in (tmp_path / "store").rglob("*"):
            if path.is_file():
                assert b"base64," not in path.read_bytes(), path

        fake.reset_counts()
        assert run_cli("run", args) == 0
        assert fake.calls["seer"] == 0  # every step replayed from the per-call cache
        assert run_cli("run", [*args, "--dry-run"]) == 0
        assert "7 calls, 7 cached, 0 to make" in capsys.readouterr().out


RUNNER = """
import sys
sys.path.insert(0, {tests!r})
from tiny_interactive_suite import GuessTheNumber
from proactflow.suites import register_suite
from proactflow.cli import main
register_suite(GuessTheNumber())
sys.exit(main(sys.argv[1:]))
"""


def test_a_run_killed_mid_episode_resumes_without_paying_twice(tmp_path, prefect_server):
    register_suite(GuessTheNumber())
    many = [{"game": f"g{index:02d}", "size": "small" if index % 2 else "large",
             "secret": (index * 37) % 200 + 1, "low": 0, "high": 255, "steps": 8}
            for index in range(24)]
    corpus = tmp_path / "games.json"
    corpus.write_text(json.dumps(many), encoding="utf-8")
    concurrency = 4

    identity = request_identity
    with FakeOpenAI({"seer": bisect}, latency=0.05) as fake:
        args = ["--suite", "tiny-guess", "--corpus", str(corpus), "--eval-model", "openai/seer",
                "--eval-api-base", fake.url, "--concurrency", str(concurrency)]
        reference = tmp_path / "reference"
        fake.latency = 0
        assert run_cli("run", [*args, "--store", str(tmp_path / "fresh"),
                               "--out", str(reference)]) == 0
        needed = {identity(r) for r in fake.requests if r["model"] == "seer"}
        fake.reset_counts()
        fake.latency = 0.05

        args += ["--store", str(tmp_path / "store")]
        runner = RUNNER.format(tests=str(Path(__file__).resolve().parent))
        first = killed_mid_run(fake, "seer", runner, args, prefect_server, len(needed) // 2)
        fake.latency = 0

        out = tmp_path / "out"
        assert run_cli("run", [*args, "--out", str(out)]) == 0
        second = [identity(r) for r in fake.requests if r["model"] == "seer"]
    repeated = set(first) & set(second)
    assert len(repeated) <= concurrency  # only calls in flight at the kill are asked again
    assert len(second) == len(set(second))  # and nothing twice within the resumed run
    assert set(first) | set(second) == needed
    assert pl.read_csv(out / "steps.csv").equals(pl.read_csv(reference / "steps.csv"))


def review(request: dict) -> Reply:
    """A judge of a game's guesses so far: 3 once the secret is among them, 2 for several
    guesses without it, 1 for a single wrong one."""
    secret, guesses = request["messages"][0]["content"].removeprefix("Secret ").split("; guesses: ")
    guesses = guesses.split(" ")
    return Reply(content="3" if secret in guesses else "2" if len(guesses) > 1 else "1")


def test_a_suite_judging_whole_episodes_gets_each_ended_episode_once(games, tmp_path, capsys):
    register_suite(ReviewedGuesses())
    with FakeOpenAI({"seer": bisect, "judge": review, "judge2": review}) as fake:
        common = ["--corpus", str(games), "--eval-model", "openai/seer",
                  "--eval-api-base", fake.url, "--store", str(tmp_path / "store")]
        assert run_cli("run", ["--suite", "tiny-guess", *common]) == 0  # the replies, cached
        capsys.readouterr()
        judged = [*common, "--suite", "tiny-guess-reviewed", "--judge-api-base", fake.url]
        assert run_cli("run", [*judged, "--judge-model", "openai/judge", "--dry-run"]) == 0
        (judging,) = [line for line in capsys.readouterr().out.splitlines()
                      if line.startswith("judging  ")]
        assert "7 calls, 0 cached, 7 to make" in judging
        fake.reset_counts()
        out = tmp_path / "out"
        assert run_cli("run", [*judged, "--judge-model", "openai/judge", "--out", str(out)]) == 0
        # One call per distinct guess, each with the guesses so far; the model is not asked.
        assert (fake.calls["seer"], fake.calls["judge"]) == (0, 7)
        assert sorted(r["messages"][0]["content"] for r in fake.requests) == sorted([
            "Secret 37; guesses: 50", "Secret 37; guesses: 50 24",
            "Secret 37; guesses: 50 24 37", "Secret 200; guesses: 127",
            "Secret 200; guesses: 127 191", "Secret 200; guesses: 127 191 223",
            "Secret 5; guesses: 5"])
        scores = {row["size"]: row for row in json.loads((out / "scores.json").read_text())}
        assert (scores["small"]["reviews"], scores["small"]["mean_score"]) == (4, 2.25)
        assert scores["large"]["reviews"] == 3
        assert scores["large"]["mean_score"] == pytest.approx(5 / 3)
        # Swapping the judge re-runs the judging only.
        fake.reset_counts()
        assert run_cli("run", [*judged, "--judge-model", "openai/judge2"]) == 0
        assert (fake.calls["seer"], fake.calls["judge2"]) == (0, 7)
