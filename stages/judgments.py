"""judgments: the suite's verdict on every response: a judge call (an LLM, or a reward model
behind an OpenAI-compatible endpoint) or a deterministic check, as the suite plans it.

Judging starts with the first response: the responses can arrive as a stream while their stage
is still running. A response that is not an answer is never sent to the judge; the suite carries
its status through, so aggregation counts it. A suite that judges whole episodes
(`Suite.judges_episodes`) gets each sample's steps once its episode has ended, while the other
episodes are still being answered.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable

import polars as pl
from pydantic import BaseModel

from ..config.settings import ModelRole, RunSettings
from ..providers.llm import ChatClient
from ..schemas.arrow import to_frame
from ..suites.base import Prompts, Suite
from .pools import run_pool
from .streaming import RowStream


async def judge_responses(suite: Suite, samples: pl.DataFrame,
                          responses: pl.DataFrame | RowStream, role: ModelRole | None,
                          prompts: Prompts, client: ChatClient | None, settings: RunSettings, *,
                          concurrency: int = 16,
                          on_row: Callable[[BaseModel], None] | None = None) -> pl.DataFrame:
    """One judgments row per responses row (or the rows a suite makes of each episode)."""
    stream = responses if isinstance(responses, RowStream) else RowStream.of(responses.to_dicts())
    key = suite.sample_key
    # Samples are made dicts one at a time, when judged (see responses.py).
    position = {values: index for index, values in enumerate(samples.select(key).rows())}

    def sample_of(response: dict[str, Any]) -> dict[str, Any]:
        return samples.row(position[tuple(response[column] for column in key)], named=True)

    async def call(request: Any) -> Any:
        assert client is not None, "a suite that plans judge calls needs a judge"
        return await client.call(request, accept=suite.accept_judge_reply)

    if suite.judges_episodes:
        episodes = EndedEpisodes(suite, stream, sample_of)

        async def judge_episode(episode: tuple[dict[str, Any], list[dict[str, Any]]]
                                ) -> list[BaseModel]:
            sample, steps = episode
            requests = suite.episode_judge_requests(sample, steps, role, prompts, settings)
            outcomes = list(await asyncio.gather(*(call(request) for request in requests)))
            return suite.episode_judgment_rows(sample, steps, outcomes, role, prompts)

        judged_episodes = await run_pool(episodes.next, judge_episode, concurrency,
                                         _each(on_row) if on_row is not None else None)
        judged = [row for rows in judged_episodes for row in rows]
    else:
        async def judge(response: dict[str, Any]) -> BaseModel:
            sample = sample_of(response)
            request = suite.judgment_request(sample, response, role, prompts, settings)
            outcome = await call(request) if request is not None else None
            return suite.judgment_row(sample, response, outcome, role, prompts)

        judged = await run_pool(stream.get, judge, concurrency, on_row)
    steps = (suite.step_column,) if suite.step_column else ()
    frame = to_frame(judged, suite.tables.judgments)
    order = [column for column in (*key, "sample_index", *steps) if column in frame.columns]
    return frame.sort(*order, maintain_order=True)


def _each(on_row: Callable[[BaseModel], None]) -> Callable[[list[BaseModel]], None]:
    def each(rows: list[BaseModel]) -> None:
        for row in rows:
            on_row(row)
    return each


class EndedEpisodes:
    """Responses rows gathered per (sample, sample_index) and handed out one ended episode at a
    time (its sample and steps in order); at the end of the stream, whatever is left."""

    def __init__(self, suite: Suite, stream: RowStream,
                 sample_of: Callable[[dict[str, Any]], dict[str, Any]]):
        self._suite, self._stream, self._sample_of = suite, stream, sample_of
        self._open: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        self._lock = asyncio.Lock()
        self._drained = False

    async def next(self) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        async with self._lock:  # one worker reads the stream at a time
            while not self._drained:
                row = await self._stream.get()
                if row is None:
                    self._drained = True
                    break
                episode = (*(row[c] for c in self._suite.sample_key), row["sample_index"])
                steps = self._open.setdefault(episode, [])
                steps.append(row)
                sample = self._sample_of(row)
                if self._suite.episode_ended(sample, steps):
                    return sample, self._open.pop(episode)
            if self._open:  # the stream ended: episodes cut short are judged as they stand
                _, steps = self._open.popitem()
                return self._sample_of(steps[0]), steps
            return None
