"""Which endpoint a role's calls really reach, in one canonical spelling, and a fingerprint of
the model an OpenAI-compatible endpoint serves.

Both enter cache keys: an answer is only reused for the endpoint that gave it. litellm reads
base URLs from the environment when none is passed (OPENAI_BASE_URL, ANTHROPIC_BASE_URL,
AZURE_API_BASE, Vertex's project and location...), so the endpoint is resolved the way litellm
resolves it, not taken from `--api-base` alone.
"""

from __future__ import annotations

import base64
import json
import os
import urllib.error
import urllib.request
from functools import lru_cache
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

from ..cache.keys import content_key
from ..common.redaction import redact_url

_LOOPBACK_NAMES = {"localhost", "127.0.0.1", "::1", "[::1]", "0.0.0.0"}
_DEFAULT_PORTS = {"http": 80, "https": 443}
# Base-URL variables litellm reads per provider, beyond the generic <PROVIDER>_API_BASE.
_EXTRA_BASE_VARIABLES = {
    "openai": ("OPENAI_BASE_URL", "OPENAI_API_BASE"),
    "text-completion-openai": ("OPENAI_BASE_URL", "OPENAI_API_BASE"),
    "anthropic": ("ANTHROPIC_API_BASE", "ANTHROPIC_BASE_URL"),
    "vertex_ai": ("VERTEXAI_API_BASE",),
}
# Settings that choose a different backend without a base URL.
_PLACEMENT_VARIABLES = {
    "vertex_ai": (("VERTEXAI_PROJECT", "VERTEX_PROJECT"), ("VERTEXAI_LOCATION", "VERTEX_LOCATION")),
    "vertex_ai_beta": (("VERTEXAI_PROJECT", "VERTEX_PROJECT"),
                       ("VERTEXAI_LOCATION", "VERTEX_LOCATION")),
}
# Fields of a /models entry that change on every request (vLLM stamps `created` with the time
# of the response), so they say nothing about the model.
_VOLATILE_MODEL_FIELDS = {"created", "permission"}


@lru_cache(maxsize=256)  # pure, and asked for by every request a run builds
def normalise_endpoint(url: str) -> str:
    """One spelling per endpoint: lower-case scheme and host, loopback names as 127.0.0.1,
    default ports and trailing slashes dropped, userinfo and query values masked."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if host in _LOOPBACK_NAMES or host == "::1":
        host = "127.0.0.1"
    elif ":" in host:
        host = f"[{host}]"
    port = parts.port
    netloc = host if port is None or _DEFAULT_PORTS.get(scheme) == port else f"{host}:{port}"
    if parts.username or parts.password:
        netloc = "user@" + netloc  # masked below; kept so that it differs from no userinfo
    canonical = urlunsplit(SplitResult(scheme, netloc, parts.path.rstrip("/"), parts.query, ""))
    return redact_url(canonical)


def endpoint_url(api_base: str, suffix: str) -> str:
    """`suffix` appended to the path of an endpoint URL, its query string kept in place."""
    parts = urlsplit(api_base)
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + suffix))


@lru_cache(maxsize=256)
def provider_of(model: str) -> str:
    """litellm's provider for a model string ('openai' for gpt-4o-mini, 'anthropic' for
    anthropic/...); the prefix when litellm cannot tell."""
    import litellm

    try:
        return litellm.get_llm_provider(model)[1]
    except Exception:  # litellm raises assorted types for strings it cannot place
        return model.split("/", 1)[0] if "/" in model else "unknown"


def _first_set(names: tuple[str, ...]) -> str | None:
    return next((os.environ[name] for name in names if os.environ.get(name)), None)


def effective_endpoint(model: str, api_base: str | None) -> str | None:
    """The endpoint the calls of this role reach, canonical and free of secrets; None when it
    is the provider's own default (so keys of ordinary runs do not depend on this function)."""
    if api_base:
        return normalise_endpoint(api_base)
    provider = provider_of(model)
    upper = provider.upper().replace("-", "_")
    variables = _EXTRA_BASE_VARIABLES.get(provider, ()) + (f"{upper}_API_BASE",
                                                             f"{upper}_BASE_URL")
    base = _first_set(variables)
    if base:
        return f"{provider}:{normalise_endpoint(base)}"
    placement = [_first_set(names) for names in _PLACEMENT_VARIABLES.get(provider, ())]
    if any(placement):
        return f"{provider}:" + "/".join(value or "-" for value in placement)
    return None


# Where a provider's calls go when no base URL is set: probed before a run to tell "no network"
# apart in a second instead of after a minute of retries.
_DEFAULT_HOSTS = {
    "openai": "https://api.openai.com", "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com", "mistral": "https://api.mistral.ai",
    "groq": "https://api.groq.com", "deepseek": "https://api.deepseek.com",
    "together_ai": "https://api.together.xyz", "xai": "https://api.x.ai",
    "openrouter": "https://openrouter.ai", "cohere": "https://api.cohere.com",
    "fireworks_ai": "https://api.fireworks.ai",
}


_NAME_PREFIXES = (("gpt-", "openai"), ("o1", "openai"), ("o3", "openai"), ("o4", "openai"),
                  ("chatgpt", "openai"), ("claude", "anthropic"), ("gemini", "gemini"))


def provider_url(model: str) -> str | None:
    """Where a provider model's calls go (a base URL from the environment, else the provider's
    own host), told from the model string alone, without loading litellm (seconds of imports):
    it is probed first thing, so that a machine without a network hears so at once. None for
    a provider this does not know (its calls are not probed)."""
    provider = model.split("/", 1)[0] if "/" in model else next(
        (name for prefix, name in _NAME_PREFIXES if model.startswith(prefix)), None)
    if provider is None:
        return None
    upper = provider.upper().replace("-", "_")
    base = _first_set(_EXTRA_BASE_VARIABLES.get(provider, ())
                      + (f"{upper}_API_BASE", f"{upper}_BASE_URL"))
    return base or _DEFAULT_HOSTS.get(provider)


def split_credentials(url: str) -> tuple[str, str | None]:
    """An endpoint URL without its user info, and the `Authorization` header value that user
    info stands for (`Basic`, as a browser or curl sends it), None when it has none. HTTP
    clients refuse a URL holding user info beside an Authorization header of their own (the
    key's), and some send neither: the calls send this header instead, and only to this URL."""
    parts = urlsplit(url)
    if "@" not in parts.netloc:
        return url, None
    netloc = parts.netloc.rsplit("@", 1)[-1]
    token = base64.b64encode(f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
                             .encode()).decode()
    return urlunsplit(parts._replace(netloc=netloc)), f"Basic {token}"


def get_request(url: str, api_key: str | None) -> urllib.request.Request:
    """A GET of an endpoint URL as the calls send it: user info in the URL as basic
    authentication, else the key as a bearer token."""
    bare, basic = split_credentials(url)
    request = urllib.request.Request(bare)
    if basic:
        request.add_header("Authorization", basic)
    elif api_key:
        request.add_header("Authorization", f"Bearer {api_key}")
    return request


_listings: dict[tuple[str, str], tuple[tuple[tuple[str, str], ...], Exception | None]] = {}
"""Each endpoint's /models answer (or the error it gave), read once per run (forget_listings
starts a run afresh): the access check and the fingerprints of both roles share it."""


def forget_listings() -> None:
    _listings.clear()


def models_listing(url: str, api_key: str | None) -> tuple[tuple[str, str], ...]:
    """(id, entry as JSON) of each model the endpoint lists; raises what reading it raised
    (urllib's errors; ValueError for an answer that is not JSON)."""
    key = (url, content_key({"key": api_key}))
    if key not in _listings:
        try:
            _listings[key] = (_models_listing(url, api_key), None)
        except (urllib.error.URLError, OSError, ValueError) as exc:
            _listings[key] = ((), exc)
    listing, error = _listings[key]
    if error is not None:
        raise error
    return listing


class ListingRefused(urllib.error.HTTPError):
    """An HTTP error answering /models, with the sentence the server gave (its body, read
    once: the error is kept for the rest of the run)."""

    def __init__(self, error: urllib.error.HTTPError, sentence: str):
        super().__init__(error.url, error.code, error.msg, error.hdrs, None)
        self.sentence = sentence


def server_sentence(body: bytes | str) -> str:
    """What an error body says, in one line: the `message` of an OpenAI-style error (or a
    gateway's `detail`), else the text itself; at most 300 characters."""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    try:
        found: object = json.loads(text)
    except ValueError:
        found = text
    for _ in range(4):  # {"error": {"message": ...}}, {"detail": {"error": ...}}, ...
        if not isinstance(found, dict):
            break
        found = next((found[name] for name in ("error", "message", "detail", "msg")
                      if found.get(name)), json.dumps(found))
    return " ".join(str(found).split())[:300]


def _models_listing(url: str, api_key: str | None) -> tuple[tuple[str, str], ...]:
    try:
        with urllib.request.urlopen(get_request(url, api_key), timeout=10) as answer:
            listing = json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as exc:
        try:
            body = exc.read()
        except OSError:
            body = b""
        raise ListingRefused(exc, server_sentence(body) or exc.reason) from None
    entries = listing.get("data") if isinstance(listing, dict) else None
    return tuple((str(entry.get("id")), json.dumps(entry, sort_keys=True))
                 for entry in entries or [] if isinstance(entry, dict))


def served_name(model: str) -> str:
    """The name an OpenAI-compatible endpoint is asked for: the model string without its
    litellm provider prefix (openai/tiny asks for tiny)."""
    return model.split("/", 1)[1] if "/" in model else model


def endpoint_fingerprint(api_base: str, model: str, api_key: str | None) -> str | None:
    """sha256 of the endpoint's /models entry for `model` without its per-request fields; None
    when the endpoint lists no such entry or has no /models (the fingerprint is then simply not
    part of the key)."""
    try:
        listing = models_listing(endpoint_url(api_base, "/models"), api_key)
    except (urllib.error.URLError, OSError, ValueError):
        return None
    for entry_id, text in listing:
        if entry_id == served_name(model):
            entry = {k: v for k, v in json.loads(text).items() if k not in _VOLATILE_MODEL_FIELDS}
            return content_key(entry)
    return None
