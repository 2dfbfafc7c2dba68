"""What one LLM call is (the request as sent, keyed for the per-call cache) and what came of it
(an answer, a reply that is not an answer, or a failure).

A reply is an answer only when it has content and was not cut short: an empty reply, one cut at
max_tokens or by the model's context and one stopped by a content filter each get their own status
and are never judged. A request the server refused as sent (status refused) is an outcome too: it
is cached, and asked again only by --refresh or a changed key.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, Iterable, Literal

from ..cache.keys import around_list, content_key
from ..common.redaction import register_secret_variable
from ..config.effective import safety_settings_off
from ..config.endpoints import effective_endpoint
from ..config.settings import ModelRole
from .content import Content, images_of, key_content, text_of
from .growing import GrownFacts, GrowingMessages

if TYPE_CHECKING:  # not at run time: prompt_cache.py imports litellm, which a command
    from .prompt_cache import CacheHint, Shape  # that makes no call never loads

NO_KEY_PLACEHOLDER = "no-key-configured"
"""Sent as the key to an endpoint that has none configured, so that litellm never falls back to
a provider key from the environment (OPENAI_API_KEY) and sends it somewhere it was not meant for."""

OutcomeStatus = Literal["ok", "error", "empty", "truncated", "blocked", "refused"]

CONTEXT_CUT = "the reply was cut by the model's context"
"""How the message of a reply truncated by the context (reason `context`) starts; one cut at the
request's max_tokens (reason `max_tokens`) says "cut at max_tokens"."""


def api_key_for(role: ModelRole) -> str | None:
    """The key for a role, read from the environment at call time and never stored.

    A role with its own endpoint sends only the variable it names (`api_key_env`), or a
    placeholder: a provider key from the environment never goes to a custom endpoint. A role
    without one leaves the key to litellm (the provider's usual variable).
    """
    if role.api_key_env:
        register_secret_variable(role.api_key_env)
        return os.environ.get(role.api_key_env)
    if role.api_base:
        return NO_KEY_PLACEHOLDER
    return None


def truncation_reason(message: str | None) -> str:
    """`context` or `max_tokens`: what cut a truncated reply, read from its message."""
    return "context" if (message or "").startswith(CONTEXT_CUT) else "max_tokens"


def context_cut_message(prompt_tokens: int | None, completion_tokens: int | None,
                        detail: str = "finish_reason length") -> str:
    counts = (f"{prompt_tokens} prompt + {completion_tokens} reply = "
              f"{prompt_tokens + completion_tokens} tokens"
              if prompt_tokens is not None and completion_tokens is not None else "no counts")
    return (f"{CONTEXT_CUT} ({counts}; {detail}): a larger max_tokens cannot help, a larger "
            "context or a shorter prompt can")


def reply_status(content: str | None, finish_reason: str | None,
                 refusal: str | None = None, *, max_tokens: int | None = None,
                 prompt_tokens: int | None = None, completion_tokens: int | None = None,
                 context_length: int | None = None) -> tuple[OutcomeStatus, str | None]:
    """Whether a provider's reply is an answer, and why not when it is not. A reply cut by the
    length limit was cut by the model's context, not by max_tokens, when none was sent, when it
    is shorter than max_tokens, or when prompt and reply fill the known context."""
    if finish_reason == "content_filter" or refusal:
        return "blocked", ("the reply was refused: " + refusal[:200] if refusal
                           else "the reply was stopped by the provider's content filter")
    if finish_reason == "length" and completion_tokens is not None and (
            max_tokens is None or completion_tokens < max_tokens
            or (context_length and prompt_tokens is not None
                and prompt_tokens + completion_tokens >= context_length)):
        return "truncated", context_cut_message(prompt_tokens, completion_tokens)
    if finish_reason == "length":
        return "truncated", ("the reply was cut at max_tokens (finish_reason length)"
                             + ("" if (content or "").strip() else
                                " before any content: the budget went to reasoning"))
    if not (content or "").strip():
        return "empty", f"the reply has no content (finish_reason {finish_reason})"
    return "ok", None


@dataclass(frozen=True)
class RetryPlan:
    """How a suite's protocol asks again while replies are unusable, where it differs from the
    default (the same request each time; a cut-off reply not asked again). Not part of the
    request's key: the call is the first request, whichever try answered it."""

    attempts: int | None = None
    """The judge's tries while its replies are unusable, when the user set none (the
    protocol's own number)."""
    later_params: tuple[tuple[str, Any], ...] = ()
    """Parameters replacing the request's own from try `later_from` (0-based) on, e.g. a
    higher temperature once the first tries gave no usable reply."""
    later_from: int = 0
    ask_again_when_truncated: bool = False
    """A reply cut off at the token limit is asked again like an unusable one (a client that
    raises on it, as some benchmarks' do), instead of ending the call."""
    keep_non_answers: bool = False
    """A reply that is not an answer (empty, cut off, refused) is the call's outcome, cached
    like an answer, for a benchmark whose script reads whatever came back, once."""
    check: Callable[[str], None] | None = None
    """Raises ValueError for a reply this request cannot use although the suite's parser reads
    it (e.g. a judge's list of the wrong length for this sample): asked again like an
    unparsable one, and kept as an attempt like it."""

    def request_for(self, request: "ChatRequest", attempt: int) -> "ChatRequest":
        if attempt < self.later_from or not self.later_params:
            return request
        params = {**dict(request.params), **dict(self.later_params)}
        return replace(request, params=tuple(sorted(params.items())))


@dataclass(frozen=True)
class ChatRequest:
    """One call exactly as sent: its key identifies it in the per-call cache.

    `endpoint` is the effective endpoint (canonical, without secrets) and `identity` what else
    tells the answering model apart (a revision label, the endpoint's model fingerprint): both
    are in the key, so an answer is reused only from the same model at the same place.
    """

    model: str
    api_base: str | None
    messages: tuple[tuple[str, Content], ...]
    """(role, content): text, or text and images (proactflow.providers.content)."""
    params: tuple[tuple[str, Any], ...]
    sample_index: int = 0
    identity: tuple[tuple[str, str], ...] = ()
    retry: RetryPlan | None = field(default=None, compare=False)
    """The suite's way of asking again, when it has one (see RetryPlan)."""
    cache: CacheHint | None = field(default=None, compare=False)
    """Which calls share a prefix with this one, for the provider's prompt cache
    (prompt_cache.py): how it is sent, never part of the key."""
    grown: GrownFacts | None = field(default=None, compare=False, repr=False)
    """Its key material, estimate and shape as its growing chat kept them (growing.py), when
    it has one: a long chat's request builds them from nothing again."""

    @classmethod
    def build(cls, role: ModelRole, messages: Iterable[tuple[str, Content]], *,
              sample_index: int = 0, extra: dict[str, Any] | None = None,
              retry: RetryPlan | None = None, cache: CacheHint | None = None,
              grown: GrowingMessages | None = None) -> "ChatRequest":
        """With `grown`, the chat whose messages these are (`messages` is its list): the key's
        material, the estimate and the shape are taken from what it keeps, as they are now."""
        gen = role.generation
        params: dict[str, Any] = {}
        if gen.max_tokens is not None:
            params["max_tokens"] = gen.max_tokens
        if gen.temperature is not None:
            params["temperature"] = gen.temperature
        if gen.top_p is not None:
            params["top_p"] = gen.top_p
        if gen.reasoning_effort is not None:
            params["reasoning_effort"] = gen.reasoning_effort
        if gen.gemini_safety_off:
            params["safety_settings"] = safety_settings_off(role.model)
        params.update(extra or {})
        identity = tuple((name, value) for name, value in
                         (("revision", role.revision),
                          ("endpoint_fingerprint", role.endpoint_fingerprint)) if value)
        assert grown is None or messages is grown.messages, "a grown chat's own messages"
        api_base = effective_endpoint(role.model, role.api_base)
        sorted_params = tuple(sorted(params.items()))
        facts = None
        if grown is not None:
            # The key's JSON before the messages, hashed with them as the chat keeps them
            # (cache.keys.HashedItems), from the prefix the hint says the next request shares.
            around = around_list(_key_material(role.model, api_base, sorted_params,
                                               sample_index, identity), "messages")
            facts = grown.facts(role.model, around[0] if around is not None else None,
                                cache.shared if cache is not None else None)
        return cls(role.model, api_base, tuple(messages), sorted_params, sample_index,
                   identity, retry, cache, facts)

    @property
    def estimated_prompt_tokens(self) -> int:
        """Text: a provider-neutral estimate of about four characters per token (errs high);
        images as litellm counts them for this model."""
        if self.grown is not None and self.grown.model == self.model:
            return self.grown.estimated_prompt_tokens
        text = sum(len(text_of(content)) for _, content in self.messages) // 4
        return text + sum(image.estimated_tokens(self.model) for _, content in self.messages
                          for image in images_of(content))

    def shape(self) -> "Shape":
        """prompt_cache.shape_of its messages (the plan's), as its growing chat kept them when
        it has one."""
        if self.grown is not None and self.grown.model == self.model:
            return self.cache, self.grown.shape
        from .prompt_cache import shape_of
        return shape_of(self.model, list(self.messages), self.cache)

    @cached_property
    def key(self) -> str:
        material = _key_material(self.model, self.api_base, self.params, self.sample_index,
                                 self.identity)
        material["messages"] = self.grown.key_messages if self.grown is not None else \
            [[role, key_content(content)] for role, content in self.messages]
        return content_key(material)


def _key_material(model: str, api_base: str | None, params: tuple[tuple[str, Any], ...],
                  sample_index: int, identity: tuple[tuple[str, str], ...]) -> dict[str, Any]:
    """What a request's key hashes besides its messages."""
    material: dict[str, Any] = {"model": model, "api_base": api_base, "params": dict(params),
                                "sample_index": sample_index}
    material.update(identity)  # only when set: keys of plain roles stay as they were
    return material


@dataclass
class ChatOutcome:
    """The result of one logical call: an answer (status ok), a reply that is not an answer
    (empty, truncated, blocked) or a failure (error)."""

    request_key: str
    status: OutcomeStatus = "ok"
    content: str | None = None
    finish_reason: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cache_read_tokens: int = 0
    """Of prompt_tokens, read from the provider's prompt cache (billing.py)."""
    cache_write_tokens: int = 0
    """Of prompt_tokens, written to the provider's prompt cache."""
    latency_s: float | None = None
    attempts: int = 0
    from_cache: bool = False
    error: str | None = None
    """Why the outcome is not an answer (any status but ok)."""
    refusal: str | None = None
    """Status refused: why (provider_errors.RefusalKind); a truncated reply cut by the
    context: "context_full"."""
    served_model: str | None = None
    system_fingerprint: str | None = None
    litellm_version: str | None = None
    parsed: Any = None

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    def record(self) -> dict[str, Any]:
        """What the per-call cache keeps of a finished call."""
        return {"status": self.status, "content": self.content,
                "finish_reason": self.finish_reason, "message": self.error,
                "prompt_tokens": self.prompt_tokens, "completion_tokens": self.completion_tokens,
                "latency_s": self.latency_s, "attempts": self.attempts,
                "served_model": self.served_model, "system_fingerprint": self.system_fingerprint,
                "litellm_version": self.litellm_version,
                **({"refusal": self.refusal} if self.refusal else {}),
                # Only when the provider's cache served or stored part of the prompt: a
                # record without them (every record stored before) read none.
                **({"cache_read_tokens": self.cache_read_tokens}
                   if self.cache_read_tokens else {}),
                **({"cache_write_tokens": self.cache_write_tokens}
                   if self.cache_write_tokens else {})}

    @property
    def final(self) -> bool:
        """A stored outcome a later run reuses even though it is not an answer: the server
        refused the request, or the reply filled the model's context (asking the same server
        again would end the same way; --refresh asks anyway)."""
        return self.status == "refused" or (
            self.status == "truncated" and truncation_reason(self.error) == "context")

    @classmethod
    def from_record(cls, request_key: str, record: dict[str, Any]) -> "ChatOutcome":
        status, message = record.get("status"), record.get("message")
        if status is None:  # cached before replies were classified
            status, message = reply_status(record.get("content"), record.get("finish_reason"))
        return cls(request_key, status=status, content=record.get("content"),
                   finish_reason=record.get("finish_reason"), error=message,
                   prompt_tokens=record.get("prompt_tokens"),
                   completion_tokens=record.get("completion_tokens"),
                   cache_read_tokens=record.get("cache_read_tokens") or 0,
                   cache_write_tokens=record.get("cache_write_tokens") or 0,
                   latency_s=record.get("latency_s"), attempts=record.get("attempts", 0),
                   served_model=record.get("served_model"),
                   system_fingerprint=record.get("system_fingerprint"),
                   litellm_version=record.get("litellm_version"),
                   refusal=record.get("refusal"), from_cache=True)
