"""A third, tiny suite defined only here: the proof that a benchmark plugs into the seam without
an edit to stages/, flows/, schemas/ or cache/.

"Chain arithmetic": each episode is a short chain of questions where a later one builds on the
model's own earlier answer ("add 3 to your last answer"), so the model's replies enter its
history; a deterministic check (no judge) compares each answer with the expected number, and
the scores are the share correct per level.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
from pydantic import BaseModel, Field

from proactflow.common.errors import UserError
from proactflow.config.settings import ModelRole, RunSettings
from proactflow.providers.chat import ChatOutcome, ChatRequest
from proactflow.schemas.arrow import to_frame
from proactflow.suites.base import DataSource, Prompts, StageNames, Step, Suite, Tables
from proactflow.suites.history_metric import mean_metric, samples_frame

SHARE_CORRECT = mean_metric("share correct", "all")


class Question(BaseModel):
    chain: str = Field(description="The episode.")
    step: int = Field(description="Position in the chain.")
    level: str = Field(description="easy or hard: the group scores aggregate by.")
    prompt: str = Field(description="What the model is asked.")
    expected: int = Field(description="The right answer.")


class Answer(BaseModel):
    chain: str = Field(description="The episode.")
    step: int = Field(description="Position in the chain.")
    sample_index: int = Field(description="Which sample.")
    model: str = Field(description="Model under test.")
    status: str = Field(description="ok or error.")
    message: str | None = Field(description="Why not ok.")
    response: str | None = Field(description="The reply.")
    prompt_tokens: int | None = Field(description="Prompt tokens.")
    completion_tokens: int | None = Field(description="Completion tokens.")


class Check(BaseModel):
    chain: str = Field(description="The episode.")
    step: int = Field(description="Position in the chain.")
    sample_index: int = Field(description="Which sample.")
    level: str = Field(description="The question's level.")
    model: str = Field(description="Model under test.")
    judge: str = Field(description="Always 'exact match'.")
    status: str = Field(description="scored or generation_error.")
    correct: bool | None = Field(description="The answer is the expected number.")
    prompt_tokens: int | None = Field(description="No judge: always None.")
    completion_tokens: int | None = Field(description="No judge: always None.")


class LevelScore(BaseModel):
    model: str = Field(description="Model under test.")
    level: str = Field(description="easy, hard.")
    questions: int = Field(description="Rows.")
    correct: int = Field(description="Correct answers.")
    accuracy: float | None = Field(description="correct / scored.")


class ChainArithmetic(Suite):
    name = "tiny"
    display_name = "Chain arithmetic"
    title = "Chain arithmetic (a test suite): answers that build on the model's own"
    group_column = "level"
    sample_noun = "questions"
    sample_key = ("chain", "step")
    stages = StageNames(samples="tiny_questions", responses="tiny_answers",
                        judgments="tiny_checks", scores="tiny_scores")
    tables = Tables(samples=Question, responses=Answer, judgments=Check, scores=LevelScore)
    needs_judge = False
    main_output = "scores.json"

    def locate(self, settings: RunSettings, store: Any) -> DataSource:
        if not settings.corpus.path:
            raise UserError("the tiny suite needs --corpus FILE")
        text = Path(settings.corpus.path).read_text(encoding="utf-8")
        return DataSource(str(hash(text)), settings.corpus.path, json.loads(text))

    def samples_key_settings(self, settings: RunSettings, source: DataSource) -> dict[str, Any]:
        return {"revision": source.revision}

    def build_samples(self, settings: RunSettings, source: DataSource) -> pl.DataFrame:
        return to_frame([Question(**row) for row in source.location], Question)

    def episodes(self, samples: pl.DataFrame) -> list[list[int]]:
        chains: dict[str, list[int]] = {}
        for index, chain in enumerate(samples["chain"].to_list()):
            chains.setdefault(chain, []).append(index)
        return list(chains.values())

    def generation_request(self, sample: dict[str, Any], earlier: list[Step], role: ModelRole,
                           prompts: Prompts, sample_index: int) -> ChatRequest | None:
        messages = []
        for question, answer in earlier:
            messages += [("user", question["prompt"]), ("assistant", answer["response"] or "")]
        messages.append(("user", sample["prompt"]))
        return ChatRequest.build(role, messages, sample_index=sample_index)

    def response_row(self, sample: dict[str, Any], outcome: ChatOutcome | None,
                     role: ModelRole, sample_index: int) -> Answer:
        assert outcome is not None
        return Answer(chain=sample["chain"], step=sample["step"], sample_index=sample_index,
                      model=role.model, status="ok" if outcome.ok else "error",
                      message=outcome.error, response=outcome.content,
                      prompt_tokens=outcome.prompt_tokens,
                      completion_tokens=outcome.completion_tokens)

    def judgment_row(self, sample: dict[str, Any], response: dict[str, Any],
                     outcome: ChatOutcome | None, role: ModelRole | None,
                     prompts: Prompts) -> Check:
        ok = response["status"] == "ok"
        return Check(chain=sample["chain"], step=sample["step"],
                     sample_index=response["sample_index"], level=sample["level"],
                     model=response["model"], judge="exact match",
                     status="scored" if ok else "generation_error",
                     correct=(response["response"] or "").strip() == str(sample["expected"])
                     if ok else None, prompt_tokens=None, completion_tokens=None)

    def score(self, judgments: pl.DataFrame) -> pl.DataFrame:
        scored = pl.col("status") == "scored"
        table = judgments.group_by("model", "level").agg(
            questions=pl.len(), correct=(scored & pl.col("correct")).sum().cast(pl.Int64),
            accuracy=pl.when(scored.sum() > 0).then(
                (scored & pl.col("correct")).sum() / scored.sum()))
        return table.sort("level").select("model", "level", "questions", "correct", "accuracy")

    def coverage(self, judgments: pl.DataFrame) -> tuple[int, int, dict[str, int]]:
        status = judgments["status"]
        return int((status == "scored").sum()), judgments.height, {
            "generation": int((status == "generation_error").sum())}

    # The history of nights: each answer right or wrong, the share correct per level and
    # overall, resampling chains (a chain's answers build on each other).
    history_metric = SHARE_CORRECT

    def history_samples(self, judgments: pl.DataFrame) -> pl.DataFrame:
        scored = pl.col("status") == "scored"
        return samples_frame(SHARE_CORRECT, judgments.select(
            sample=pl.concat_str("chain", "step", "sample_index", separator="|"),
            unit="chain", group="level",
            verdict=pl.when(scored).then(pl.when("correct").then(pl.lit("right"))
                                         .otherwise(pl.lit("wrong"))),
            value=pl.when(scored).then(pl.col("correct").cast(pl.Float64)),
            count=pl.when(scored).then(1.0)))

    def history_view_sample(self, sample: str) -> str:
        chain, step, _ = sample.split("|")
        return f"{chain}:{step}"

    def write_outputs(self, out: Path, samples: pl.DataFrame, responses: pl.DataFrame,
                      judgments: pl.DataFrame, scores: pl.DataFrame,
                      provenance: dict[str, Any]) -> dict[str, str]:
        out.mkdir(parents=True, exist_ok=True)
        path = out / "scores.json"
        path.write_text(json.dumps(scores.to_dicts()), encoding="utf-8")
        return {"scores.json": str(path)}
