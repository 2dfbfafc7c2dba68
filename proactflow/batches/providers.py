"""Which batch API a role's calls go to: litellm's provider name -> the adapter that speaks its
batch API (protocol.BatchProvider). A provider is added by one entry in ADAPTERS."""

from __future__ import annotations

from typing import Callable

import litellm

from ..config.settings import ModelRole
from . import anthropic, openai_batches
from .protocol import BatchProvider

AdapterFactory = Callable[[ModelRole], BatchProvider]

ADAPTERS: dict[str, AdapterFactory] = {
    **{name: openai_batches.for_role for name in openai_batches.PROVIDERS},
    anthropic.PROVIDER: anthropic.for_role,
}
"""The providers with a batch API proactflow speaks, by litellm's name for them."""


def provider_name(role: ModelRole) -> str:
    """The provider as litellm names it for this role ("openai", "anthropic", ...)."""
    try:
        return litellm.get_llm_provider(role.model, api_base=role.api_base)[1]
    except Exception:  # litellm raises several types for a model it cannot place
        return "unknown"


def batch_provider(role: ModelRole) -> BatchProvider | None:
    """The adapter for this role's batch API, with its credentials; None when its provider has
    none proactflow speaks."""
    factory = ADAPTERS.get(provider_name(role))
    return factory(role) if factory is not None else None


def batches_supported(role: ModelRole) -> bool:
    return provider_name(role) in ADAPTERS
