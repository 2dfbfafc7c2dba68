"""Checks made before any paid call, and the plan printed before a run.

The plan counts the calls a run will make against the per-call cache: generation calls are known
exactly; judge calls are known for cached responses and counted as 'to make' for the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

import polars as pl

from .cache.artifacts import Artifact, ArtifactStore
from .cache.calls import open_call_store
from .errors import UserError
from .endpoints import endpoint_url, get_request
from .effective import wire_params
from .chat import ChatRequest, api_key_for
from .llm import estimated_cost
from .settings import ModelRole, RunSettings
from .sources import JudgePrompt
from .stages.judgments import judge_request
from .stages.responses import planned_requests

T = TypeVar("T")


def check_access(role: ModelRole, label: str) -> None:
    """A key exists for the provider, or the endpoint answers; else one clear UserError."""
    if role.api_base:
        request = get_request(endpoint_url(role.api_base, "/models"), api_key_for(role))
        try:
            with urllib.request.urlopen(request, timeout=10):
                pass
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


def role_lines(label: str, role: ModelRole) -> list[str]:
    """What a role sends on the wire after litellm's mapping, and how that departs from the
    protocol. Refused parameters are a one-line UserError here, before any call."""
    params = dict(ChatRequest.build(role, []).params)
    wire = " ".join(f"{name}={value}" for name, value in sorted(wire_params(
        role.model, params).items()) if name != "safety_settings")
    if role.generation.gemini_safety_off:
        wire += " safety_settings=BLOCK_NONE x4"
    lines = [f"  {label + ' sends:':<18}{wire or '(no generation parameters)'}"]
    for deviation in role.deviations:
        lines.append(f"  {'not protocol:':<18}{deviation.setting} {deviation.protocol} -> "
                     f"{deviation.sent} ({deviation.reason})")
    return lines


@dataclass
class Plan:
    dialogues: int
    triggers: int
    unevaluable: int
    generation_calls: int
    generation_cached: int
    judge_calls: int
    judge_cached: int
    generation_prompt_tokens: int = 0
    """Estimated prompt tokens of the generation calls still to make."""
    judge_prompt_tokens: int = 0
    """Estimated prompt tokens of the judge calls still to make."""

    def _estimate(self, label: str, role, calls: int, prompt_tokens: int) -> str:
        most = calls * role.generation.max_tokens
        low = estimated_cost(role.model, prompt_tokens, 0)
        high = estimated_cost(role.model, prompt_tokens, most)
        cost = (f"${low:.2f} (prompts only) to ${high:.2f} (every reply at max tokens)"
                if low is not None and high is not None else "unknown (not in litellm's price map)")
        return (f"{label}~{prompt_tokens:,} prompt tokens to send, replies up to {most:,} tokens; "
                f"estimated cost {cost}")

    def lines(self, settings: RunSettings, corpus_revision: str, regenerate: bool) -> list[str]:
        out = [f"corpus      {settings.corpus.describe()} (revision {corpus_revision[:19]})",
               f"plan        {self.dialogues} dialogues, {self.triggers} triggers"
               + (f" ({self.unevaluable} not evaluable: no user message)"
                  if self.unevaluable else "")
               + (f", {settings.samples} samples each" if settings.samples > 1 else "")]
        for label, role, used in (("generation", settings.model_under_test, regenerate),
                                  ("judging", settings.judge, True)):
            if used:
                out.extend(role_lines(label, role))
        generation_to_make = self.generation_calls - self.generation_cached
        judge_to_make = self.judge_calls - self.judge_cached
        if regenerate:
            out.append(f"generation  {settings.model_under_test.model}: "
                       f"{self.generation_calls} calls, {self.generation_cached} cached, "
                       f"{generation_to_make} to make")
        out.append(f"judging     {settings.judge.model}: {self.judge_calls} calls, "
                   f"{self.judge_cached} cached, {judge_to_make} to make")
        if regenerate and generation_to_make:
            out.append(self._estimate("  generation: ", settings.model_under_test,
                                      generation_to_make, self.generation_prompt_tokens))
        if judge_to_make:
            out.append(self._estimate("  judging:    ", settings.judge, judge_to_make,
                                      self.judge_prompt_tokens))
        return out


CallLookup = Callable[[Sequence[str]], dict[str, dict[str, Any]]]
"""The records the per-call cache holds for any of these keys."""
_BATCH = 500  # requests looked up at once: one round trip each to a database


@contextlib.contextmanager
def lookup_calls(store: ArtifactStore, database: str | None) -> Iterator[CallLookup]:
    """Batched reads of the per-call cache for this synchronous code, on an event loop of its
    own (there is none running before a flow starts)."""
    calls = open_call_store(store.root / "calls", database)
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


def make_plan(settings: RunSettings, triggers: Artifact, lookup: CallLookup,
              prompt: JudgePrompt, responses: pl.DataFrame | None = None) -> Plan:
    """Count calls to make and estimate their prompt tokens. With `responses` (rejudge), judge
    exactly those that are ok. A response not generated yet is estimated by the curation-time
    response of the same turn. Requests are looked up in batches, not one round trip each."""
    frame = triggers.frame()
    generation_total = generation_cached = judge_total = judge_cached = 0
    generation_tokens = judge_tokens = 0

    def count_judged(wanted: list[tuple[dict[str, Any], str, int]]) -> None:
        nonlocal judge_total, judge_cached, judge_tokens
        judged = [judge_request(trigger, response, settings.judge, prompt,
                                settings.judge_response_format, sample_index)
                  for trigger, response, sample_index in wanted]
        found = lookup([request.key for request in judged])
        for request in judged:
            judge_total += 1
            if request.key in found:
                judge_cached += 1
            else:
                judge_tokens += request.estimated_prompt_tokens

    if responses is None:
        for batch in _batches(planned_requests(frame, settings.model_under_test,
                                               settings.samples)):
            hits = lookup([request.key for _, _, request in batch])
            wanted = []
            for trigger, sample_index, request in batch:
                generation_total += 1
                hit = hits.get(request.key)
                if hit is None:
                    generation_tokens += request.estimated_prompt_tokens
                    judge_total += 1
                    judge_tokens += judge_request(
                        trigger, trigger["curation_response"] or "", settings.judge, prompt,
                        settings.judge_response_format, sample_index).estimated_prompt_tokens
                    continue
                generation_cached += 1
                wanted.append((trigger, hit["content"], sample_index))
            count_judged(wanted)
    else:
        by_trigger = {(t["unique_id_eval"], t["turn"]): t for t in frame.iter_rows(named=True)}
        ok = responses.filter(pl.col("status") == "ok").iter_rows(named=True)
        for batch in _batches(ok):
            count_judged([(by_trigger[(r["unique_id_eval"], r["turn"])], r["response"],
                           r["sample_index"]) for r in batch])
    return Plan(dialogues=frame["unique_id_eval"].n_unique(), triggers=frame.height,
                unevaluable=frame.filter(~pl.col("evaluable")).height,
                generation_calls=generation_total, generation_cached=generation_cached,
                judge_calls=judge_total, judge_cached=judge_cached,
                generation_prompt_tokens=generation_tokens, judge_prompt_tokens=judge_tokens)


def stage_states(settings: RunSettings, store, triggers: Artifact, prompt: JudgePrompt
                 ) -> list[str]:
    """One line per stage: stored or not, complete or not, error rows."""
    from .pipeline import judgments_spec, phase_scores_spec, responses_spec

    lines = [f"{'triggers':<13} {triggers.key[:12]}  stored, {triggers.frame().height} rows"]
    spec = responses_spec(settings, triggers.key)
    for stage, error_statuses in (("responses", ["error"]),
                                  ("judgments", ["judge_error", "generation_error"]),
                                  ("phase_scores", [])):
        found = store.get(spec)
        if found is None:
            lines.append(f"{stage:<13} {spec.key[:12]}  not stored")
        else:
            frame = found.frame()
            errors = frame.filter(pl.col("status").is_in(error_statuses)).height \
                if error_statuses else 0
            state = "complete" if found.complete else "incomplete (a run will retry failures)"
            lines.append(f"{stage:<13} {spec.key[:12]}  stored, {frame.height} rows, "
                         f"{errors} failed, {state}")
        if stage == "responses":
            spec = judgments_spec(settings, spec.key, prompt.sha256)
        elif stage == "judgments":
            spec = phase_scores_spec(spec.key)
    return lines
