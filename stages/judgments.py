"""judgments: the suite's verdict on every response: a judge call (an LLM, or a reward model
behind an OpenAI-compatible endpoint) or a deterministic check, as the suite plans it.

Judging starts with the first response: the responses can arrive as a stream while their stage
is still running. A response that is not an answer is never sent to the judge; the suite carries
its status through, so aggregation counts it.
"""

from __future__ import annotations

from typing import Any, Callable

import polars as pl
from pydantic import BaseModel

from ..llm import ChatClient
from ..pools import run_pool
from ..schemas.arrow import to_frame
from ..settings import ModelRole, RunSettings
from ..streaming import RowStream
from ..suites.base import Prompts, Suite


async def judge_responses(suite: Suite, samples: pl.DataFrame,
                          responses: pl.DataFrame | RowStream, role: ModelRole | None,
                          prompts: Prompts, client: ChatClient | None, settings: RunSettings, *,
                          concurrency: int = 16,
                          on_row: Callable[[BaseModel], None] | None = None) -> pl.DataFrame:
    """One judgments row per responses row."""
    stream = responses if isinstance(responses, RowStream) else RowStream.of(responses.to_dicts())
    key = suite.sample_key
    # Samples are made dicts one at a time, when judged (see responses.py).
    position = {values: index for index, values in enumerate(samples.select(key).rows())}

    async def judge(response: dict[str, Any]) -> BaseModel:
        sample = samples.row(position[tuple(response[column] for column in key)], named=True)
        request = suite.judgment_request(sample, response, role, prompts, settings)
        outcome = None
        if request is not None:
            assert client is not None, "a suite that plans judge calls needs a judge"
            outcome = await client.call(request, accept=suite.accept_judge_reply)
        return suite.judgment_row(sample, response, outcome, role, prompts)

    judged = await run_pool(stream.get, judge, concurrency, on_row)
    steps = (suite.step_column,) if suite.step_column else ()
    return to_frame(judged, suite.tables.judgments).sort(*key, "sample_index", *steps)
