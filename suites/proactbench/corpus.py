"""The ProactBench corpus as released (`final_dialogues.jsonl`): what a valid row looks like.

Only the fields the offline protocol reads are modelled; the rest (planner notes, curation-time
labels and stats) are ignored on purpose so they can never reach the model under test or the
judge.
"""

from __future__ import annotations

from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, field_validator


class Phase(str, Enum):
    """Trigger type, which is also the conversation phase it belongs to."""

    EMERGENT = "EMERGENT"
    CRITICAL = "CRITICAL"
    RECOVERY = "RECOVERY"


PHASES: tuple[str, ...] = tuple(p.value for p in Phase)


class Rubric(BaseModel):
    """The evaluation rubric of one trigger, written before any model answered.

    Field order matters: the judge sees `model_dump_json(indent=2)` of exactly these four fields.
    """

    model_config = ConfigDict(extra="ignore")

    type: Phase = Field(description="Trigger type: EMERGENT, CRITICAL or RECOVERY.")
    pass_criteria: str = Field(description="What a response must do to PASS.")
    partial_criteria: str = Field(description="What earns PARTIAL credit.")
    fail_criteria: str = Field(description="What makes a response FAIL.")


class TriggerPoint(BaseModel):
    """A turn at which the assistant is expected to act proactively."""

    model_config = ConfigDict(extra="ignore")

    turn: int = Field(ge=1, description="1-based turn number the trigger is declared for.")
    evaluation_rubric: Rubric = Field(description="The rubric the judge scores against.")


class TurnRecord(BaseModel):
    """One user/assistant exchange of the curated dialogue."""

    model_config = ConfigDict(extra="ignore")

    turn: int = Field(ge=1, description="1-based turn number.")
    user_message: str | None = Field(default=None, description="What the simulated user said.")
    assistant_response: str | None = Field(
        default=None, description="The curation-time assistant response (kept in the history).")


class CorpusRow(BaseModel):
    """One dialogue of the corpus."""

    model_config = ConfigDict(extra="ignore")

    unique_id_eval: str = Field(min_length=1, description="Primary key of the dialogue.")
    uuid: str = Field(description="Persona/scenario uuid; not unique on its own.")
    blueprint_id: str = Field(description="Blueprint the dialogue was generated from.")
    scenario_id: str = Field(description="Scenario of the blueprint.")
    category_key: str = Field(description="Persona category, e.g. professional_persona.")
    style_combination_index: int = Field(description="Index (1-24) of the user style mix.")
    evaluated_model: str = Field(description="Model that produced the curation-time responses.")
    trigger_points: list[TriggerPoint] = Field(description="The dialogue's trigger points.")
    turn_records: list[TurnRecord] = Field(description="The dialogue's turns in order.")

    @field_validator("trigger_points")
    @classmethod
    def _trigger_turns_unique(cls, points: list[TriggerPoint]) -> list[TriggerPoint]:
        return _unique_turns(points, "two trigger points at turn {}")

    @field_validator("turn_records")
    @classmethod
    def _turns_unique(cls, records: list[TurnRecord]) -> list[TurnRecord]:
        return _unique_turns(records, "turn {} appears twice")


def _unique_turns(items: list, problem: str) -> list:
    """`items` when no two have the same `turn`; else ValueError(problem.format(turn))."""
    seen: set[int] = set()
    for item in items:
        if item.turn in seen:
            raise ValueError(problem.format(item.turn))
        seen.add(item.turn)
    return items
