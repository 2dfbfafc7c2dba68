"""The plan printed before a run: the calls it will make (counted against the per-call cache by
plan_counts.py), what each role sends, with their prompt tokens and cost estimated, and whether
the prompts fit the models' context.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..config.effective import wire_params
from ..config.settings import UNSENT_MAX_TOKENS_ESTIMATE, ModelRole, RunSettings
from ..providers.chat import ChatRequest
from ..batches.pricing import batch_cost
from ..providers.billing import Tokens, billed_cost
from ..batches.roles import batched, check_batch_roles
from ..providers.llm import estimated_cost
from .context_fit import fit_warning


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
    generation_cacheable_tokens: int = 0
    """Of `generation_prompt_tokens`, a prefix that an earlier call sends first, which a
    provider's prompt cache can serve (prompt_cache.SharedPrefixes)."""
    judge_cacheable_tokens: int = 0
    """Of `judge_prompt_tokens`, likewise."""
    generation_rounds: int = 0
    """--batch: the batches one after the other that generation takes at most (the longest
    episode's steps), replies asked again aside."""

    def _estimate(self, label: str, role, calls: int, prompt_tokens: int,
                  cacheable: int = 0) -> str:
        most = calls * (role.generation.max_tokens or UNSENT_MAX_TOKENS_ESTIMATE)
        low = estimated_cost(role.model, prompt_tokens, 0)
        high = estimated_cost(role.model, prompt_tokens, most)
        cost = (f"${low:.2f} (prompts only) to ${high:.2f} (every reply at max tokens)"
                if low is not None and high is not None else "unknown (not in litellm's price map)")
        in_batches = batched(role) and low is not None
        if in_batches:
            batch_low = batch_cost(role.model, prompt_tokens, 0)
            batch_high = batch_cost(role.model, prompt_tokens, most)
            cost = (f"${batch_low:.2f} to ${batch_high:.2f} in batches vs {cost} interactive"
                    if batch_low is not None and batch_high is not None else
                    f"{cost} interactive; its batch price is not in litellm's map")
        cached = ""
        if cacheable and low is not None:
            served = [billed_cost(role.model, Tokens(prompt_tokens, completion, cacheable),
                                  batch=bool(in_batches)) for completion in (0, most)]
            if None not in served:
                cached = (f"; ${served[0]:.2f} to ${served[1]:.2f}"
                          f"{' in batches' if in_batches else ''} with ~{cacheable:,} of the "
                          "prompt tokens at the cache price, where the provider's prompt cache "
                          "serves the prefixes earlier calls send")
        return (f"{label}~{prompt_tokens:,} prompt tokens to send, replies up to {most:,} tokens; "
                f"estimated cost {cost}{cached}")

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
                                      generation_to_make, self.generation_prompt_tokens,
                                      self.generation_cacheable_tokens))
        if judge_to_make and settings.judge is not None:
            out.append(self._estimate("  judging:    ", settings.judge, judge_to_make,
                                      self.judge_prompt_tokens, self.judge_cacheable_tokens))
        for label, role, sizes in (("generation", settings.model_under_test,
                                    self.generation_prompt_sizes if regenerate else []),
                                   ("judge", settings.judge, self.judge_prompt_sizes)):
            warning = fit_warning(label, role, sizes) if role is not None else None
            if warning:
                out.append(warning)
        return out
