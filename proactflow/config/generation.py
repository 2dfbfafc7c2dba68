"""The generation settings of a role: what each call sends (temperature, token budget, top_p,
reasoning effort, system prompt), the protocol's defaults for a model in a suite, and how the
settings a user gives are adapted to litellm's model map, every deviation recorded."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .effective import Deviation, conform_generation

DEFAULT_SUITE = "proactbench"

_REASONING_PREFIXES = ("gpt-5", "o1", "o3", "o4")

Role = Literal["model_under_test", "judge"]

TEMPERATURE_MAX = 2.0
"""The widest temperature providers take (OpenAI's 0-2; Anthropic's is 0-1): above it, a
typo."""
MAX_TOKENS_CEILING = 1_000_000
"""No model writes more in one reply: a larger budget is a typo."""


def is_reasoning_model(model: str) -> bool:
    """PROTOCOL.md's rule: OpenAI reasoning models and gemini-2.5-pro get reasoning defaults."""
    name = model.rsplit("/", 1)[-1].lower()
    return name.startswith(_REASONING_PREFIXES) or name.startswith("gemini-2.5-pro")


class Generation(BaseModel):
    """Sampling settings sent with every call of a role. None means 'not sent'."""

    model_config = ConfigDict(frozen=True)

    temperature: float | None = Field(ge=0, le=TEMPERATURE_MAX,
                                      description="Sampling temperature.")
    max_tokens: int | None = Field(
        gt=0, le=MAX_TOKENS_CEILING,
        description="Maximum new tokens; None sends none (the provider's default applies).")
    top_p: float | None = Field(gt=0, le=1,
                                description="Nucleus sampling; None for reasoning models.")
    reasoning_effort: str | None = Field(
        default=None, description="Sent to reasoning models only (judge default: medium).")
    system_prompt: str | None = Field(
        default=None, description="System prompt for the model under test (none by default).")
    gemini_safety_off: bool = Field(
        default=False, description="Gemini only: send its four harm filters at BLOCK_NONE, as "
                                   "the benchmark's own Gemini client does.")


def role_generation(kind: Role, model: str, explicit: dict[str, Any] | None = None,
                    suite: str = DEFAULT_SUITE, options: dict[str, Any] | None = None
                    ) -> tuple[Generation, tuple[Deviation, ...]]:
    """The settings a role sends: the suite protocol's defaults for the model, adapted to
    litellm's model map, with what the user set (`explicit`) on top; and every deviation from
    the protocol. A setting the model cannot take is a one-line UserError."""
    protocol = protocol_defaults(kind, model, suite, options).model_dump()
    values, deviations = conform_generation(kind, model, protocol, dict(explicit or {}),
                                            reasoning_by_name=is_reasoning_model(model))
    return Generation(**values), tuple(deviations)


def protocol_defaults(role: Role, model: str, suite: str = DEFAULT_SUITE,
                      options: dict[str, Any] | None = None) -> Generation:
    """The generation defaults of a suite's protocol for a role and model (ProactBench's:
    PROTOCOL.md steps 2 and 4); `options`: the suite's own options (RunSettings.suite_options),
    for a suite whose protocol differs between its modes."""
    reasoning = is_reasoning_model(model)
    if suite != DEFAULT_SUITE:
        from ..suites import get_suite  # suites import these settings: resolved at call time
        return Generation(**get_suite(suite).option_generation_defaults(role, reasoning,
                                                                        options or {}))
    if role == "model_under_test":
        if reasoning:
            return Generation(temperature=1.0, max_tokens=32768, top_p=None)
        return Generation(temperature=0.7, max_tokens=8192, top_p=1.0)
    if reasoning:
        return Generation(temperature=1.0, max_tokens=32768, top_p=None, reasoning_effort="medium")
    return Generation(temperature=0.7, max_tokens=32768, top_p=1.0)


