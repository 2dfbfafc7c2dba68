"""What a run leaves behind besides its artifacts: provenance, token usage and cost, and the
run record tying the run to its artifact keys (settings only, never a secret)."""

from __future__ import annotations

import platform
from datetime import datetime, timezone
from importlib import metadata
from typing import Any, Iterable

import polars as pl

from ..batches.roles import batched
from ..config.settings import DEFAULT_SUITE, RunSettings
from ..providers.billing import Tokens, billed_cost, list_cost
from .pipeline import StageReport, open_store, suite_of
from .run_records import record_name

_VERSIONED = ("proactflow", "prefect", "litellm", "polars", "pyarrow", "pydantic",
              "huggingface_hub", "diskcache", "fsspec", "s3fs")


def package_versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in _VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def _column_sum(frame: pl.DataFrame, column: str) -> int:
    """A token column's sum; 0 for a table stored before the column existed."""
    return int(frame[column].fill_null(0).sum()) if column in frame.columns else 0


def _dollars(cost: float | None) -> float | str:
    return cost if cost is not None else "unknown"


def usage_and_cost(settings: RunSettings, responses: pl.DataFrame, judgments: pl.DataFrame,
                   reports: Iterable[StageReport] = ()) -> dict[str, Any]:
    """Per role, two different sums, each with its dollars as the provider bills them, from
    litellm's price map (or "unknown"): prompt tokens the provider's cache read or wrote at
    their own prices (providers/billing.py), the role's batch price when it runs in batches.

    - `prompt_tokens`, `completion_tokens`, `cache_read_tokens`, `cache_write_tokens`,
      `estimated_cost_usd`: what the results in the stage tables cost when they were made
      (cached answers included), their value;
    - `paid_*`: what this run paid: every reply the provider sent in this run, judge replies
      asked again included. A run answered wholly from the cache paid $0.
      `paid_list_cost_usd` is the same tokens with every prompt token at the input price.
    """
    stages = suite_of(settings).stages
    table = {stages.responses: "responses", stages.judgments: "judgments"}
    paid = {"responses": Tokens(), "judgments": Tokens()}
    for report in reports:
        if report.stage in table and not report.reused:
            paid[table[report.stage]] += Tokens(
                report.calls.get("paid_prompt_tokens", 0),
                report.calls.get("paid_completion_tokens", 0),
                report.calls.get("paid_cache_read_tokens", 0),
                report.calls.get("paid_cache_write_tokens", 0))
    usage = {}
    roles = [("model_under_test", responses, settings.model_under_test.model, "responses")]
    if settings.judge is not None:
        roles.append(("judge", judgments, settings.judge.model, "judgments"))
    for role, frame, name, stage in roles:
        made = Tokens(*(_column_sum(frame, column) for column in (
            "prompt_tokens", "completion_tokens", "cache_read_tokens", "cache_write_tokens")))
        cost = billed_cost(name, made)
        spent = paid[stage]
        role_settings = settings.judge if role == "judge" else settings.model_under_test
        batch_price = batched(role_settings) if role_settings is not None else False
        if spent.prompt or spent.completion:
            paid_cost = billed_cost(name, spent, batch=batch_price)
            paid_list = list_cost(name, spent, batch=batch_price)
        else:
            paid_cost = paid_list = 0.0
        usage[role] = {"model": name, "prompt_tokens": made.prompt,
                       "completion_tokens": made.completion,
                       "cache_read_tokens": made.cache_read,
                       "cache_write_tokens": made.cache_write,
                       "estimated_cost_usd": _dollars(cost),
                       "paid_prompt_tokens": spent.prompt,
                       "paid_completion_tokens": spent.completion,
                       "paid_cache_read_tokens": spent.cache_read,
                       "paid_cache_write_tokens": spent.cache_write,
                       "paid_cost_usd": _dollars(paid_cost),
                       "paid_list_cost_usd": _dollars(paid_list),
                       **({"paid_at": "batch prices"} if batch_price else {})}
    return usage


def run_provenance(settings: RunSettings, prompts: dict[str, str], corpus_revision: str,
                   reports: Iterable[StageReport],
                   model_under_test: dict[str, Any] | None = None) -> dict[str, Any]:
    """What produced a result: roles' output-changing settings, prompts (name -> sha256; the
    judge's system prompt is `judge`), data, artifacts. `model_under_test` replaces the
    settings' role when the responses were stored before (a re-judging of stored or imported
    responses): the record says what is known of them."""
    provenance: dict[str, Any] = {
        "model_under_test": model_under_test or settings.model_under_test.key_material(),
        "judge": settings.judge.key_material() if settings.judge is not None else None,
        "protocol_conformant": settings.protocol_conformant,
        "protocol_deviations": {
            role: [d.model_dump(mode="json") for d in found.deviations]
            for role, found in settings.roles.items()},
        "judge_prompt_sha256": prompts.get("judge"),
    }
    if set(prompts) - {"judge"}:  # a suite with more prompts than a judge's (none in ProactBench)
        provenance["prompts_sha256"] = prompts
    if settings.suite != DEFAULT_SUITE:  # its records never said it: they came first
        provenance["suite"] = settings.suite
    return {**provenance, "corpus": settings.corpus.describe(),
            "corpus_revision": corpus_revision, "artifacts": {r.stage: r.key for r in reports}}


_RECORD_ONLY = ("run_id", "flow", "started", "finished", "seconds", "complete", "settings",
                "stages", "outputs", "usage", "versions")
"""What a record holds besides the run's provenance (see write_run_record)."""


def provenance_of(record: dict[str, Any]) -> dict[str, Any]:
    """The provenance a run wrote its exports with, read back from its record."""
    return {name: value for name, value in record.items() if name not in _RECORD_ONLY}


def write_run_record(settings: RunSettings, *, run_id: str, flow: str, started: datetime,
                     seconds: float, complete: bool, provenance: dict[str, Any],
                     reports: list[StageReport], outputs: dict[str, str],
                     usage: dict[str, Any], model_under_test: dict[str, Any] | None = None
                     ) -> str:
    """Write the run's record to the store; returns where it is (a path or a URL)."""
    recorded = settings.model_dump(mode="json")
    if model_under_test is not None:  # stored responses: no made-up generation settings
        recorded["model_under_test"] = model_under_test
    record = {
        "run_id": run_id, "flow": flow, "started": started.isoformat(),
        "finished": datetime.now(timezone.utc).isoformat(), "seconds": round(seconds, 3),
        "complete": complete, "settings": recorded, **provenance,
        "stages": [r.as_dict() for r in reports], "outputs": outputs, "usage": usage,
        "versions": package_versions(),
    }
    return open_store(settings).write_json(record_name(started, run_id), record)
