"""What the judge must answer: the structured output of PROTOCOL.md step 4."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Score = Literal["PASS", "PARTIAL", "FAIL"]
SCORE_WEIGHT: dict[str, float] = {"PASS": 1.0, "PARTIAL": 0.5, "FAIL": 0.0}


class EvaluationResult(BaseModel):
    """The judge's verdict on one regenerated response."""

    model_config = ConfigDict(extra="ignore")

    status: Literal["EVALUATED", "SKIPPED"] = Field(
        description="EVALUATED when the judge scored the response, SKIPPED when it declined.")
    score: Score | None = Field(default=None, description="PASS, PARTIAL or FAIL.")
    rationale: str = Field(default="", description="Why the judge gave this score.")
    evidence: str = Field(default="", description="A verbatim quote from the response.")

    @field_validator("status", "score", mode="before")
    @classmethod
    def _upper_case(cls, value: object) -> object:
        """Judges sometimes answer "pass" or "Evaluated": the words, not their case, count."""
        return value.strip().upper() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _evaluated_needs_score(self) -> "EvaluationResult":
        if self.status == "EVALUATED" and self.score is None:
            raise ValueError("status EVALUATED without a score")
        return self


class JudgeReply(BaseModel):
    """The whole JSON object the judge returns."""

    model_config = ConfigDict(extra="ignore")

    evaluation_result: EvaluationResult = Field(description="The verdict.")
