"""Sweep configuration: many models under test, one or more judges, one corpus.

```toml
suite = "proactbench"                 # optional: proactbench (default), proactiveagent,
                                      # proactivebench-mllm or proactivebench-video (their
                                      # flags under [options])
store = "/srv/proactflow/store"       # optional; default $PROACTFLOW_STORE or ./.proactflow;
                                      # or "s3://bucket/prefix" (credentials: AWS_* variables)
database = "postgresql://proactflow@db.lan:5432/proactflow"  # optional: calls, leases and rate
                                      # limits shared by every host (password: PGPASSWORD)
out = "results/nightly"               # leaderboard.csv and per-model exports go here
name = "nightly"                      # optional: the series of nights ('proactflow history')
regression_threshold = 0.02           # optional: smallest change reported (default 0)
refresh_on_change = true              # optional: ask a model again when its snapshot changed
corpus = "final_dialogues.jsonl"      # optional; default the hub corpus
revision = "<commit sha>"             # optional hub revision of the corpus
limit = 20                            # optional
# parts = ["WEB", "TV"]               # optional, proactivebench-video only (default: all four)
# [prompts]                           # optional: a suite's prompts from your own files
# agent_instruction = "step.txt"
concurrency = 16                      # optional: default calls in flight per model
rpm = 600                             # optional: default requests per minute per model
tpm = 400000                          # optional: default tokens per minute per model
# processes = 4                       # optional: spread the pairs over this many processes
                                      # (default: one per 4 pairs, at most one per core)
# deployment = "evaluate/evaluate"    # optional: each pair a run of this deployment, on the
                                      # pool's workers (a model's `work_queue` picks a queue)
# allow_unlisted_models = true        # optional: ask an endpoint for models its /v1/models
                                      # does not list (a router); default: refused first
# batch = true                        # optional: every call through the providers' batch
                                      # APIs ("auto": interactive where there is none); an
                                      # entry's own batch = true/false/"auto" wins

[[judges]]
model = "gpt-5.4"
concurrency = 8                       # optional: this model's own limits (also rpm, tpm),
                                      # shared by every evaluation that calls it

[[models]]
model = "gpt-4o-mini"

[[models]]
model = "openai/my-model"
api_base = "http://localhost:8000/v1"
temperature = 0.2                     # any generation setting; the rest are the protocol's
revision = "ckpt-2026-11-25"          # optional: your label for what serves it now
```

A limit belongs to the model at its endpoint, not to a pair: the six evaluations of two judges
times three models each keep to the judge's `concurrency` together, and so does every other
run calling that model on this store's host (or on the database). Limits enter no key. A bad
value is one line naming the file, the entry (`models[2] (openai/my-model)`, counted from 1)
and the key.

This module reads and checks the file as a whole and expands it into one RunSettings per (model,
judge) pair; an entry and the role it becomes are sweep_entry.py's.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..common.errors import UserError
from ..common.redaction import url_has_secrets
from ..results.evaluations import safe_name
from ..common.postgres import check_database_url, default_database
from ..limits.model_limits import MAX_CONCURRENCY
from ..config.settings import (RULES, DEFAULT_SUITE, CorpusSource, RunSettings, RuntimeOptions,
                               check_store, default_store)
from . import MAX_PROCESSES
from .sweep_entry import SweepModel
from .sweep_errors import problem_line

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on Python 3.10 only
    import tomli as tomllib


class SweepConfig(BaseModel):
    """A whole sweep file. Strict, as its entries are: a string is not a boolean nor a number
    (`refresh_on_change = "no"` would be true), a number not a boolean."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    suite: str = Field(default=DEFAULT_SUITE, description="The benchmark: proactbench (default), "
                                                          "proactiveagent, proactivebench-mllm, "
                                                          "proactivebench-video, or one a "
                                                          "plugin registers.")
    name: str = Field(default="sweep", min_length=1,
                      description="The series this sweep is a night of ('proactflow history'): "
                                  "one name per nightly sweep file.")
    regression_threshold: float = Field(
        default=0.0, ge=0, le=1, description="Smallest change of a score (0-1, e.g. 0.02 for 2 "
                                             "points) between two nights that is reported as a "
                                             "regression or improvement, its interval also "
                                             "excluding 0.")
    refresh_on_change: bool = Field(
        default=False, description="Ask a model (or judge) again when the model serving its "
                                   "name changed since its cached results were made.")
    models: list[SweepModel] = Field(min_length=1, description="Models under test.")
    judges: list[SweepModel] = Field(
        default_factory=list, description="Judges; each scores every model (none for a suite "
                                          "scored by a deterministic check).")
    options: dict[str, str | bool] = Field(
        default_factory=dict, description="The suite's own options, as on the command line "
                                          "(proactivebench-mllm: datasets, mode, hint, "
                                          "reference, package).")
    store: str | None = Field(default=None, description="Artifact store: a folder or an fsspec "
                                                        "URL (s3://bucket/prefix).")
    database: str | None = Field(
        default=None, description="PostgreSQL URL for the per-call cache, leases and rate "
                                  "limits (default $PROACTFLOW_DATABASE); never a password.")
    out: str | None = Field(default=None, description="Folder for the leaderboard and exports.")
    corpus: str | None = Field(default=None, description="Local corpus; default the hub.")
    revision: str | None = Field(default=None, description="Hub revision to pin.")
    limit: int | None = Field(default=None, ge=1, description="Only the first N dialogues.")
    parts: list[str] | None = Field(
        default=None, description="proactivebench-video: the parts to evaluate (WEB, EGO, TV, "
                                  "VAD); default all four.")
    judge_prompt: str | None = Field(default=None, description="Judge prompt file.")
    prompts: dict[str, str] = Field(
        default_factory=dict, description="The suite's prompts from files of yours, by name "
                                          "(as --prompt NAME=FILE; proactiveagent: "
                                          "agent_system, agent_instruction, judge, "
                                          "judge_instruction).")
    concurrency: int = Field(default=16, ge=1, le=MAX_CONCURRENCY, strict=True,
                             description="Calls in flight per model, unless its entry says.")
    rpm: float | None = Field(default=None, gt=0, strict=True, allow_inf_nan=False,
                              description="Requests per minute per model, unless its entry says.")
    tpm: float | None = Field(default=None, gt=0, strict=True, allow_inf_nan=False,
                              description="Tokens per minute per model, unless its entry says.")
    samples: int = Field(default=1, ge=1, le=100, description="Responses drawn per trigger.")
    min_coverage: float | None = Field(
        default=None, ge=0, le=1, description="Share of triggers each pair must score for the "
                                              "sweep to succeed; default: none lost to errors.")
    deployment: str | None = Field(
        default=None, description="flow/deployment (evaluate/evaluate): each pair runs as a run "
                                  "of it on the pool's workers; default: in this process.")
    processes: int | None = Field(
        default=None, ge=1, le=MAX_PROCESSES,
        description="Processes of this machine the evaluations are spread over; default one per "
                    "4 pairs, at most one per core (1: all in the sweep's own process).")
    batch: bool | Literal["auto"] = Field(
        default=False, description="Every model's and judge's calls through its provider's "
                                   "batch API (true; \"auto\": interactive where there is "
                                   "none), unless its entry says otherwise.")
    allow_unlisted_models: bool = Field(
        default=False, strict=True,
        description="Ask an endpoint for a model its /v1/models does not list (a router "
                    "serving names it does not list); default: such a model is skipped before "
                    "any call, a judge stops the sweep.")
    batch_poll: float = Field(
        default=30.0, gt=0, description="Seconds between the first two looks at a batch's "
                                        "state, growing by half each time up to 10 minutes.")
    prompt_cache: Literal["auto", "off"] = Field(
        default="auto", description="Ask providers' prompt caches to keep what later calls "
                                    "share (--prompt-cache); off: send no hint.")
    deployment_timeout: float = Field(
        default=600.0, gt=0, description="Seconds a pair's run may wait in a work queue that no "
                                         "worker polls before it is cancelled and fails.")

    @model_validator(mode="after")
    def _deployable(self) -> "SweepConfig":
        if any(judge.work_queue for judge in self.judges):
            raise ValueError("work_queue belongs to [[models]] entries: a judge runs where its "
                             "model's evaluation runs")
        if self.deployment and self.processes is not None:
            raise ValueError("processes spreads a sweep over this machine; with a deployment "
                             "the pool's workers run the pairs (start more workers instead)")
        if not self.deployment:
            if any(model.work_queue for model in self.models):
                raise ValueError("work_queue needs deployment = \"evaluate/evaluate\"")
            return self
        for entry in [*self.models, *self.judges]:
            if entry.api_base and url_has_secrets(entry.api_base):
                # Workers get the settings redacted: such a URL would reach them masked.
                raise ValueError(f"{entry.model}: with a deployment, credentials go in the "
                                 "workers' environment (api_key_env), not in api_base")
        return self

    @field_validator("batch", mode="before")
    @classmethod
    def _batch_mode(cls, value: Any) -> Any:
        if value is not True and value is not False and value != "auto":
            raise ValueError('expected true, false or "auto"')
        return value

    @field_validator("database")
    @classmethod
    def _no_password(cls, database: str | None) -> str | None:
        return check_database_url(database) if database else None

    # Sent as given (serve's runs read it from Prefect's parameters): it holds no password.
    @field_validator("store")
    @classmethod
    def _store_without_secrets(cls, value: str | None) -> str | None:
        return check_store(value) if value else value

    def runs(self) -> list[RunSettings]:
        """One RunSettings per (model, judge), in file order. For a deployment, local paths are
        made absolute: a worker resolves them in its own folder, on its own machine."""
        from ..suites import get_suite

        place: Callable[[str], str] = _absolute if self.deployment else str
        store = place(self.store or default_store())
        suite = get_suite(self.suite)
        refused = [name for name in self.options if name not in suite.option_names]
        if refused:
            raise UserError(f"options: {', '.join(refused)} not an option of the {self.suite} "
                            "suite")
        if not self.judges and suite.needs_judge:
            raise UserError(f"the {self.suite} suite needs a judge: add a [[judges]] entry")
        options = dict(self.options)
        if "package" in options and isinstance(options["package"], str):
            options["package"] = place(options["package"])
        judges: list[SweepModel | None] = list(self.judges) or [None]
        out = Path(place(self.out)) if self.out else None
        runs = [RunSettings(
            suite=self.suite, suite_options=options,
            model_under_test=model.role("model_under_test", self.suite, options, self.batch),
            judge=judge.role("judge", self.suite, options, self.batch)
            if judge is not None else None,
            corpus=CorpusSource(path=self.corpus and place(self.corpus), revision=self.revision,
                                limit=self.limit, parts=suite.parse_parts(",".join(self.parts))
                                if self.parts else None),
            judge_prompt_file=self.judge_prompt and place(self.judge_prompt),
            prompt_files={name: place(file) for name, file in self.prompts.items()}, store=store,
            samples=self.samples, database=self.database or default_database(),
            min_coverage=self.min_coverage,
            out=str(out / f"{safe_name(model.model)}__"
                    f"{safe_name(judge.model if judge else RULES)}") if out else None,
            runtime=RuntimeOptions(concurrency=self.concurrency, rpm=self.rpm, tpm=self.tpm,
                                   batch_poll_s=self.batch_poll,
                                   prompt_cache=self.prompt_cache))
            for model in self.models for judge in judges]
        # The variant (the multimodal suite's mode, hint, reference; the video suite's parts)
        # is named in each run's folder, as in its title.
        variant = safe_name(suite.settings_variant(runs[0]).replace(" ", "-")) \
            if runs and suite.settings_variant(runs[0]) else ""
        return [run.model_copy(update={"out": f"{run.out}__{variant}"})
                if variant and run.out else run for run in runs]

    def work_queues(self) -> list[str | None]:
        """The work queue of each of `runs()`, in its order (None: the deployment's)."""
        return [model.work_queue for model in self.models
                for _ in range(max(1, len(self.judges)))]



def _absolute(path: str) -> str:
    return path if "://" in path else str(Path(path).expanduser().resolve())


def load_sweep(path: str | Path) -> SweepConfig:
    path = Path(path)
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"sweep file not found: {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid TOML ({exc})") from None
    try:
        return SweepConfig.model_validate(data)
    except ValidationError as exc:
        raise UserError(f"{path}: {problem_line(data, exc.errors())}") from None
