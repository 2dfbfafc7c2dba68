"""The generation settings a role really sends, checked against litellm's model map, and every
way they differ from the benchmark's protocol.

The protocol names its reasoning models by prefix (gpt-5*, o1*, o3*, o4*, gemini-2.5-pro) and
gives every model temperature, top_p and a max-token budget. Real models disagree: Claude Opus
4.7 accepts no sampling parameters, gpt-4o writes at most 16,384 tokens, Claude and Gemini 2.5
Flash reason without matching a prefix. Sending the protocol's values anyway fails every call;
so the settings are adapted here, before any call, from litellm's model map, and each
adaptation is recorded as a deviation (`protocol_conformant: false` in metrics.json). A setting
you gave yourself is never adapted silently: it is sent as given, or refused in one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..common.errors import UserError
from .endpoints import provider_of

RoleKind = Literal["model_under_test", "judge"]
_FLAG_PREFIX = {"model_under_test": "eval", "judge": "judge"}
GEMINI_PROVIDERS = ("gemini", "vertex_ai", "vertex_ai_beta")
GEMINI_HARM_CATEGORIES = ("HARM_CATEGORY_HARASSMENT", "HARM_CATEGORY_HATE_SPEECH",
                          "HARM_CATEGORY_SEXUALLY_EXPLICIT", "HARM_CATEGORY_DANGEROUS_CONTENT")


class Deviation(BaseModel):
    """One way a role's settings differ from the protocol's."""

    model_config = ConfigDict(frozen=True)

    setting: str = Field(description="The generation setting, e.g. temperature.")
    protocol: Any = Field(description="What the protocol prescribes (None: not sent).")
    sent: Any = Field(description="What is sent instead (None: not sent).")
    reason: str = Field(description="Why: set by you, or what litellm's model map says.")


@dataclass(frozen=True)
class Capabilities:
    """What litellm's model map says of a model; None where it says nothing."""

    known: bool
    reasoning: bool | None = None
    sampling: bool | None = None
    max_output_tokens: int | None = None


@lru_cache(maxsize=256)
def capabilities(model: str) -> Capabilities:
    import litellm

    provider = provider_of(model)
    bare = model.split("/", 1)[1] if model.startswith(provider + "/") else model
    entry = next((litellm.model_cost[name] for name in (model, bare, f"{provider}/{bare}")
                  if name in litellm.model_cost), None)
    if entry is None:
        return Capabilities(known=False)
    return Capabilities(known=True, reasoning=entry.get("supports_reasoning"),
                        sampling=entry.get("supports_sampling_params"),
                        max_output_tokens=entry.get("max_output_tokens"))


def safety_settings_off(model: str) -> list[dict[str, str]]:
    """Gemini's four harm filters set to BLOCK_NONE, as the benchmark's own Gemini client does;
    a one-line error for a model that has no such filters."""
    if provider_of(model) not in GEMINI_PROVIDERS:
        raise UserError(f"{model}: only Gemini models (gemini/, vertex_ai/) have the safety "
                        "filters that the safety-off option switches off")
    return [{"category": category, "threshold": "BLOCK_NONE"}
            for category in GEMINI_HARM_CATEGORIES]


def wire_params(model: str, params: dict[str, Any]) -> dict[str, Any]:
    """The parameters litellm will send for these OpenAI-style ones, in the provider's own
    names (max_completion_tokens for OpenAI reasoning models, thinking budgets for Claude and
    Gemini...), computed offline with litellm's own mapping; one line if it refuses them."""
    import litellm
    from litellm.utils import get_optional_params

    provider = provider_of(model)
    bare = model.split("/", 1)[1] if model.startswith(provider + "/") else model
    sendable = {k: v for k, v in params.items() if k != "safety_settings"}
    try:
        mapped = get_optional_params(model=bare, custom_llm_provider=provider, **sendable)
    except litellm.UnsupportedParamsError as exc:
        raise UserError(f"{model}: {str(exc).splitlines()[0].removeprefix('litellm.')}") \
            from None
    except Exception:  # a provider litellm maps lazily or not at all: show what we send
        mapped = dict(sendable)
    if "safety_settings" in params:
        mapped["safety_settings"] = params["safety_settings"]
    return {k: v for k, v in mapped.items() if k != "stream" and v not in ({}, None)}


def _reasoning_defaults(kind: RoleKind) -> dict[str, Any]:
    defaults: dict[str, Any] = {"temperature": 1.0, "top_p": None, "max_tokens": 32768}
    if kind == "judge":
        defaults["reasoning_effort"] = "medium"
    return defaults


def conform_generation(kind: RoleKind, model: str, protocol: dict[str, Any],
                       explicit: dict[str, Any], *, reasoning_by_name: bool
                       ) -> tuple[dict[str, Any], list[Deviation]]:
    """(settings to send, deviations from the protocol) for a role.

    `protocol` holds the protocol's defaults for the model (its name rule, `reasoning_by_name`),
    `explicit` what the user set. Defaults are adapted to litellm's model map; explicit settings
    are kept, or refused in one line when the map says the model cannot take them.
    """
    caps = capabilities(model)
    flag = _FLAG_PREFIX[kind]
    values = dict(protocol)
    deviations: list[Deviation] = []

    def adapt(setting: str, value: Any, reason: str) -> None:
        if values.get(setting) != value:
            deviations.append(Deviation(setting=setting, protocol=protocol.get(setting),
                                        sent=value, reason=reason))
            values[setting] = value

    if caps.reasoning and not reasoning_by_name:
        for setting, value in _reasoning_defaults(kind).items():
            if setting not in explicit:
                adapt(setting, value, "litellm's model map marks it a reasoning model; the "
                                      "protocol's rule names only gpt-5*, o1*, o3*, o4* and "
                                      "gemini-2.5-pro")
    for setting, value in explicit.items():
        if setting != "system_prompt":
            adapt(setting, value, "set by you")
        else:
            values[setting] = value
    if caps.sampling is False:
        for setting in ("temperature", "top_p"):
            if values.get(setting) is None:
                continue
            if setting in explicit:
                raise UserError(f"{model} accepts no {setting} (litellm's model map): remove "
                                f"--{flag}-{setting.replace('_', '-')} or set it to none")
            adapt(setting, None, "the model accepts no sampling parameters (litellm's model "
                                 "map)")
    ceiling = caps.max_output_tokens
    if ceiling and values.get("max_tokens") and values["max_tokens"] > ceiling:
        if "max_tokens" in explicit:
            raise UserError(f"{model} writes at most {ceiling:,} tokens (litellm's model map): "
                            f"lower --{flag}-max-tokens {values['max_tokens']}")
        adapt("max_tokens", ceiling, f"the model writes at most {ceiling:,} tokens (litellm's "
                                     "model map)")
    return values, deviations
