"""Structured output that adapts to the server: a judge asks for `response_format` json_schema;
a server that refuses it (recognised by its message, whatever its status) is asked with
json_object, then with none, for the rest of the run, said once in one line.

One state per model and endpoint in this process: the first call whose format is not yet known to
work goes alone (the others wait for it), so a server refuses a format at most once per run. The
refusal is kept in the per-call cache too (`refusal_key`), so a later run does not ask it again
(unless --refresh). The call keeps its key (the request as first built): the cache answers the
next run without asking. The reply is read by the same parser whatever was sent.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field, replace

from ..cache.keys import content_key
from .chat import ChatRequest

log = logging.getLogger("proactflow")

LADDER = ("json_schema", "json_object", "none")


def format_of(request: ChatRequest) -> str:
    """The response_format type a request asks for ("none" when it asks for none)."""
    value = dict(request.params).get("response_format")
    if not value:
        return "none"
    return str(value.get("type", "json_schema")) if isinstance(value, dict) else str(value)


def with_format(request: ChatRequest, name: str) -> ChatRequest:
    """The request asking for `name` instead (its key stays the first request's: the caller
    keys the call by the request it was given)."""
    params = {k: v for k, v in request.params if k != "response_format"}
    if name == "json_object":
        params["response_format"] = {"type": "json_object"}
    return replace(request, params=tuple(sorted(params.items())))


@dataclass
class FormatState:
    """What one model at one endpoint is known to take."""

    refused: set[str] = field(default_factory=set)
    working: set[str] = field(default_factory=set)
    loaded: bool = False
    """Whether the refusals stored by earlier runs were read."""
    locks: dict[int, asyncio.Lock] = field(default_factory=dict)

    def lock(self) -> asyncio.Lock:
        loop = id(asyncio.get_running_loop())
        return self.locks.setdefault(loop, asyncio.Lock())

    def best(self, asked: str) -> str:
        """The format to send for one asked for: the first not refused from `asked` down."""
        start = LADDER.index(asked) if asked in LADDER else 0
        return next((name for name in LADDER[start:] if name not in self.refused), "none")


_states: dict[tuple[str, str | None], FormatState] = {}


def refusal_key(request: ChatRequest, name: str) -> str:
    """Where the per-call cache keeps that this model at this endpoint refused format `name`."""
    return content_key({"response_format_refused": name, "model": request.model,
                        "api_base": request.api_base, **dict(request.identity)})


def state_for(model: str, api_base: str | None) -> FormatState:
    return _states.setdefault((model, api_base), FormatState())


def note_refused(state: FormatState, model: str, endpoint: str | None, name: str,
                 message: str) -> str:
    """Record that `name` was refused; the format to send instead. Said once, in one line."""
    state.refused.add(name)
    instead = state.best(name)
    where = f" at {endpoint}" if endpoint else ""
    log.warning("%s%s refuses response_format %s (%s): sending %s for the rest of the run "
                "(--judge-response-format %s says so from the start)",
                model, where, name, message[:160], instead, instead)
    return instead


def forget_all() -> None:
    """Tests: each run in one process starts knowing nothing."""
    _states.clear()


def adapted(request: ChatRequest, state: FormatState) -> ChatRequest:
    asked = format_of(request)
    best = state.best(asked)
    return request if best == asked else with_format(request, best)


def known_to_work(state: FormatState, request: ChatRequest) -> bool:
    name = format_of(request)
    return name == "none" or name in state.working
