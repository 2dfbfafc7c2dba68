"""Prompts that cannot fit a model's context, said in the plan before any call (issue #27).

A prompt longer than the model's context is refused by the server (HTTP 400, stored as
`refused`); the plan warns about such prompts where the context length is known: an endpoint's
own `/models` entry (vLLM's `max_model_len`, and the like), else litellm's model map. The
prompts' sizes are the plan's estimates (about four characters a token, which errs high), so
the warning says "estimated"; where no context length is known nothing is said.
"""

from __future__ import annotations

import json
import urllib.error

from ..config.endpoints import endpoint_url, models_listing
from ..config.settings import ModelRole
from ..providers.chat import api_key_for

_LISTED_CONTEXT_FIELDS = ("max_model_len", "context_length", "context_window", "n_ctx",
                          "max_context_length")
"""Fields an OpenAI-compatible server's /models entry names its context length by (vLLM:
max_model_len; others: the rest)."""


def _listed_context(role: ModelRole) -> int | None:
    if not role.api_base:
        return None
    served_name = role.model.split("/", 1)[1] if "/" in role.model else role.model
    try:
        listing = models_listing(endpoint_url(role.api_base, "/models"), api_key_for(role))
    except (urllib.error.URLError, OSError, ValueError):
        return None
    for entry_id, text in listing:
        if entry_id != served_name:
            continue
        entry = json.loads(text)
        for name in _LISTED_CONTEXT_FIELDS:
            value = entry.get(name)
            if isinstance(value, int) and value > 0:
                return value
    return None


def _mapped_context(model: str) -> int | None:
    import litellm

    try:
        info = litellm.get_model_info(model)
    except Exception:  # litellm raises a bare Exception for a model its map does not know
        return None
    value = info.get("max_input_tokens") or info.get("max_tokens")
    return value if isinstance(value, int) and value > 0 else None


def context_length(role: ModelRole) -> tuple[int, str] | None:
    """The model's context length in tokens and where it was read, when known."""
    listed = _listed_context(role)
    if listed:
        return listed, "its endpoint's /models"
    mapped = None if role.api_base else _mapped_context(role.model)
    return (mapped, "litellm's model map") if mapped else None


def fit_warning(label: str, role: ModelRole, prompt_estimates: list[int]) -> str | None:
    """A plan line when some prompts still to send are estimated above the model's context."""
    if not prompt_estimates:
        return None
    known = context_length(role)
    if known is None:
        return None
    limit, source = known
    over = sum(1 for tokens in prompt_estimates if tokens > limit)
    if not over:
        return None
    return (f"  warning:    {over} of {len(prompt_estimates)} {label} prompts to send are "
            f"estimated above {role.model}'s context of {limit:,} tokens ({source}), up to "
            f"{max(prompt_estimates):,}: the server will refuse them (stored as refused; a "
            f"model with a larger context fits them)")
