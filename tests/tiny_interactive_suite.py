"""A tiny interactive suite defined only here: the proof that an environment (the next view
depends on the model's answer) and images plug into the seam without an edit to stages/, flows/,
schemas/ or cache/.

"Guess the number": each game hides a number between two bounds. At each step the model is shown
an image that encodes the bounds it has narrowed so far (the red channel of two pixels: low,
high) and asked for a guess; the environment answers "higher" or "lower" by showing the narrowed
bounds at the next step, and ends the game on the right guess, on a reply that is not a number in
bounds, on a failed call, or at the game's step limit. No judge: a game is solved or not.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import polars as pl
from PIL import Image
from pydantic import BaseModel, Field

from proactflow.common.errors import UserError
from proactflow.config.settings import ModelRole, RunSettings
from proactflow.providers.chat import ChatOutcome, ChatRequest
from proactflow.providers.content import ImagePart
from proactflow.schemas.arrow import to_frame
from proactflow.suites.base import DataSource, Prompts, StageNames, Step, Suite, Tables

QUESTION = "The image shows two bounds. Guess the hidden number between them; reply with it."


class Game(BaseModel):
    game: str = Field(description="The episode.")
    size: str = Field(description="small or large: the group scores aggregate by.")
    secret: int = Field(description="The hidden number.")
    low: int = Field(description="The first view's lower bound (0-255).")
    high: int = Field(description="The first view's upper bound (0-255).")
    steps: int = Field(description="The game's step limit.")


class Guess(BaseModel):
    game: str = Field(description="The episode.")
    step: int = Field(description="0 for the first view, then one per guess.")
    sample_index: int = Field(description="Which sample.")
    model: str = Field(description="Model under test.")
    status: str = Field(description="ok, or error (the call failed).")
    message: str | None = Field(description="Why not ok.")
    response: str | None = Field(description="The reply.")
    low: int = Field(description="The lower bound this step showed.")
    high: int = Field(description="The upper bound this step showed.")
    image_sha256: str = Field(description="The image this step showed.")
    verdict: str | None = Field(description="correct, higher, lower or unreadable; None for a "
                                            "failed call.")
    prompt_tokens: int | None = Field(description="Prompt tokens.")
    completion_tokens: int | None = Field(description="Completion tokens.")


class Outcome(BaseModel):
    game: str = Field(description="The episode.")
    step: int = Field(description="The step.")
    sample_index: int = Field(description="Which sample.")
    size: str = Field(description="The game's size.")
    model: str = Field(description="Model under test.")
    status: str = Field(description="scored or generation_error.")
    verdict: str | None = Field(description="The environment's reading of the reply.")


class SizeScore(BaseModel):
    model: str = Field(description="Model under test.")
    size: str = Field(description="small, large.")
    games: int = Field(description="Games played.")
    solved: int = Field(description="Games ended by the right guess.")
    steps: int = Field(description="Steps taken in all.")


def bounds_image(low: int, high: int) -> bytes:
    """Two pixels whose red channels are the bounds: what the model must read to guess."""
    image = Image.new("RGB", (2, 1))
    image.putpixel((0, 0), (low, 0, 0))
    image.putpixel((1, 0), (high, 0, 0))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def _bounds(sample: dict[str, Any], earlier: list[Step]) -> tuple[int, int]:
    """The bounds shown after the steps so far: replayed from the verdicts, never stored."""
    low, high = sample["low"], sample["high"]
    for _, row in earlier:
        if row["verdict"] == "higher":
            low = int(row["response"]) + 1
        elif row["verdict"] == "lower":
            high = int(row["response"]) - 1
    return low, high


class GuessTheNumber(Suite):
    name = "tiny-guess"
    display_name = "Guess the number"
    title = "Guess the number (a test suite): an environment that answers higher or lower"
    group_column = "size"
    sample_noun = "games"
    sample_key = ("game",)
    step_column = "step"
    stages = StageNames(samples="guess_games", responses="guess_steps",
                        judgments="guess_outcomes", scores="guess_scores")
    tables = Tables(samples=Game, responses=Guess, judgments=Outcome, scores=SizeScore)
    needs_judge = False
    main_output = "scores.json"

    def locate(self, settings: RunSettings, store: Any) -> DataSource:
        if not settings.corpus.path:
            raise UserError("the guessing suite needs --corpus FILE")
        text = Path(settings.corpus.path).read_text(encoding="utf-8")
        return DataSource(str(len(text)) + text[:64], settings.corpus.path, json.loads(text))

    def samples_key_settings(self, settings: RunSettings, source: DataSource) -> dict[str, Any]:
        return {"revision": source.revision}

    def build_samples(self, settings: RunSettings, source: DataSource) -> pl.DataFrame:
        return to_frame([Game(**row) for row in source.location], Game)

    def step_limit(self, sample: dict[str, Any]) -> int:
        return sample["steps"]

    def generation_request(self, sample: dict[str, Any], earlier: list[Step], role: ModelRole,
                           prompts: Prompts, sample_index: int) -> ChatRequest | None:
        image = ImagePart.of(bounds_image(*_bounds(sample, earlier)))
        return ChatRequest.build(role, [("user", (image, QUESTION))], sample_index=sample_index)

    def step_row(self, sample: dict[str, Any], earlier: list[Step], outcome: ChatOutcome | None,
                 role: ModelRole, sample_index: int) -> Guess:
        assert outcome is not None
        low, high = _bounds(sample, earlier)
        verdict = None
        if outcome.ok:
            text = (outcome.content or "").strip()
            guess = int(text) if text.isdigit() else None
            verdict = ("unreadable" if guess is None or not low <= guess <= high else
                       "correct" if guess == sample["secret"] else
                       "higher" if guess < sample["secret"] else "lower")
        return Guess(game=sample["game"], step=len(earlier), sample_index=sample_index,
                     model=role.model, status="ok" if outcome.ok else "error",
                     message=outcome.error, response=outcome.content, low=low, high=high,
                     image_sha256=ImagePart.of(bounds_image(low, high)).sha256,
                     verdict=verdict, prompt_tokens=outcome.prompt_tokens,
                     completion_tokens=outcome.completion_tokens)

    def response_row(self, sample: dict[str, Any], outcome: ChatOutcome | None,
                     role: ModelRole, sample_index: int) -> Guess:
        return self.step_row(sample, [], outcome, role, sample_index)

    def another_step(self, sample: dict[str, Any], earlier: list[Step]) -> bool:
        return earlier[-1][1]["verdict"] in ("higher", "lower")

    def judgment_row(self, sample: dict[str, Any], response: dict[str, Any],
                     outcome: ChatOutcome | None, role: ModelRole | None,
                     prompts: Prompts) -> Outcome:
        return Outcome(game=sample["game"], step=response["step"],
                       sample_index=response["sample_index"], size=sample["size"],
                       model=response["model"],
                       status="scored" if response["status"] == "ok" else "generation_error",
                       verdict=response["verdict"])

    def score(self, judgments: pl.DataFrame) -> pl.DataFrame:
        return judgments.group_by("model", "size").agg(
            games=pl.col("game").n_unique(),
            solved=(pl.col("verdict") == "correct").sum().cast(pl.Int64),
            steps=pl.len()).sort("size").select("model", "size", "games", "solved", "steps")

    def coverage(self, judgments: pl.DataFrame) -> tuple[int, int, dict[str, int]]:
        status = judgments["status"]
        return int((status == "scored").sum()), judgments.height, {
            "generation": int((status == "generation_error").sum())}

    def write_outputs(self, out: Path, samples: pl.DataFrame, responses: pl.DataFrame,
                      judgments: pl.DataFrame, scores: pl.DataFrame,
                      provenance: dict[str, Any]) -> dict[str, str]:
        out.mkdir(parents=True, exist_ok=True)
        responses.write_csv(out / "steps.csv")
        path = out / "scores.json"
        path.write_text(json.dumps(scores.to_dicts()), encoding="utf-8")
        return {"scores.json": str(path), "steps.csv": str(out / "steps.csv")}


class Review(BaseModel):
    game: str = Field(description="The episode.")
    sample_index: int = Field(description="Which sample.")
    size: str = Field(description="The game's size.")
    model: str = Field(description="Model under test.")
    judge: str | None = Field(description="The judge.")
    guesses: str | None = Field(description="The distinct guesses judged, so far, in order.")
    status: str = Field(description="scored, judge_error, or unjudged (no guess to judge).")
    score: int | None = Field(description="The judge's 1-3.")
    prompt_tokens: int | None = Field(description="The judge call's prompt tokens.")
    completion_tokens: int | None = Field(description="The judge call's completion tokens.")


class ReviewScore(BaseModel):
    model: str = Field(description="Model under test.")
    size: str = Field(description="small, large.")
    reviews: int = Field(description="Judge calls' rows.")
    mean_score: float | None = Field(description="Mean judged score.")


class ReviewedGuesses(GuessTheNumber):
    """The same games judged episode by episode, as the video ProactiveBench judges a gold turn:
    one judge call per distinct guess, each with every distinct guess so far."""

    name = "tiny-guess-reviewed"
    needs_judge = True
    judges_episodes = True
    stages = StageNames(samples="guess_games", responses="guess_steps",
                        judgments="guess_reviews", scores="guess_review_scores")
    tables = Tables(samples=Game, responses=Guess, judgments=Review, scores=ReviewScore)

    @staticmethod
    def distinct_guesses(steps: list[dict[str, Any]]) -> list[str]:
        seen: list[str] = []
        for step in steps:
            if step["status"] == "ok" and step["response"] not in seen:
                seen.append(step["response"])
        return seen

    def episode_judge_requests(self, sample: dict[str, Any], steps: list[dict[str, Any]],
                               role: ModelRole | None, prompts: Prompts,
                               settings: RunSettings) -> list[ChatRequest]:
        assert role is not None
        guesses = self.distinct_guesses(steps)
        return [ChatRequest.build(role, [("user", f"Secret {sample['secret']}; guesses: "
                                          + " ".join(guesses[:count + 1]))])
                for count in range(len(guesses))]

    def accept_judge_reply(self, text: str) -> int:
        if text[:1] not in ("1", "2", "3"):
            raise ValueError("not a score")
        return int(text[:1])

    def episode_judgment_rows(self, sample: dict[str, Any], steps: list[dict[str, Any]],
                              outcomes: list[ChatOutcome], role: ModelRole | None,
                              prompts: Prompts) -> list[Review]:
        common = dict(game=sample["game"], sample_index=steps[0]["sample_index"],
                      size=sample["size"], model=steps[0]["model"],
                      judge=role.model if role else None)
        guesses = self.distinct_guesses(steps)
        if not outcomes:
            return [Review(**common, guesses=None, status="unjudged", score=None,
                           prompt_tokens=None, completion_tokens=None)]
        return [Review(**common, guesses=" ".join(guesses[:count + 1]),
                       status="scored" if outcome.ok else "judge_error",
                       score=outcome.parsed if outcome.ok else None,
                       prompt_tokens=outcome.prompt_tokens,
                       completion_tokens=outcome.completion_tokens)
                for count, outcome in enumerate(outcomes)]

    def judgment_row(self, sample: dict[str, Any], response: dict[str, Any],
                     outcome: ChatOutcome | None, role: ModelRole | None,
                     prompts: Prompts) -> Outcome:
        raise AssertionError("an episode-judged suite is never asked for one row")

    def score(self, judgments: pl.DataFrame) -> pl.DataFrame:
        return judgments.group_by("model", "size").agg(
            reviews=pl.len(), mean_score=pl.col("score").mean()).sort("size")

    def coverage(self, judgments: pl.DataFrame) -> tuple[int, int, dict[str, int]]:
        status = judgments["status"]
        return int((status != "judge_error").sum()), judgments.height, {
            "judge": int((status == "judge_error").sum())}
