"""A model in one role of a run (the model under test, the judge): what it is and where it is
called, how it generates, its own limits and batch mode, and which of that enters an artifact
key (`key_material`). Apart from the run's settings (settings.py), which hold two roles beside
the corpus, the store and the runtime options: a role is what stages, suites, providers and
batches are handed, without the run around it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer, field_validator

from ..cache.keys import text_sha256
from ..common.redaction import redact_url, unredacted
from ..limits.model_limits import Limits
from .effective import Deviation
from .endpoints import effective_endpoint
from .generation import Generation

BatchMode = Literal["off", "on", "auto"]


class ModelRole(BaseModel):
    """A model in one role of the run."""

    model_config = ConfigDict(frozen=True)

    model: str = Field(description="Any litellm model string, e.g. gpt-4o-mini, openai/my-model.")
    api_base: str | None = Field(default=None, description="OpenAI-compatible endpoint URL.")
    api_key_env: str | None = Field(
        default=None, description="Name of the environment variable holding the API key "
                                  "(default: the provider's usual variable).")
    generation: Generation = Field(description="Sampling settings.")
    revision: str | None = Field(
        default=None, description="A label of your own for what serves this model (a checkpoint, "
                                  "a deployment date): change it and every cached answer of "
                                  "the role is asked again. Enters every key.")
    deviations: tuple[Deviation, ...] = Field(
        default=(), description="How the generation settings differ from the protocol's, and "
                                "why (set by you, or what litellm's model map requires).")
    endpoint_fingerprint: str | None = Field(
        default=None, description="sha256 of the endpoint's /models entry for this model, taken "
                                  "at the start of a run (OpenAI-compatible endpoints only): a "
                                  "redeployed model gets new keys.")
    limits: Limits = Field(
        default_factory=Limits, description="This model's own limits (a sweep entry's "
                                            "concurrency, rpm, tpm), shared by every run that "
                                            "calls it; unset ones are the run's. In no key.")
    vision: bool | None = Field(
        default=None, description="Whether the model takes images, as you declare it "
                                  "(--eval-vision, a sweep entry's vision = true); None: as "
                                  "litellm's model map says. A suite that sends images refuses "
                                  "a model that does not take them, or of which nothing says "
                                  "so, before any call. In no key.")
    batch: BatchMode = Field(
        default="off", description="on: this role's calls go through its provider's batch API "
                                   "(--batch, a sweep entry's batch = true); auto: the same, or "
                                   "interactive calls when its provider has no batch API. The "
                                   "same requests, the same cache: in no key.")

    @field_serializer("api_base")
    def _without_secrets(self, api_base: str | None) -> str | None:
        """Credentials in an endpoint URL (userinfo, query) never reach a record, a log or
        Prefect's parameters; the process that was given them still calls with them."""
        return redact_url(api_base) if api_base else None

    @field_validator("api_base")
    @classmethod
    def _full_url(cls, api_base: str | None) -> str | None:
        """Back from Prefect's parameters in a process of the sweep: the full URL again."""
        return unredacted(api_base) if api_base else None

    @property
    def endpoint(self) -> str | None:
        """Where this role's calls go, canonical and without secrets (see endpoints.py)."""
        return effective_endpoint(self.model, self.api_base)

    def key_material(self) -> dict:
        """What about this role changes its outputs: never the key variable."""
        generation = self.generation.model_dump(exclude={"system_prompt", "gemini_safety_off"})
        if self.generation.gemini_safety_off:  # only when set: other keys stay as they were
            generation["gemini_safety_off"] = True
        system_prompt = self.generation.system_prompt
        generation["system_prompt_sha256"] = text_sha256(system_prompt) if system_prompt else None
        material = {"model": self.model, "api_base": self.endpoint, "generation": generation}
        # Added only when set, so keys of roles without them are unchanged.
        if self.revision is not None:
            material["revision"] = self.revision
        if self.endpoint_fingerprint is not None:
            material["endpoint_fingerprint"] = self.endpoint_fingerprint
        return material
