"""Batch prices from litellm's price map (`input_cost_per_token_batches`,
`output_cost_per_token_batches`): about half the interactive price at most providers."""

from __future__ import annotations

import litellm


def batch_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Dollars for these tokens at the model's batch price; None when the map has none."""
    names = (model, model.split("/", 1)[-1])
    info: dict = next((litellm.model_cost[name] for name in names
                       if name in litellm.model_cost), {})
    prompt_price = info.get("input_cost_per_token_batches")
    completion_price = info.get("output_cost_per_token_batches")
    if prompt_price is None or completion_price is None:
        return None
    return prompt_tokens * prompt_price + completion_tokens * completion_price
