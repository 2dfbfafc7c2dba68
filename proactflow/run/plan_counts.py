"""Counting a run's calls against the per-call cache (`make_plan`), for the plan printed before a
run (plan.py, which prints what this counts).

Generation calls are known exactly; judge calls are known for cached responses and counted as
'to make' for the rest (a suite judging whole episodes: for episodes whose every reply is
cached). The plan keeps of each request its key and estimated size only, and reads the samples
one at a time: it never holds the corpus a second time beside the samples' table.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

import polars as pl

from ..batches.roles import batched
from ..cache.artifacts import Artifact, ArtifactStore
from ..cache.calls import open_call_store
from ..config.settings import RunSettings
from ..providers.chat import ChatOutcome, ChatRequest
from ..providers.prompt_cache import Shape, SharedPrefixes
from ..suites.base import Prompts, Step, Suite
from .plan import Plan

T = TypeVar("T")


@dataclass
class _Walk:
    """One (episode, sample index) walked against the cache by `make_plan`."""

    episode: list[int]
    sample_index: int
    earlier: list[Step] = field(default_factory=list)
    known: bool = True
    """Every reply so far was cached: the episode's requests are known exactly."""
    position: int = 0
    """The episode's sample being walked."""
    steps: int = 0
    """Steps taken on that sample."""
    sample: dict[str, Any] | None = None
    """That sample as a dict, made when its first step is walked (as the stages make it once
    for all its steps: a dict a step held every step's copy of its texts)."""

    def next_sample(self) -> None:
        self.position, self.steps, self.sample = self.position + 1, 0, None
        if self.position >= len(self.episode):
            self.earlier = []  # the episode is walked: its samples and rows are let go


CallLookup = Callable[[Sequence[str]], dict[str, dict[str, Any]]]
"""The records the per-call cache holds for any of these keys."""
_BATCH = 500  # requests looked up at once: one round trip each to a database


@contextlib.contextmanager
def lookup_calls(store: ArtifactStore, database: str | None) -> Iterator[CallLookup]:
    """Batched reads of the per-call cache for this synchronous code, on an event loop of its
    own (there is none running before a flow starts)."""
    calls = open_call_store(store.local_dir("calls"), database)
    loop = asyncio.new_event_loop()
    try:
        yield lambda keys: loop.run_until_complete(calls.get_many(keys))
    finally:
        try:
            loop.run_until_complete(calls.close())
        finally:
            loop.close()


def _batches(items: Iterable[T]) -> Iterator[list[T]]:
    iterator = iter(items)
    while batch := list(itertools.islice(iterator, _BATCH)):
        yield batch


def make_plan(suite: Suite, settings: RunSettings, samples: Artifact, lookup: CallLookup,
              generation_prompts: Prompts, judge_prompts: Prompts,
              responses: pl.DataFrame | None = None) -> Plan:
    """Count the calls to make and estimate their prompt tokens, by walking every episode
    against the per-call cache: a cached reply is read as the run would read it, so the next
    request of the episode and the judge's request are known exactly. From the first reply not
    cached on, the episode goes on with the suite's stand-in reply (ProactBench: the
    curation-time response), counted as to make. With `responses` (rejudge), judge exactly
    those. The cache is read in batches: one per step of the episodes (ProactBench: one).
    A sample is made a dict when its turn comes (as the stages do), and of a request only its
    key and estimated prompt tokens are kept: all samples as dicts at once, and every judge
    request with its prompt, held about 40 MB for the 624 triggers of ProactBench."""
    frame = samples.frame()
    role, judge = settings.model_under_test, settings.judge
    plan = Plan(suite.plan_summary(frame), 0, 0, 0, 0)
    judged: list[tuple[str, int, bool, Shape]] = []  # (key, tokens, reply cached, shape)
    prefixes = SharedPrefixes()  # of the calls to make, in the run's order

    def sample_at(index: int) -> dict[str, Any]:
        return frame.row(index, named=True)

    def note_judged(request: ChatRequest | None, cached_reply: bool) -> None:
        if request is not None:
            judged.append((request.key, request.estimated_prompt_tokens, cached_reply,
                           request.shape()))

    def plan_judge(sample: dict, response: dict, cached_reply: bool) -> None:
        note_judged(suite.judgment_request(sample, response, judge, judge_prompts, settings),
                    cached_reply)

    def plan_episode(sample: dict, steps: list[dict]) -> None:
        for request in suite.episode_judge_requests(sample, steps, judge, judge_prompts,
                                                    settings):
            note_judged(request, True)

    if responses is not None:
        position = {values: index for index, values
                    in enumerate(frame.select(suite.sample_key).rows())}
        episodes: dict[tuple, list[dict]] = {}
        for response in responses.iter_rows(named=True):
            values = tuple(response[c] for c in suite.sample_key)
            if suite.judges_episodes:
                episodes.setdefault((*values, response["sample_index"]), []).append(response)
            else:
                plan_judge(sample_at(position[values]), response, True)
        for steps in episodes.values():
            plan_episode(sample_at(position[tuple(steps[0][c] for c in suite.sample_key)]),
                         steps)
    else:
        # Every (episode, sample) walks in step with the others, one cache batch per step.
        walks = [_Walk(episode, sample_index) for episode in suite.episodes(frame)
                 for sample_index in range(settings.samples)]
        while active := [walk for walk in walks if walk.position < len(walk.episode)]:
            asked: list[tuple[str, int, Shape] | None] = []
            for walk in active:
                if walk.sample is None:
                    walk.sample = sample_at(walk.episode[walk.position])
                request = suite.generation_request(walk.sample, walk.earlier, role,
                                                   generation_prompts, walk.sample_index)
                # Key and estimate only: an image the request holds is not kept for the plan.
                asked.append(None if request is None else
                             (request.key, request.estimated_prompt_tokens,
                              request.shape()))
            wanted = [summary[0] for summary, walk in zip(asked, active)
                      if summary is not None and walk.known]
            found: dict[str, dict[str, Any]] = {}
            for batch in _batches(wanted):
                found.update(lookup(batch))
            for summary, walk in zip(asked, active):
                sample = walk.sample
                assert sample is not None, "made for its request above"
                limit = suite.step_limit(sample)
                outcome = None
                if summary is not None:
                    key, prompt_tokens, shape = summary
                    plan.generation_calls += 1
                    hit = found.get(key) if walk.known else None
                    if hit is not None:
                        plan.generation_cached += 1
                        outcome = ChatOutcome.from_record(key, hit)
                    else:
                        walk.known = False
                        plan.generation_prompt_tokens += prompt_tokens
                        plan.generation_cacheable_tokens += prefixes.cacheable(shape)
                        plan.generation_prompt_sizes.append(prompt_tokens)
                        if limit > 1 and not suite.steps_known:
                            # An environment's path past an unanswered step is unknown: count
                            # the steps it may still take, at this step's size, and move on.
                            rest = limit - walk.steps - 1
                            plan.generation_at_most += rest
                            plan.generation_prompt_tokens += rest * prompt_tokens
                            plan.judge_at_most += suite.episode_judge_calls_at_most(sample) \
                                if suite.judges_episodes else 0
                            walk.next_sample()
                            continue
                        outcome = ChatOutcome(key, content=suite.stand_in_reply(sample) or "")
                row = suite.step_row(sample, walk.earlier, outcome, role,
                                     walk.sample_index).model_dump(by_alias=True)
                walk.earlier.append((sample, row))
                if not suite.judges_episodes:
                    plan_judge(sample, row, outcome is None or outcome.from_cache)
                walk.steps += 1
                if walk.steps >= limit or not suite.another_step(sample, walk.earlier):
                    if suite.judges_episodes and walk.known:
                        plan_episode(sample, [row for _, row in walk.earlier[-walk.steps:]])
                    elif suite.judges_episodes:  # replies still to come: at most so many calls
                        plan.judge_at_most += suite.episode_judge_calls_at_most(sample)
                    walk.next_sample()
    cached_keys: set[str] = set()
    for batch in _batches([key for key, _, cached, _ in judged if cached]):
        cached_keys.update(lookup(batch))
    for key, prompt_tokens, _, shape in judged:
        plan.judge_calls += 1
        if key in cached_keys:
            plan.judge_cached += 1
        else:
            plan.judge_prompt_tokens += prompt_tokens
            plan.judge_cacheable_tokens += prefixes.cacheable(shape)
            plan.judge_prompt_sizes.append(prompt_tokens)
    if responses is None and batched(role):
        plan.generation_rounds = max((sum(suite.step_limit(sample_at(index)) for index in episode)
                                      for episode in suite.episodes(frame)), default=0)
    return plan
