"""What a provider bills for a call's tokens: the prompt tokens its prompt cache served (read)
and stored (written) are billed at their own prices, not at the input price.

Every provider litellm speaks reports them in the reply's usage, which litellm normalises:
`prompt_tokens` counts all of the prompt, cached parts included, `prompt_tokens_details.
cached_tokens` the part read from the cache (OpenAI's own field; Anthropic's
`cache_read_input_tokens`, Gemini's cached content and DeepSeek's cache hits end there too) and
`prompt_tokens_details.cache_creation_tokens` the part written to it (Anthropic's
`cache_creation_input_tokens`). proactflow keeps both with each call and prices them with
litellm's price map (`cache_read_input_token_cost`, `cache_creation_input_token_cost`; the input
price where the map has none, as litellm does).

Batches: the map's `*_batches` price when it has one; else the interactive cache price with the
batch discount of the input price applied to it too: the discounts multiply, as Anthropic bills
them (a cache read in a batch costs 10 % of 50 % of the input price).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any



@dataclass(frozen=True)
class Tokens:
    """A call's (or a sum of calls') tokens as the provider bills them."""

    prompt: int = 0
    """All prompt tokens, those the cache read or wrote included."""
    completion: int = 0
    cache_read: int = 0
    """Of `prompt`, read from the provider's prompt cache."""
    cache_write: int = 0
    """Of `prompt`, written to the provider's prompt cache."""

    def __add__(self, other: "Tokens") -> "Tokens":
        return Tokens(self.prompt + other.prompt, self.completion + other.completion,
                      self.cache_read + other.cache_read, self.cache_write + other.cache_write)


def _field(holder: Any, name: str) -> int:
    """An integer field of a usage object or dict; 0 when absent or not a number."""
    if holder is None:
        return 0
    value = holder.get(name) if isinstance(holder, dict) else getattr(holder, name, None)
    return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else 0


def cache_tokens_of(usage: Any) -> tuple[int, int]:
    """(read, written): the prompt tokens a reply's usage says the provider's cache read and
    wrote; (0, 0) for a provider that reports none."""
    if usage is None:
        return 0, 0
    details = usage.get("prompt_tokens_details") if isinstance(usage, dict) \
        else getattr(usage, "prompt_tokens_details", None)
    read = (_field(details, "cached_tokens") or _field(usage, "cache_read_input_tokens")
            or _field(usage, "prompt_cache_hit_tokens"))
    written = (_field(details, "cache_creation_tokens") or _field(details, "cache_write_tokens")
               or _field(usage, "cache_creation_input_tokens"))
    return read, written


def price_info(model: str) -> dict[str, Any] | None:
    """The model's entry in litellm's price map, under its name with or without the provider
    prefix, or under the provider litellm infers for it; None when it has none."""
    import litellm  # here, not at import: a command that prices nothing does not load it

    names = [model, model.split("/", 1)[-1]]
    try:
        _, provider, _, _ = litellm.get_llm_provider(model=model)
        names.append(f"{provider}/{model.split('/', 1)[-1]}")
    except Exception:  # litellm raises several types for a model it cannot place
        pass
    for name in names:
        info = litellm.model_cost.get(name)
        if isinstance(info, dict) and info.get("input_cost_per_token") is not None \
                and info.get("output_cost_per_token") is not None:
            return info
    return None


def billed_cost(model: str, tokens: Tokens, *, batch: bool = False) -> float | None:
    """Dollars the provider bills for `tokens`, interactive or in a batch; None when litellm's
    map has no price for the model (or, in a batch, no batch price)."""
    info = price_info(model)
    if info is None:  # a name only litellm's own lookup resolves: its cost, cache included
        return None if batch else _litellm_cost(model, tokens)
    input_price = float(info["input_cost_per_token"])
    output_price = float(info["output_cost_per_token"])
    read_price = _price(info, "cache_read_input_token_cost", input_price)
    write_price = _price(info, "cache_creation_input_token_cost", input_price)
    if batch:
        batch_input = info.get("input_cost_per_token_batches")
        batch_output = info.get("output_cost_per_token_batches")
        if batch_input is None or batch_output is None:
            return None
        discount = float(batch_input) / input_price if input_price else 1.0
        read_price = _price(info, "cache_read_input_token_cost_batches", read_price * discount)
        write_price = _price(info, "cache_creation_input_token_cost_batches",
                             write_price * discount)
        input_price, output_price = float(batch_input), float(batch_output)
    uncached = max(0, tokens.prompt - tokens.cache_read - tokens.cache_write)
    return (uncached * input_price + tokens.cache_read * read_price
            + tokens.cache_write * write_price + tokens.completion * output_price)


def list_cost(model: str, tokens: Tokens, *, batch: bool = False) -> float | None:
    """What the same tokens would cost with every prompt token at the input price: the list
    price a bill with a prompt cache is compared with."""
    return billed_cost(model, Tokens(tokens.prompt, tokens.completion), batch=batch)


def _litellm_cost(model: str, tokens: Tokens) -> float | None:
    import litellm
    from litellm.types.utils import PromptTokensDetailsWrapper, Usage

    usage = Usage(prompt_tokens=tokens.prompt, completion_tokens=tokens.completion,
                  total_tokens=tokens.prompt + tokens.completion,
                  prompt_tokens_details=PromptTokensDetailsWrapper(
                      cached_tokens=tokens.cache_read, cache_creation_tokens=tokens.cache_write))
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=tokens.prompt, completion_tokens=tokens.completion,
            usage_object=usage)
    except Exception:  # litellm raises several types for models it has no price for
        return None
    return prompt_cost + completion_cost


def _price(info: dict[str, Any], key: str, default: float) -> float:
    value = info.get(key)
    return float(value) if isinstance(value, (int, float)) else default
