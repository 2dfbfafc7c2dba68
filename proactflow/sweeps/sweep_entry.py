"""One `[[models]]` or `[[judges]]` entry of a sweep file, and the role it becomes in each of
the sweep's runs: its generation settings (the protocol's, where the entry sets none), its
endpoint, its own limits and its batch mode.

Apart from the file as a whole (sweep_file.py): an entry is validated and turned into a role
on its own, whatever the file around it says besides.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from ..common.redaction import redact_url
from ..config.effective import safety_settings_off
from ..config.generation import (DEFAULT_SUITE, MAX_TOKENS_CEILING, TEMPERATURE_MAX, Role,
                                 role_generation)
from ..config.roles import BatchMode, ModelRole
from ..limits.model_limits import MAX_CONCURRENCY, Limits


class SweepModel(BaseModel):
    """One model entry of a sweep file: a model string plus optional endpoint and settings.
    Strict: a string is not a boolean, nor a number (`batch = "yes"` is a mistake, not true)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)

    model: str = Field(description="litellm model string.")
    api_base: str | None = Field(default=None, description="OpenAI-compatible endpoint.")
    api_key_env: str | None = Field(default=None, description="Variable holding the key.")
    temperature: float | None = Field(default=None, ge=0, le=TEMPERATURE_MAX,
                                      description="Override of the default (0 to 2).")
    max_tokens: int | None = Field(default=None, ge=1, le=MAX_TOKENS_CEILING,
                                   description="Override of the default (1 to 1000000).")
    top_p: float | None = Field(default=None, gt=0, le=1,
                                description="Override of the default (above 0, at most 1).")
    reasoning_effort: str | None = Field(default=None, description="Override of the default.")
    system_prompt: str | None = Field(default=None, description="Model under test only.")
    gemini_safety_off: bool = Field(default=False, description="Gemini's harm filters off.")
    revision: str | None = Field(
        default=None, description="Your label for what serves this model now (a checkpoint, a "
                                  "deployment date): a new label asks every call again.")
    concurrency: int | None = Field(
        default=None, ge=1, le=MAX_CONCURRENCY, strict=True,
        description="Calls in flight to this model, shared by every evaluation calling it.")
    rpm: float | None = Field(default=None, gt=0, strict=True, allow_inf_nan=False,
                              description="Requests per minute to this model, shared likewise.")
    tpm: float | None = Field(default=None, gt=0, strict=True, allow_inf_nan=False,
                              description="Tokens per minute to this model, shared likewise.")
    vision: bool | None = Field(
        default=None, description="Models under test: true declares that the model takes "
                                  "images (a model on your own endpoint that litellm's map does "
                                  "not know); a suite that sends images refuses it otherwise.")
    batch: bool | Literal["auto"] | None = Field(
        default=None, description="This model's calls through its provider's batch API (true), "
                                  "interactive (false), or batched where it has one (\"auto\"); "
                                  "default the file's `batch`.")
    work_queue: str | None = Field(
        default=None, description="Models, with `deployment` only: the work queue of the pool "
                                  "its evaluations wait in (e.g. one served by its GPU node's "
                                  "worker); default the deployment's.")

    @field_serializer("api_base")
    def _without_secrets(self, api_base: str | None) -> str | None:
        """Credentials in an endpoint URL never reach Prefect's parameters (see ModelRole)."""
        return redact_url(api_base) if api_base else None

    @field_validator("batch", mode="before")
    @classmethod
    def _batch_mode(cls, value: Any) -> Any:
        if value is not None and value is not True and value is not False and value != "auto":
            raise ValueError('expected true, false or "auto"')
        return value

    @field_validator("temperature", "max_tokens", "top_p", "reasoning_effort", mode="before")
    @classmethod
    def _none_unsets(cls, value: Any) -> Any:
        """TOML has no null: "none" means "send none" (e.g. top_p = "none")."""
        return None if isinstance(value, str) and value.lower() in ("none", "null", "off") \
            else value

    def role(self, kind: Role, suite: str = DEFAULT_SUITE,
             options: dict[str, Any] | None = None,
             batch: bool | Literal["auto"] = False) -> ModelRole:
        """The entry as a role; `batch` is the file's, for an entry that does not say."""
        explicit = self.model_dump(include={"temperature", "max_tokens", "top_p",
                                            "reasoning_effort", "system_prompt",
                                            "gemini_safety_off"}, exclude_unset=True)
        if explicit.get("gemini_safety_off"):
            safety_settings_off(self.model)
        generation, deviations = role_generation(kind, self.model, explicit, suite, options)
        return ModelRole(model=self.model, api_base=self.api_base, api_key_env=self.api_key_env,
                         generation=generation, deviations=deviations, revision=self.revision,
                         limits=Limits(concurrency=self.concurrency, rpm=self.rpm, tpm=self.tpm),
                         vision=self.vision if kind == "model_under_test" else None,
                         batch=batch_mode(self.batch if self.batch is not None else batch))


def batch_mode(batch: bool | Literal["auto"]) -> BatchMode:
    return "auto" if batch == "auto" else "on" if batch else "off"
