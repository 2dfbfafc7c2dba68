"""Checks made before any paid call (access.py), the plan printed before a run (plan.py, counted
by plan_counts.py), and the state of each stage that `status` prints."""

from __future__ import annotations

import polars as pl

from ..cache.artifacts import Artifact
from ..suites.base import Prompts, Suite
from ..config.settings import RunSettings
from .access import check_access, check_vision
from .plan import called_roles
from .plan_counts import lookup_calls, make_plan

__all__ = ["called_roles", "check_access", "check_vision", "lookup_calls", "make_plan",
           "stage_states"]


def worth_line(model: str, frame: pl.DataFrame) -> str:
    """What a stage's stored rows cost when they were made, as the provider billed them."""
    from ..providers.billing import Tokens, billed_cost

    tokens = Tokens(*(int(frame[column].fill_null(0).sum()) if column in frame.columns else 0
                      for column in ("prompt_tokens", "completion_tokens", "cache_read_tokens",
                                     "cache_write_tokens")))
    cost = billed_cost(model, tokens)
    return (f"{'':<13} worth {f'${cost:.4f}' if cost is not None else 'unknown'} as billed: "
            f"{tokens.prompt} prompt ({tokens.cache_read} cached) + {tokens.completion} "
            "completion tokens")


def stage_states(suite: Suite, settings: RunSettings, store, samples: Artifact,
                 generation_prompts: Prompts, judge_prompts: Prompts) -> list[str]:
    """One line per stage: stored or not, complete or not, error rows."""
    from .stage_keys import StageKeys

    names = suite.stages
    lines = [f"{names.samples:<13} {samples.key[:12]}  stored, {samples.frame().height} rows"]
    specs = StageKeys(suite, settings).chain(samples.key, generation_prompts, judge_prompts)
    for stage, spec in zip((names.responses, names.judgments, names.scores), specs):
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
            role = {names.responses: settings.model_under_test,
                    names.judgments: settings.judge}.get(stage)
            if role is not None and "prompt_tokens" in frame.columns:
                lines.append(worth_line(role.model, frame))
    return lines
