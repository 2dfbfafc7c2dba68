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
import functools
import inspect
import logging
from contextvars import ContextVar
from types import ModuleType
from typing import Any, Iterator

log = logging.getLogger("proactflow")

_PER_STAGE: ContextVar[bool] = ContextVar("proactflow_priced_per_stage", default=False)

LOGGING_CLASS = "litellm_core_utils.litellm_logging.Logging"
"""Where litellm's per-call logging object's class is, below the litellm module."""
PATCHED: dict[str, tuple[str, ...]] = {
    f"{LOGGING_CLASS}.response_cost_calculator": ("self", "result"),
    f"{LOGGING_CLASS}.async_success_handler": ("self", "result"),
    "utils.dispatch_success_logging": ("logging_obj", "result"),
    "utils.update_response_metadata": ("result", "logging_obj"),
}
"""What the patches rebind, below the litellm module, with the leading parameters they rely
on (their names, in order): litellm's internals as of 1.109 and 1.110 (the versions tested)."""
READ = ("callbacks", "success_callback", "_async_success_callback")
"""litellm's lists of registered callbacks the patches read (`_unheard`)."""
_warned: list[str] = []


def _found(litellm: Any, path: str) -> Any:
    found = litellm
    for part in path.split("."):
        found = getattr(found, part)
    return found


def contract_problems(litellm: ModuleType | Any) -> list[str]:
    """How the given litellm module differs from what the patches rely on (empty: it matches)."""
    problems = []
    for path, leading in PATCHED.items():
        try:
            names = tuple(inspect.signature(_found(litellm, path)).parameters)
        except (AttributeError, TypeError, ValueError):
            problems.append(f"no litellm.{path}")
            continue
        if names[:len(leading)] != leading:
            problems.append(f"litellm.{path}{inspect.signature(_found(litellm, path))}")
    problems += [f"no litellm.{name} list" for name in READ
                 if not isinstance(getattr(litellm, name, None), list)]
    return problems


def _real_litellm() -> ModuleType:
    import litellm
    import litellm.litellm_core_utils.litellm_logging  # noqa: F401  (the Logging class)
    import litellm.utils  # noqa: F401

    return litellm


def install(litellm: ModuleType | Any = None) -> bool:
    """Wrap litellm's per-reply cost calculator and success logging, once per process (a
    process's entry does it: cli/, sweeps/process_group.py, the flows). With a litellm whose
    internals differ from what was tested (`contract_problems`), nothing is wrapped: one
    warning line, and calls cost litellm's own CPU. Returns whether the wrappers are on."""
    litellm = litellm if litellm is not None else _real_litellm()
    problems = contract_problems(litellm)
    if problems:
        if not _warned:
            _warned.append(problems[0])
            log.warning("proactflow: litellm %s differs from the versions tested (%s): its "
                        "per-reply pricing and success logging stay on (more CPU per call)",
                        getattr(litellm, "__version__", None) or "(unknown version)",
                        "; ".join(problems))
        return False
    logging_class = _found(litellm, LOGGING_CLASS)
    original = logging_class.response_cost_calculator
    if getattr(original, "__proactflow__", False):
        return True

    @functools.wraps(original)  # its signature stays litellm's: `contract_problems` reads it
    def response_cost_calculator(self: Any, *args: Any, **kwargs: Any) -> float | None:
        if _PER_STAGE.get():
            return None
        return original(self, *args, **kwargs)

    response_cost_calculator.__proactflow__ = True  # type: ignore[attr-defined]
    logging_class.response_cost_calculator = response_cost_calculator
    _skip_success_logging_without_callbacks(litellm, logging_class)
    return True


async def _nothing_to_log() -> None:
    return None


def _unheard(litellm: Any, logging_object: Any) -> bool:
    """Inside `priced_per_stage()` with no success callback registered, globally or for the
    call: nobody reads what litellm's success logging builds or sends."""
    return _PER_STAGE.get() and not (
        litellm.callbacks or litellm.success_callback or litellm._async_success_callback
        or getattr(logging_object, "dynamic_success_callbacks", None)
        or getattr(logging_object, "dynamic_async_success_callbacks", None))


def _skip_success_logging_without_callbacks(litellm: Any, logging_class: Any) -> None:
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
    original = logging_class.async_success_handler

    @functools.wraps(original)
    def async_success_handler(self: Any, *args: Any, **kwargs: Any) -> Any:
        if _unheard(litellm, self):
            return _nothing_to_log()
        return original(self, *args, **kwargs)

    logging_class.async_success_handler = async_success_handler
    if getattr(litellm.utils.dispatch_success_logging, "__proactflow__", False):
        return  # litellm's module functions are wrapped once per process
    dispatch = litellm.utils.dispatch_success_logging
    stamp = litellm.utils.update_response_metadata

    @functools.wraps(dispatch)
    def dispatch_success_logging(logging_obj: Any, *args: Any, **kwargs: Any) -> None:
        if _unheard(litellm, logging_obj):
            return None
        return dispatch(logging_obj, *args, **kwargs)

    # Where litellm passes its logging object, by name or by position (`PATCHED`: checked).
    at = tuple(inspect.signature(stamp).parameters).index("logging_obj")

    @functools.wraps(stamp)
    def update_response_metadata(*args: Any, **kwargs: Any) -> None:
        if _unheard(litellm, kwargs["logging_obj"] if "logging_obj" in kwargs else args[at]):
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
