"""litellm prices every reply as it arrives; proactflow prices token totals once per stage
(records.usage_and_cost, from litellm's own price map), so for the calls of its edge that
per-call work is skipped.

Measured with litellm 1.110 against a local endpoint: the per-reply cost calculation is about a
quarter of litellm's CPU per call (more for a model missing from its price map, where each lookup
that fails builds an error), and it is the one part of a call whose result proactflow never
reads. litellm offers no switch for it, so its calculator is wrapped: inside a call made through
`priced_per_stage()` it returns None (no cost, as for a model litellm does not price); anywhere
else, and for any other caller of litellm in the process, it is litellm's own.
"""

from __future__ import annotations

import contextlib
from contextvars import ContextVar
from typing import Any, Iterator

_PER_STAGE: ContextVar[bool] = ContextVar("proactflow_priced_per_stage", default=False)


def install() -> None:
    """Wrap litellm's per-reply cost calculator and success logging once per process."""
    from litellm.litellm_core_utils.litellm_logging import Logging

    original = Logging.response_cost_calculator
    if getattr(original, "__proactflow__", False):
        return

    def response_cost_calculator(self: Any, *args: Any, **kwargs: Any) -> float | None:
        if _PER_STAGE.get():
            return None
        return original(self, *args, **kwargs)

    response_cost_calculator.__proactflow__ = True  # type: ignore[attr-defined]
    Logging.response_cost_calculator = response_cost_calculator  # type: ignore[method-assign]
    _skip_success_logging_without_callbacks(Logging)


async def _nothing_to_log() -> None:
    return None


def _unheard(logging_object: Any) -> bool:
    """Inside `priced_per_stage()` with no success callback registered, globally or for the
    call: nobody reads what litellm's success logging builds or sends."""
    import litellm

    return _PER_STAGE.get() and not (
        litellm.callbacks or litellm.success_callback or litellm._async_success_callback
        or getattr(logging_object, "dynamic_success_callbacks", None)
        or getattr(logging_object, "dynamic_async_success_callbacks", None))


def _skip_success_logging_without_callbacks(logging_class: Any) -> None:
    """After each reply litellm builds its standard logging payload (a copy of the request's
    messages, timings, hidden parameters: about 0.5 ms of CPU per call, measured) and hands it
    to the success callbacks. With none registered (`_unheard`) it is not built. The check runs
    when litellm asks for the handler's coroutine, in the call's context, so any callback
    registered (Langfuse, a custom logger) still gets every call.

    Before that, litellm's wrapper dispatches the reply to its logging: a task per call that
    hands the handler's coroutine to its logging worker's queue, and a check for synchronous
    callbacks; and it stamps the reply with metadata for them (`_hidden_params`: timings, the
    API base, headers, read by callbacks and litellm's proxy, never by proactflow, whose rows
    take the reply's content, usage, model and fingerprint). With nobody to hear them, both are
    skipped too (about 130 function calls per call, and a task)."""
    import litellm.utils

    original = logging_class.async_success_handler

    def async_success_handler(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _unheard(self):
            return _nothing_to_log()
        return original(self, *args, **kwargs)

    logging_class.async_success_handler = async_success_handler
    if getattr(litellm.utils.dispatch_success_logging, "__proactflow__", False):
        return  # litellm's module functions are wrapped once per process
    dispatch = litellm.utils.dispatch_success_logging
    stamp = litellm.utils.update_response_metadata

    def dispatch_success_logging(logging_obj: Any, *args: Any, **kwargs: Any) -> None:
        if _unheard(logging_obj):
            return None
        return dispatch(logging_obj, *args, **kwargs)

    def update_response_metadata(*args: Any, **kwargs: Any) -> None:
        if _unheard(kwargs["logging_obj"] if "logging_obj" in kwargs else args[1]):
            return None
        return stamp(*args, **kwargs)

    dispatch_success_logging.__proactflow__ = True  # type: ignore[attr-defined]
    litellm.utils.dispatch_success_logging = dispatch_success_logging
    litellm.utils.update_response_metadata = update_response_metadata


@contextlib.contextmanager
def priced_per_stage() -> Iterator[None]:
    """Calls made inside are priced by proactflow per stage, not by litellm per reply (the
    context is copied into any task litellm starts for the call, its logging included)."""
    token = _PER_STAGE.set(True)
    try:
        yield
    finally:
        _PER_STAGE.reset(token)


def estimated_cost(model: str, prompt_tokens: int, completion_tokens: int) -> float | None:
    """Dollars for these tokens from litellm's bundled price map; None when the model is not in
    it (local and custom models)."""
    import litellm

    try:
        prompt_cost, completion_cost = litellm.cost_per_token(
            model=model, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    except Exception:  # litellm raises several types for models it has no price for
        return None
    return prompt_cost + completion_cost
