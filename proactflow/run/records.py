"""What a run leaves behind besides its artifacts: provenance, token usage and cost, and the
run record tying the run to its artifact keys (settings only, never a secret)."""

from __future__ import annotations

import platform
from datetime import datetime, timezone
from importlib import metadata
from typing import Any, Iterable

import polars as pl

from ..batches.pricing import batch_cost
from ..batches.roles import batched
from ..config.settings import RunSettings
from ..providers.llm import estimated_cost
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


def usage_and_cost(settings: RunSettings, responses: pl.DataFrame, judgments: pl.DataFrame,
                   reports: Iterable[StageReport] = ()) -> dict[str, Any]:
    """Per role, two different sums, each with its estimated dollars from litellm's price map
    (or "unknown"):

    - `prompt_tokens`, `completion_tokens`, `estimated_cost_usd`: what the results in the stage
      tables cost when they were made (cached answers included), their value;
    - `paid_*`: what this run paid: every reply the provider sent in this run, judge replies
      asked again included. A run answered wholly from the cache paid $0.
    """
    stages = suite_of(settings).stages
    table = {stages.responses: "responses", stages.judgments: "judgments"}
    paid = {"responses": [0, 0], "judgments": [0, 0]}
    for report in reports:
        if report.stage in table and not report.reused:
            paid[table[report.stage]][0] += report.calls.get("paid_prompt_tokens", 0)
            paid[table[report.stage]][1] += report.calls.get("paid_completion_tokens", 0)
    usage = {}
    roles = [("model_under_test", responses, settings.model_under_test.model, "responses")]
    if settings.judge is not None:
        roles.append(("judge", judgments, settings.judge.model, "judgments"))
    for role, frame, name, stage in roles:
        prompt = int(frame["prompt_tokens"].fill_null(0).sum())
        completion = int(frame["completion_tokens"].fill_null(0).sum())
        cost = estimated_cost(name, prompt, completion)
        paid_prompt, paid_completion = paid[stage]
        role_settings = settings.judge if role == "judge" else settings.model_under_test
        batch_price = batched(role_settings) if role_settings is not None else False
        paid_cost = (batch_cost(name, paid_prompt, paid_completion) if batch_price else
                     estimated_cost(name, paid_prompt, paid_completion)) \
            if paid_prompt or paid_completion else 0.0
        usage[role] = {"model": name, "prompt_tokens": prompt, "completion_tokens": completion,
                       "estimated_cost_usd": cost if cost is not None else "unknown",
                       "paid_prompt_tokens": paid_prompt,
                       "paid_completion_tokens": paid_completion,
                       "paid_cost_usd": paid_cost if paid_cost is not None else "unknown",
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
    if settings.suite != "proactbench":
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
