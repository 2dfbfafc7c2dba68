"""What goes over the wire of Anthropic's Message Batches API, converted by litellm's own code.

A batch line's `params` are what litellm would POST to /v1/messages for the same request made
interactively (litellm's parameter mapping, then AnthropicConfig's request transformation and its
beta filtering, in the order litellm's Anthropic handler applies them), and a line's result
message becomes the chat completion litellm makes of an interactive reply (AnthropicConfig's
response transformation): a batched call and an interactive one end as the same cache record.

Anthropic keeps no metadata on a batch, so its lines carry the batch's tag: a line's wire
`custom_id` is 20 characters of the tag's digest followed by the request's key, a 64-digit hex
sha256 written in 43 base64url characters (Anthropic takes at most 64 of [A-Za-z0-9_-]).

Also here: the API's root from a role's base, and what a batch's state, its counts and an
errored line's error mean in the protocol's terms.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
import re
from datetime import datetime
from typing import Any, Mapping

import httpx
from litellm.anthropic_beta_gated_fields import strip_beta_gated_request_body
from litellm.anthropic_beta_headers_manager import update_request_with_filtered_beta
from litellm.llms.anthropic.chat.transformation import AnthropicConfig
from litellm.llms.anthropic.common_utils import AnthropicError
from litellm.types.utils import ModelResponse
from litellm.utils import get_optional_params

from ..common.redaction import redact

from .protocol import BatchLine, BatchProgress, BatchStatus

PROVIDER = "anthropic"
DEFAULT_BASE = "https://api.anthropic.com"
TAG_CHARS = 20
_HEX_KEY = re.compile(r"[0-9a-f]{64}")
_WIRE_ID = re.compile(r"[A-Za-z0-9_-]{64}|[A-Za-z0-9_-]{21,63}")
JSON_TOOL = "json_tool_call"
"""The tool litellm forces to get JSON out of a Claude model that has no structured output."""


def tag_mark(tag: str) -> str:
    """The tag as every line of its batch carries it."""
    digest = hashlib.sha256(tag.encode("utf-8")).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii")[:TAG_CHARS]


def wire_id(custom_id: str, tag: str) -> str:
    """The line's custom_id as Anthropic gets it: the tag's mark, then the request's key."""
    if not _HEX_KEY.fullmatch(custom_id):
        raise ValueError(f"a batch line's custom_id is a request key (64 hex digits), "
                         f"not {custom_id[:80]!r}")
    key = base64.urlsafe_b64encode(bytes.fromhex(custom_id)).decode("ascii").rstrip("=")
    return tag_mark(tag) + key


def split_wire_id(wire: str) -> tuple[str, str] | None:
    """(tag mark, request key) of a wire custom_id; None for a line proactflow did not send."""
    if len(wire) != TAG_CHARS + 43 or not _WIRE_ID.fullmatch(wire):
        return None
    try:
        key = base64.urlsafe_b64decode(wire[TAG_CHARS:] + "=").hex()
    except ValueError:
        return None
    return wire[:TAG_CHARS], key


def model_name(body: Mapping[str, Any]) -> str:
    return str(body["model"]).removeprefix(f"{PROVIDER}/")


def _optional_params(body: Mapping[str, Any]) -> dict[str, Any]:
    """litellm's mapping of the request's OpenAI settings onto Anthropic's, as `completion`
    makes it."""
    settings = {name: value for name, value in body.items() if name not in ("model", "messages")}
    return get_optional_params(model=model_name(body), custom_llm_provider=PROVIDER,
                               messages=copy.deepcopy(body["messages"]), **settings)


def _prepared(body: Mapping[str, Any]) -> tuple[str, list, dict[str, Any], dict[str, Any]]:
    """(model, messages, optional params, headers) as litellm's Anthropic handler has them
    before it transforms the request."""
    model, messages = model_name(body), copy.deepcopy(body["messages"])
    optional = _optional_params(body)
    for handled_apart in ("stream", "json_mode", "is_vertex_request",
                          "vertex_count_tokens_location"):
        optional.pop(handled_apart, None)
    optional["is_vertex_request"] = False
    # A stand-in key: only the headers' beta values are kept, the role's key goes in the
    # batch request's own headers.
    headers = AnthropicConfig().validate_environment(
        headers={}, model=model, messages=messages, optional_params=dict(optional),
        litellm_params={}, api_key="stand-in", api_base=None)
    return model, messages, optional, headers


def _finished(model: str, data: dict[str, Any],
              headers: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    headers, data = update_request_with_filtered_beta(headers=headers, request_data=data,
                                                      provider=PROVIDER)
    params = dict(strip_beta_gated_request_body(data, headers, drop_params=None, model=model,
                                                provider=PROVIDER))
    params.pop("stream", None)
    betas = [value.strip() for value in str(headers.get("anthropic-beta") or "").split(",")
             if value.strip()]
    return params, betas


async def request_params(body: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The /v1/messages body litellm would send for this OpenAI chat request, and the
    `anthropic-beta` values it would send with it."""
    model, messages, optional, headers = _prepared(body)
    data = await AnthropicConfig().async_transform_request(
        model=model, messages=messages, optional_params=optional, litellm_params={},
        headers=headers)
    return _finished(model, data, headers)


def request_params_now(body: Mapping[str, Any]) -> dict[str, Any]:
    """`request_params` without awaiting: the same body, except that images given as http://
    links stay links (the awaited transformation downloads and inlines them)."""
    model, messages, optional, headers = _prepared(body)
    data = AnthropicConfig().transform_request(
        model=model, messages=messages, optional_params=optional, litellm_params={},
        headers=headers)
    return _finished(model, data, headers)[0]


class _Quiet:
    """The logging object litellm's transformation reports to: nothing to report here."""

    def post_call(self, *args: Any, **kwargs: Any) -> None:
        pass


def completion(message: dict[str, Any], line: BatchLine | None) -> dict[str, Any]:
    """The OpenAI chat completion litellm makes of this reply to an interactive call.

    With the request (`line`), the reply is read exactly as litellm reads it (its JSON mode and
    the response_format's schema decide how a forced tool's input becomes the content). Without
    it (a batch found again by another process), JSON mode is recognised by the forced tool in
    the reply; the schema is then unknown, so a JSON answer holding non-ASCII text is written
    with escapes where the interactive call would keep the characters.
    """
    if line is not None:
        optional = _optional_params(line.body)
        messages = copy.deepcopy(line.body["messages"])
    else:
        forced = any(block.get("type") == "tool_use" and block.get("name") == JSON_TOOL
                     for block in message.get("content") or [])
        optional, messages = {"json_mode": forced}, []
    json_mode = bool(optional.pop("json_mode", False))
    raw = httpx.Response(200, content=json.dumps(message).encode("utf-8"),
                         headers={"content-type": "application/json"},
                         request=httpx.Request("POST", f"{DEFAULT_BASE}/v1/messages"))
    quiet: Any = _Quiet()
    response = AnthropicConfig().transform_response(
        model=model_name(line.body) if line is not None else str(message.get("model", "")),
        raw_response=raw, model_response=ModelResponse(), logging_obj=quiet,
        request_data={}, messages=messages, optional_params=optional, litellm_params={},
        encoding=None, json_mode=json_mode)
    return response.model_dump()


def as_exception(status: int, text: str, headers: Mapping[str, str]) -> Exception:
    """An HTTP failure of the batch API as litellm's exception for it, for classify()."""
    try:
        detail = json.loads(text)["error"]
        message = f"{detail.get('type', 'error')}: {detail.get('message', '')}"
    except (ValueError, KeyError, TypeError, AttributeError):
        message = text.strip().splitlines()[0] if text.strip() else f"HTTP {status}"
    return AnthropicError(status_code=status, message=message[:300],
                          headers=httpx.Headers(dict(headers)))



# The API's states and errors.

_STATUS_OF_ERROR = {"invalid_request_error": 400, "authentication_error": 401,
                    "permission_error": 403, "not_found_error": 404, "request_too_large": 413,
                    "rate_limit_error": 429, "api_error": 500, "overloaded_error": 529}


def api_root(api_base: str | None) -> str:
    """The API's root, whether the role's base names it, its /v1 or its /v1/messages."""
    root = (api_base or DEFAULT_BASE).rstrip("/")
    for suffix in ("/messages", "/v1"):
        root = root.removesuffix(suffix)
    return root


def moment(text: str | None) -> float | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def status_of(batch: Mapping[str, Any]) -> BatchStatus:
    state = batch.get("processing_status")
    if state == "in_progress":
        return "in_progress"
    if state == "canceling":
        return "cancelling"
    if state != "ended":
        raise ValueError(f"unknown processing_status {state!r}")
    if batch.get("cancel_initiated_at"):
        return "cancelled"
    if (batch.get("request_counts") or {}).get("expired"):
        return "expired"
    return "completed"


def progress_of(batch: Mapping[str, Any]) -> BatchProgress:
    counts = {name: int(value or 0) for name, value in (batch.get("request_counts") or {}).items()}
    total = sum(counts.get(name, 0) for name in
                ("processing", "succeeded", "errored", "canceled", "expired"))
    return BatchProgress(status=status_of(batch), total=total,
                         done=counts.get("succeeded", 0) + counts.get("errored", 0),
                         failed=counts.get("errored", 0))


def line_error(error: Any) -> tuple[int | None, str]:
    """(HTTP status, one line) of an errored line's error, in either of the shapes Anthropic
    writes it ({type, message}, or that inside {type: "error", error})."""
    if isinstance(error, Mapping) and isinstance(error.get("error"), Mapping):
        error = error["error"]
    if not isinstance(error, Mapping):
        return None, "the line failed at the provider"
    kind = str(error.get("type") or "error")
    message = " ".join(str(error.get("message") or "").split())
    return _STATUS_OF_ERROR.get(kind), redact(f"{kind}: {message}" if message else kind)[:300]
