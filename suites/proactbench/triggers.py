"""triggers: one row per trigger point, with the context the model under test will see."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence

import polars as pl

from ...schemas.arrow import to_frame
from .corpus import CorpusRow
from .tables import Message, TriggerRow

STAGE = "triggers"
VERSION = 1


def trigger_context(row: CorpusRow, turn: int) -> tuple[list[Message], str | None, str | None]:
    """PROTOCOL.md step 1: earlier turns (user, curation-time assistant) then the user message of
    `turn`. Returns the messages, the trigger turn's user message (None when it has none) and the
    curation-time response at that turn."""
    messages: list[Message] = []
    user_message: str | None = None
    curation_response: str | None = None
    for record in row.turn_records:
        if record.turn < turn:
            if record.user_message is not None:
                messages.append(Message(role="user", content=record.user_message))
            if record.assistant_response is not None:
                messages.append(Message(role="assistant", content=record.assistant_response))
        elif record.turn == turn:
            user_message = record.user_message or None
            curation_response = record.assistant_response
    if user_message is not None:
        messages.append(Message(role="user", content=user_message))
    return messages, user_message, curation_response


def build_triggers(rows: Sequence[CorpusRow], *, limit: int | None = None,
                   phases: Iterable[str] = ("EMERGENT", "CRITICAL", "RECOVERY")) -> pl.DataFrame:
    """The triggers table of the first `limit` dialogues, restricted to `phases`.

    A trigger whose turn has no user message stays, marked not evaluable with the reason.
    """
    return to_frame(_trigger_rows(rows[:limit] if limit else rows,
                                  {phase.upper() for phase in phases}), TriggerRow)


def _trigger_rows(rows: Sequence[CorpusRow], wanted: set[str]) -> Iterator[TriggerRow]:
    """Made one at a time as the table takes them: never all held at once."""
    for index, row in enumerate(rows):
        for point in row.trigger_points:
            phase = point.evaluation_rubric.type.value
            if phase not in wanted:
                continue
            context, user_message, curation_response = trigger_context(row, point.turn)
            evaluable = user_message is not None
            yield TriggerRow(
                unique_id_eval=row.unique_id_eval,
                dialogue_index=index,
                blueprint_id=row.blueprint_id,
                scenario_id=row.scenario_id,
                uuid=row.uuid,
                category_key=row.category_key,
                style_combination_index=row.style_combination_index,
                source_evaluated_model=row.evaluated_model,
                turn=point.turn,
                phase=phase,
                rubric=point.evaluation_rubric,
                context=context,
                user_message=user_message,
                curation_response=curation_response,
                evaluable=evaluable,
                unevaluable_reason=None if evaluable else f"no user message at turn {point.turn}",
            )
