"""Checks made before any paid call, and the plan printed before a run.

The plan counts the calls a run will make against the per-call cache: generation calls are known
exactly; judge calls are known for cached responses and counted as 'to make' for the rest (a
suite judging whole episodes: for episodes whose every reply is cached).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

import polars as pl

from ..cache.artifacts import Artifact, ArtifactStore
from ..cache.calls import open_call_store
from ..common.errors import UserError
from ..config.endpoints import endpoint_url, models_listing
from ..config.effective import wire_params
from ..providers.chat import ChatOutcome, ChatRequest, api_key_for
from ..batches.pricing import batch_cost
from ..batches.roles import batched, check_batch_roles
from ..providers.llm import estimated_cost
from ..config.settings import UNSENT_MAX_TOKENS_ESTIMATE, ModelRole, RunSettings
from ..suites.base import Prompts, Step, Suite
from .context_fit import fit_warning

T = TypeVar("T")


def check_vision(role: ModelRole) -> None:
    """A suite that sends images runs only on a model known to take them: declared by the user
    (--eval-vision, a sweep entry's vision = true) or so marked in litellm's model map. A model
    on the user's own endpoint is unknown to the map: a text-only server (llama-cpp-python's)
    would take the image parts and paste them into the prompt as text, and be scored on pictures
    it never saw."""
    if role.vision:
        return
    import litellm

    try:
        info = litellm.get_model_info(role.model)
    except Exception:  # litellm raises assorted types for models its map does not know
        raise UserError(
            f"model under test {role.model}: this suite shows images, and nothing says the "
            "model takes them (litellm's model map does not know it): pass --eval-vision (a "
            "sweep entry: vision = true) if it does") from None
    if not info.get("supports_vision"):
        raise UserError(f"model under test {role.model} does not take images, as litellm's "
                        "model map says; this suite shows images: choose a vision model (or "
                        "--eval-vision if the map is wrong)")


def check_access(role: ModelRole, label: str) -> None:
    """A key exists for the provider, or the endpoint answers; else one clear UserError."""
    if role.api_base:
        try:
            models_listing(endpoint_url(role.api_base, "/models"), api_key_for(role))
        except ValueError:
            pass  # it answered, with something else than a listing
        except urllib.error.HTTPError as exc:
            if exc.code in (401, 403):
                raise UserError(f"{label} endpoint {role.endpoint} rejected the API key "
                                f"(HTTP {exc.code})") from None
            # Any other answer proves the endpoint is up (some servers lack /models).
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ConnectionRefusedError):
                raise UserError(f"{label} endpoint {role.endpoint} refused the connection: is "
                                "its server running, on that port?") from None
            raise UserError(f"{label} endpoint {role.endpoint} does not answer ({reason})") \
                from None
    if role.api_key_env:
        if not os.environ.get(role.api_key_env):
            raise UserError(f"{label} {role.model}: environment variable {role.api_key_env} "
                            "is not set")
    elif not (role.api_base and role.model.startswith("openai/")):
        _require_provider_key(role, label)


def _require_provider_key(role: ModelRole, label: str) -> None:
    """The provider's usual key variables, as litellm knows them, are set."""
    import litellm

    try:
        found = litellm.validate_environment(model=role.model)
    except Exception as exc:  # litellm raises assorted types for unknown providers
        raise UserError(f"{label} {role.model}: litellm does not know this model ({exc})") \
            from None
    if not found.get("keys_in_environment", False):
        missing = ", ".join(found.get("missing_keys") or ["an API key"])
        raise UserError(f"{label} {role.model} needs {missing} in the environment "
                        f"(or --{'eval' if label.startswith('model') else 'judge'}-api-key-env)")


def role_lines(label: str, role: ModelRole, response_format: str | None = None) -> list[str]:
    """What a role sends on the wire after litellm's mapping, and how that departs from the
    protocol. Refused parameters are a one-line UserError here, before any call.
    `response_format`: the structured output the judge asks for, where it asks for one."""
    params = dict(ChatRequest.build(role, []).params)
    wire = " ".join(f"{name}={value}" for name, value in sorted(wire_params(
        role.model, params).items()) if name != "safety_settings")
    if response_format is not None:
        wire += f" response_format={response_format}" + (
            " (json_object, then none, where the server refuses it)"
            if response_format == "json_schema" else "")
    if role.generation.gemini_safety_off:
        wire += " safety_settings=BLOCK_NONE x4"
    lines = [f"  {label + ' sends:':<18}{wire or '(no generation parameters)'}"]
    for deviation in role.deviations:
        lines.append(f"  {'not protocol:':<18}{deviation.setting} {deviation.protocol} -> "
                     f"{deviation.sent} ({deviation.reason})")
    return lines


def called_roles(settings: RunSettings, regenerate: bool = True) -> dict[str, ModelRole]:
    """The roles a run calls: a re-judging calls only its judge."""
    return {name: role for name, role in settings.roles.items()
            if regenerate or name != "model_under_test"}


@dataclass
class Plan:
    summary: str
    """What the samples are (suite's words: dialogues, triggers, traces, events)."""
    generation_calls: int
    generation_cached: int
    judge_calls: int
    judge_cached: int
    generation_prompt_tokens: int = 0
    """Estimated prompt tokens of the generation calls still to make."""
    judge_prompt_tokens: int = 0
    """Estimated prompt tokens of the judge calls still to make."""
    judge_at_most: int = 0
    """Episode-judged suites: judge calls that episodes not yet answered may need (an upper
    bound: they depend on the replies)."""
    generation_at_most: int = 0
    """Interactive suites: generation calls their environments may still ask for after an
    episode's first step to make (an upper bound: each environment decides as it goes)."""
    generation_prompt_sizes: list[int] = field(default_factory=list)
    """Estimated prompt tokens of each generation call still to make (context_fit.py)."""
    judge_prompt_sizes: list[int] = field(default_factory=list)
    """Estimated prompt tokens of each judge call still to make."""
    generation_rounds: int = 0
    """--batch: the batches one after the other that generation takes at most (the longest
    episode's steps), replies asked again aside."""

    def _estimate(self, label: str, role, calls: int, prompt_tokens: int) -> str:
        most = calls * (role.generation.max_tokens or UNSENT_MAX_TOKENS_ESTIMATE)
        low = estimated_cost(role.model, prompt_tokens, 0)
        high = estimated_cost(role.model, prompt_tokens, most)
        cost = (f"${low:.2f} (prompts only) to ${high:.2f} (every reply at max tokens)"
                if low is not None and high is not None else "unknown (not in litellm's price map)")
        if batched(role) and low is not None:
            batch_low = batch_cost(role.model, prompt_tokens, 0)
            batch_high = batch_cost(role.model, prompt_tokens, most)
            cost = (f"${batch_low:.2f} to ${batch_high:.2f} in batches vs {cost} interactive"
                    if batch_low is not None and batch_high is not None else
                    f"{cost} interactive; its batch price is not in litellm's map")
        return (f"{label}~{prompt_tokens:,} prompt tokens to send, replies up to {most:,} tokens; "
                f"estimated cost {cost}")

    def lines(self, settings: RunSettings, corpus_revision: str, regenerate: bool,
              judge_response_format: str | None = None) -> list[str]:
        out = [f"corpus      {settings.corpus.describe()} (revision {corpus_revision[:19]})",
               f"plan        {self.summary}"
               + (f", {settings.samples} samples each" if settings.samples > 1 else "")]
        for label, role, used in (("generation", settings.model_under_test, regenerate),
                                  ("judging", settings.judge, True)):
            if used and role is not None:
                out.extend(role_lines(label, role, judge_response_format
                                      if label == "judging" else None))
        out.extend(check_batch_roles(called_roles(settings, regenerate)))
        if regenerate and self.generation_rounds:
            rounds = self.generation_rounds
            out.append(f"rounds      generation: at most {rounds} "
                       f"{'batch' if rounds == 1 else 'batches one after the other'} (the "
                       "longest episode's steps; a reply asked again adds one), each judged as "
                       "it comes back")
        generation_to_make = self.generation_calls - self.generation_cached
        judge_to_make = self.judge_calls - self.judge_cached
        if regenerate:
            out.append(f"generation  {settings.model_under_test.model}: "
                       f"{self.generation_calls} calls, {self.generation_cached} cached, "
                       f"{generation_to_make} to make"
                       + (f", and at most {self.generation_at_most} more as environments go on"
                          if self.generation_at_most else ""))
            generation_to_make += self.generation_at_most
        out.append(f"judging     {settings.judge_name}: {self.judge_calls} calls, "
                   f"{self.judge_cached} cached, {judge_to_make} to make"
                   + (f", and at most {self.judge_at_most} more as replies come"
                      if self.judge_at_most else ""))
        judge_to_make += self.judge_at_most
        if regenerate and generation_to_make:
            out.append(self._estimate("  generation: ", settings.model_under_test,
                                      generation_to_make, self.generation_prompt_tokens))
        if judge_to_make and settings.judge is not None:
            out.append(self._estimate("  judging:    ", settings.judge, judge_to_make,
                                      self.judge_prompt_tokens))
        for label, role, sizes in (("generation", settings.model_under_test,
                                    self.generation_prompt_sizes if regenerate else []),
                                   ("judge", settings.judge, self.judge_prompt_sizes)):
            warning = fit_warning(label, role, sizes) if role is not None else None
            if warning:
                out.append(warning)
        return out


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

    def next_sample(self) -> None:
        self.position, self.steps = self.position + 1, 0


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
    those. The cache is read in batches: one per step of the episodes (ProactBench: one)."""
    frame = samples.frame()
    rows = frame.to_dicts()
    role, judge = settings.model_under_test, settings.judge
    plan = Plan(suite.plan_summary(frame), 0, 0, 0, 0)
    judged: list[tuple[ChatRequest, bool]] = []  # (request, its reply was cached)

    def plan_judge(sample: dict, response: dict, cached_reply: bool) -> None:
        request = suite.judgment_request(sample, response, judge, judge_prompts, settings)
        if request is not None:
            judged.append((request, cached_reply))

    def plan_episode(sample: dict, steps: list[dict]) -> None:
        for request in suite.episode_judge_requests(sample, steps, judge, judge_prompts,
                                                    settings):
            judged.append((request, True))

    if responses is not None:
        position = {tuple(r[c] for c in suite.sample_key): i for i, r in enumerate(rows)}
        episodes: dict[tuple, list[dict]] = {}
        for response in responses.iter_rows(named=True):
            values = tuple(response[c] for c in suite.sample_key)
            if suite.judges_episodes:
                episodes.setdefault((*values, response["sample_index"]), []).append(response)
            else:
                plan_judge(rows[position[values]], response, True)
        for steps in episodes.values():
            plan_episode(rows[position[tuple(steps[0][c] for c in suite.sample_key)]], steps)
    else:
        # Every (episode, sample) walks in step with the others, one cache batch per step.
        walks = [_Walk(episode, sample_index) for episode in suite.episodes(frame)
                 for sample_index in range(settings.samples)]
        while active := [walk for walk in walks if walk.position < len(walk.episode)]:
            asked: list[tuple[str, int] | None] = []
            for walk in active:
                request = suite.generation_request(rows[walk.episode[walk.position]],
                                                   walk.earlier, role, generation_prompts,
                                                   walk.sample_index)
                # Key and estimate only: an image the request holds is not kept for the plan.
                asked.append(None if request is None else
                             (request.key, request.estimated_prompt_tokens))
            wanted = [summary[0] for summary, walk in zip(asked, active)
                      if summary is not None and walk.known]
            found: dict[str, dict[str, Any]] = {}
            for batch in _batches(wanted):
                found.update(lookup(batch))
            for summary, walk in zip(asked, active):
                sample = rows[walk.episode[walk.position]]
                limit = suite.step_limit(sample)
                outcome = None
                if summary is not None:
                    key, prompt_tokens = summary
                    plan.generation_calls += 1
                    hit = found.get(key) if walk.known else None
                    if hit is not None:
                        plan.generation_cached += 1
                        outcome = ChatOutcome.from_record(key, hit)
                    else:
                        walk.known = False
                        plan.generation_prompt_tokens += prompt_tokens
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
    for batch in _batches([request.key for request, cached in judged if cached]):
        cached_keys.update(lookup(batch))
    for request, _ in judged:
        plan.judge_calls += 1
        if request.key in cached_keys:
            plan.judge_cached += 1
        else:
            plan.judge_prompt_tokens += request.estimated_prompt_tokens
            plan.judge_prompt_sizes.append(request.estimated_prompt_tokens)
    if responses is None and batched(role):
        plan.generation_rounds = max((sum(suite.step_limit(rows[index]) for index in episode)
                                      for episode in suite.episodes(frame)), default=0)
    return plan




def stage_states(suite: Suite, settings: RunSettings, store, samples: Artifact,
                 generation_prompts: Prompts, judge_prompts: Prompts) -> list[str]:
    """One line per stage: stored or not, complete or not, error rows."""
    from .pipeline import judgments_spec, responses_spec, scores_spec

    names = suite.stages
    lines = [f"{names.samples:<13} {samples.key[:12]}  stored, {samples.frame().height} rows"]
    spec = responses_spec(suite, settings, samples.key, generation_prompts)
    for stage in (names.responses, names.judgments, names.scores):
        found = store.get(spec)
        if found is None:
            lines.append(f"{stage:<13} {spec.key[:12]}  not stored")
        else:
            frame = found.frame()
            errors = frame.filter(pl.col("status").is_in(list(suite.error_statuses))).height \
                if "status" in frame.columns else 0
            state = "complete" if found.complete else "incomplete (a run will retry failures)"
            counted = f"{errors} failed"
            if stage == names.judgments and "status" in frame.columns:
                # Counted as the run's closing summary counts them (Suite.coverage).
                scored, total, lost = suite.coverage(frame)
                failed = {kind: n for kind, n in lost.items() if n and kind != "refused"}
                kinds = ", ".join(f"{n} {kind}" for kind, n in failed.items())
                counted = (f"{scored} of {total} scored, {sum(failed.values())} failed"
                           + (f" ({kinds})" if kinds else "")
                           + (f", {lost['refused']} refused" if lost.get("refused") else ""))
            lines.append(f"{stage:<13} {spec.key[:12]}  stored, {frame.height} rows, "
                         f"{counted}, {state}")
        if stage == names.responses:
            spec = judgments_spec(suite, settings, spec.key, judge_prompts)
        elif stage == names.judgments:
            spec = scores_spec(suite, spec.key)
    return lines
