"""responses: the model under test's reply to every sample, episode by episode.

The episodes of a suite run in parallel (`concurrency` at once); the samples of one episode run
in order, each request planned from the response rows before it, so a suite whose model answers a
trace event by event sees its own earlier replies, and an environment's next view follows from
the replies so far (a sample shown again while the suite says so, up to its step limit). Every sample gets a row: a sample that cannot
be asked and a call that failed carry a status instead of disappearing.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable, TypeVar

import polars as pl
from pydantic import BaseModel

from ..config.settings import ModelRole
from ..providers.llm import ChatClient
from ..schemas.arrow import ArrowRows, arrow_schema, frame_of
from ..suites.base import Prompts, Step, Suite
from .pools import run_bounded

T = TypeVar("T")


async def generate_responses(suite: Suite, samples: pl.DataFrame, role: ModelRole,
                             prompts: Prompts, client: ChatClient, *, samples_per_item: int = 1,
                             concurrency: int = 16,
                             on_row: Callable[[BaseModel, dict[str, Any]], None] | None = None
                             ) -> pl.DataFrame:
    """One responses row per (sample, sample_index); `on_row` sees each with its dict (the
    row as `model_dump(by_alias=True)` gives it) as soon as it exists."""
    parse = suite.reply_parser()
    jobs = [(episode, sample_index) for episode in suite.episodes(samples)
            for sample_index in range(samples_per_item)]
    if client.runtime.prompt_cache == "auto":
        jobs = in_waves(jobs, lambda job: suite.prefix_group(samples.row(job[0][0], named=True)))

    rows = ArrowRows(arrow_schema(suite.tables.responses))

    async def run_episode(job: tuple[list[int], int]) -> None:
        episode, sample_index = job
        earlier: list[Step] = []
        for index in episode:
            # One sample as a dict when its turn comes: all of them at once held about 18 MB
            # for the whole stage in a full-size evaluation (a sweep holds one per model).
            sample = samples.row(index, named=True)
            for step in range(suite.step_limit(sample)):
                request = suite.generation_request(sample, earlier, role, prompts, sample_index)
                outcome = await client.call(request, accept=parse) if request is not None \
                    else None
                del request  # an image it holds is not kept while the episode goes on
                row = suite.step_row(sample, earlier, outcome, role, sample_index)
                dumped = row.model_dump(by_alias=True)
                rows.append(dumped)
                earlier.append((sample, dumped))
                if on_row is not None:
                    on_row(row, dumped)
                if not suite.another_step(sample, earlier):
                    break

    await run_bounded(jobs, run_episode, concurrency)
    return frame_of(rows.table()).sort(*suite.sample_key, "sample_index", *_steps(suite))


def in_waves(jobs: list[T], group_of: Callable[[T], str | None]) -> list[T]:
    """The jobs in waves: the first job of every prefix group (a conversation's first turn),
    then every group's second, and so on, each wave in the jobs' order. A job goes out after
    the one before it in its group was answered (the client's CallOrder waits for it), and in
    waves that was most often long before: it finds the prefix they share in the provider's
    prompt cache, while the pool stays as busy as in any order."""
    seen: Counter[str] = Counter()
    ranked = []
    for position, job in enumerate(jobs):
        group = group_of(job)
        ranked.append((seen[group] if group is not None else 0, position))
        if group is not None:
            seen[group] += 1
    return [jobs[position] for _, position in sorted(ranked)]


def _steps(suite: Suite) -> tuple[str, ...]:
    return (suite.step_column,) if suite.step_column else ()
