"""One settings model for a run: the model under test and the judge as named roles (each a
ModelRole, roles.py), the corpus, the judge prompt, the store, and runtime options.

What changes an output (model, endpoint, generation settings, prompt hashes, corpus revision)
goes into artifact keys through the `*_key_material()` methods; what does not (API key variable,
concurrency, timeouts, paths, the database) stays out. No field holds a secret: keys are read
from the environment at call time, so these settings are safe to log and to pass as Prefect
parameters.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

# The generation vocabulary and the role are the settings', and callers (a suite published from
# its own package among them) import them from here too.
from .generation import (DEFAULT_SUITE, Generation, Role, is_reasoning_model,  # noqa: F401
                         protocol_defaults, role_generation)
from .roles import ModelRole
from ..limits.model_limits import MAX_CONCURRENCY, Limits
from ..common.postgres import check_database_url, default_database
from ..common.redaction import url_has_secrets

DEFAULT_STORE_ENV = "PROACTFLOW_STORE"
DEFAULT_STORE = ".proactflow"
HUB_REPO_ID = "bosonai/proactbench"
HUB_FILENAME = "final_dialogues.jsonl"
UPSTREAM_PROMPT_COMMIT = "64f6270b9ddd07e123b3324f6f3da836948a4338"
UPSTREAM_PROMPT_SHA256 = "22f73655aaf72d37ef4726845ef9a85ed4b43a26194f5f77797a54eff86a6262"
PAPER_JUDGE = "gpt-5.4"
RULES = "rules"
"""What scores a suite without a judge model (the multimodal MCQA: the package's rules): the
one name the console, sweep folders, the report, leaderboards and `runs ls` give it, as its
judgments' `judge` column does."""


class CorpusSource(BaseModel):
    """Where the dialogues come from and which of them to evaluate."""

    model_config = ConfigDict(frozen=True)

    path: str | None = Field(default=None, description="Local JSONL file; None for the hub.")
    repo_id: str = Field(default=HUB_REPO_ID, description="Hub dataset repository.")
    filename: str = Field(default=HUB_FILENAME, description="File inside the dataset repo.")
    revision: str | None = Field(default=None, description="Hub revision to pin (default main).")
    limit: int | None = Field(default=None, ge=1, description="Only the first N dialogues.")
    phases: tuple[str, ...] = Field(
        default=("EMERGENT", "CRITICAL", "RECOVERY"), description="Phases to evaluate.")
    parts: tuple[str, ...] | None = Field(
        default=None, description="The video ProactiveBench's parts to evaluate (WEB, EGO, TV, "
                                  "VAD); None: all of them. Other suites take none.")

    def describe(self) -> str:
        if self.path:
            return self.path
        return f"hf://datasets/{self.repo_id}/{self.filename}@{self.revision or 'main'}"


UNSENT_MAX_TOKENS_ESTIMATE = 4096
"""What a role that sends no max_tokens is assumed to write at most, for timeouts and cost
estimates (it is never sent)."""


class RuntimeOptions(BaseModel):
    """How calls are made. None of this changes an output, so none of it enters a key."""

    model_config = ConfigDict(frozen=True)

    concurrency: int = Field(default=16, ge=1, le=MAX_CONCURRENCY,
                             description="Calls in flight per role's model, unless it has its own.")
    timeout_s: float | None = Field(
        default=None, gt=0,
        description="Per-call timeout, seconds; None scales it to the role's max_tokens "
                    "(60 s + 40 ms per token). A call that times out is not retried: the "
                    "provider may have finished and billed it.")
    max_attempts: int = Field(default=6, ge=1, description="Tries per call on 5xx and connection "
                                                           "errors (first + retries).")
    rate_limited_attempts: int = Field(
        default=20, ge=1, description="Tries per call while the provider answers 429 (rate "
                                      "limited), waiting as it asks.")
    retry_base_delay_s: float = Field(default=1.0, ge=0, description="First backoff delay.")
    retry_max_delay_s: float = Field(default=60.0, ge=0, description="Backoff ceiling.")
    max_consecutive_failures: int = Field(
        default=30, ge=1, description="Failed attempts (429s aside) with no success between, "
                                      "at least, before the endpoint can be declared down.")
    down_after_s: float = Field(
        default=60.0, gt=0, description="Seconds without any success while attempts fail (429s "
                                        "aside) after which the endpoint is declared down and "
                                        "the run stops.")
    lease_ttl_s: float = Field(
        default=60.0, gt=0, description="Lifetime of a claim on a call; renewed while held, so "
                                        "a holder that died on another host frees it by then.")
    model_parse_attempts: int = Field(
        default=5, ge=1,
        description="Calls of the model under test per sample while its replies are not the "
                    "protocol's format (suites that expect one), as upstream's runner (5).")
    judge_parse_attempts: int | None = Field(
        default=None, ge=1, le=10,
        description="Judge calls per response while replies do not validate (malformed JSON, a "
                    "score outside PASS/PARTIAL/FAIL); then the row is a judge_error. None: the "
                    "suite's protocol's number (ProactiveBench: 10, upstream's), else 4.")
    batch_poll_s: float = Field(
        default=30.0, gt=0, description="--batch: the first wait between two looks at a "
                                        "batch's state; it grows by half each time, up to 10 "
                                        "minutes.")
    batch_gather_s: float = Field(
        default=2.0, gt=0, description="--batch: a pause this long in new calls sends the "
                                       "calls gathered as a batch.")
    prompt_cache: Literal["auto", "off"] = Field(
        default="auto", description="Ask providers' prompt caches to keep the prefixes later "
                                    "calls share (Anthropic's cache breakpoints, OpenAI's "
                                    "prompt_cache_key); off: send no hint.")
    rpm: float | None = Field(default=None, gt=0, description="Requests per minute per role.")
    tpm: float | None = Field(default=None, gt=0, description="Tokens per minute per role.")

    def limits(self, role: ModelRole) -> Limits:
        """The limits a role's model keeps to: its own, these options' where it has none."""
        return role.limits.over(Limits(concurrency=self.concurrency, rpm=self.rpm, tpm=self.tpm))

    def call_timeout(self, max_tokens: int | None) -> float:
        """The timeout of one call: the one given, else long enough for a slow provider to
        write `max_tokens` tokens (25 per second; 4,096 when none is sent) after a minute of
        queueing."""
        if self.timeout_s is not None:
            return self.timeout_s
        return 60.0 + 0.04 * (max_tokens or UNSENT_MAX_TOKENS_ESTIMATE)


Refresh = Literal["responses", "judgments", "all"]


class RunSettings(BaseModel):
    """Everything one evaluation run needs. Safe to log: it never holds a secret."""

    model_config = ConfigDict(frozen=True)

    suite: str = Field(default=DEFAULT_SUITE,
                       description="The benchmark (suites/): proactbench, proactiveagent, "
                                   "proactivebench-mllm, proactivebench-video, or one "
                                   "registered by a plugin.")
    model_under_test: ModelRole = Field(description="The model being evaluated.")
    judge: ModelRole | None = Field(
        description="The model that scores the responses; None for a suite scored by a "
                    "deterministic check.")
    corpus: CorpusSource = Field(default_factory=CorpusSource, description="The dialogues.")
    samples: int = Field(default=1, ge=1, le=100,
                         description="Responses drawn per trigger (each judged on its own).")
    suite_options: dict[str, str | bool] = Field(
        default_factory=dict,
        description="Options only one suite takes, by name (proactivebench-mllm: datasets, "
                    "mode, hint, reference, package); the suite puts what changes an output "
                    "into its keys and refuses a name it does not take.")
    judge_prompt_file: str | None = Field(
        default=None, description="Judge system prompt file; None for the upstream prompt.")
    prompt_files: dict[str, str] = Field(
        default_factory=dict,
        description="A suite's other prompts from files of your own, by the suite's name for "
                    "each (e.g. agent_instruction, judge_instruction); the rest are upstream's. "
                    "Their sha256, never their paths, enter the keys.")
    judge_response_format: Literal["json_schema", "json_object", "none"] = Field(
        default="json_schema", description="Structured-output mode requested from the judge.")
    store: str = Field(default_factory=lambda: default_store(),
                       description="The artifact store: a local folder, or an fsspec URL "
                                   "(s3://bucket/prefix) with credentials in AWS_* variables.")
    database: str | None = Field(
        default_factory=default_database,
        description="PostgreSQL URL (postgresql://user@host:port/db, default "
                    "$PROACTFLOW_DATABASE) holding the per-call cache, its leases and the rate "
                    "limits, exact across hosts; None: the store's own, for one host. Never a "
                    "password (PGPASSWORD, ~/.pgpass); in no key.")
    out: str | None = Field(default=None, description="Folder for CSV/JSON exports.")
    runtime: RuntimeOptions = Field(default_factory=RuntimeOptions, description="Call options.")
    refresh: Refresh | None = Field(
        default=None, description="Ask again instead of reusing stored answers: responses, "
                                  "judgments or all (the per-call cache and the artifacts of "
                                  "those stages are overwritten).")
    min_coverage: float | None = Field(
        default=None, ge=0, le=1,
        description="Smallest share of triggers that must be scored for the run to count as a "
                    "success (exit status 0); None: every trigger not lost to an error.")

    @field_validator("database")
    @classmethod
    def _no_password(cls, database: str | None) -> str | None:
        return check_database_url(database) if database else None

    # Records and Prefect's parameters hold the URL as given: with no password in it (refused
    # above), its user name is no secret, and a deployment's worker needs it to connect.
    @field_validator("store")
    @classmethod
    def _store_without_secrets(cls, value: str) -> str:
        return check_store(value)

    def refreshes(self, stage: str) -> bool:
        return self.refresh == "all" or self.refresh == stage

    @property
    def roles(self) -> dict[str, ModelRole]:
        """The roles this run calls, by name (no judge for a deterministically scored suite)."""
        roles = {"model_under_test": self.model_under_test}
        if self.judge is not None:
            roles["judge"] = self.judge
        return roles

    @property
    def judge_name(self) -> str:
        """The judge's model, or what scores the responses when no model does."""
        return self.judge.model if self.judge is not None else RULES

    @property
    def protocol_conformant(self) -> bool:
        return not any(role.deviations for role in self.roles.values())

    @model_validator(mode="before")
    @classmethod
    def _protocol_defaults(cls, data):
        """A role given without generation settings gets PROTOCOL.md's defaults for its model
        (adapted to litellm's model map), so a deployment's parameters can name just the
        models."""
        if isinstance(data, dict):
            data = dict(data)
            for role in ("model_under_test", "judge"):
                given = data.get(role)
                if isinstance(given, dict) and "model" in given and "generation" not in given:
                    generation, deviations = role_generation(
                        role, given["model"], suite=data.get("suite", DEFAULT_SUITE))
                    data[role] = {**given, "generation": generation.model_dump(),
                                  "deviations": [d.model_dump() for d in deviations]}
        return data


def check_store(value: str) -> str:
    """A store location, refused when it is a URL carrying credentials or options: those come
    from the AWS_* environment variables, never from settings, records or parameters."""
    if "://" in value and url_has_secrets(value):
        raise ValueError("a store URL is s3://bucket/prefix, without credentials or options: "
                         "they come from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
                         "AWS_ENDPOINT_URL and AWS_REGION")
    return value


def default_store() -> str:
    return os.environ.get(DEFAULT_STORE_ENV) or str(Path(DEFAULT_STORE))
