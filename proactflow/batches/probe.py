"""Whether an endpoint has a batch API, asked once per run before the plan: a cheap read of its
batches route (`GET {api_base}/batches?limit=1`). Many OpenAI-compatible servers (llama.cpp's,
vLLM's, plain gateways) serve chat completions and no batch API; a litellm proxy serves the
routes but answers HTTP 500 until its files settings are configured. `--batch auto` then calls
such an endpoint interactively, and `--batch` stops before any call, saying why.

Only a clear answer means "none": 404, 405 or 501, a 500 whose message says the files API is
not set up, or a 500 given again when asked a second time (the litellm proxy, without files
settings, answers its batches route with a bare "Internal Server Error"; a route that cannot list
one batch twice in a row will not take a night's). Anything else (a success, a rejected key, a
server down) leaves the batch API presumed, so that the run's own calls meet, and report,
whatever is wrong.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
import urllib.request
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from ..cache.keys import content_key
from ..common.redaction import redact, redact_url
from ..config.endpoints import endpoint_url, get_request
from ..config.settings import ModelRole
from ..providers.chat import api_key_for
from .openai_batches import PROVIDERS as OPENAI_STYLE
from .providers import provider_name

PROBE_TIMEOUT_S = 10.0
SECOND_ASK_AFTER_S = 1.0
"""How long after a first HTTP 500 the batches route is read again."""
_ABSENT_STATUSES = frozenset({404, 405, 501})
_UNCONFIGURED = re.compile(r"files_settings|files? (api )?(is )?not (set|configured|enabled)",
                           re.IGNORECASE)
"""A 500 that says the server's files API (which a batch's input goes through) is not set up:
the litellm proxy's `files_settings is not set, set it on your config.yaml file.`"""

_probed: dict[tuple[str, str], str | None] = {}
"""Each endpoint's answer, by batches URL and key: None when it has a batch API (or could not
tell), else why not. Read once per run (forget_probes starts a run afresh)."""


def forget_probes() -> None:
    _probed.clear()


def probed_url(role: ModelRole) -> str | None:
    """The route read to tell whether the role's endpoint has a batch API; None when it is not
    probed (a provider's own hosted API, which has one; a provider not speaking OpenAI's)."""
    if not role.api_base:
        return None
    provider = provider_name(role)
    if provider not in OPENAI_STYLE or provider == "azure":
        return None  # Azure's batches live under its deployment's own paths and api-version
    url = endpoint_url(role.api_base, "/batches")
    parts = urlsplit(url)
    query = urlencode([*parse_qsl(parts.query, keep_blank_values=True), ("limit", "1")])
    return urlunsplit(parts._replace(query=query))


def missing_batch_api(role: ModelRole) -> str | None:
    """Why the role's endpoint has no batch API (one line, the server's own words where it gave
    some); None when it has one, or when that cannot be told."""
    url = probed_url(role)
    if url is None:
        return None
    key = api_key_for(role)
    memo = (url, content_key({"key": key}))
    if memo not in _probed:
        _probed[memo] = _absence(url, key)
    return _probed[memo]


def _absence(url: str, api_key: str | None) -> str | None:
    first = _answer(url, api_key)
    if first is None or first[0] != 500 or _UNCONFIGURED.search(first[1]):
        return _verdict(url, first)
    time.sleep(SECOND_ASK_AFTER_S)  # a passing 500 is not an absence: ask once more
    second = _answer(url, api_key)
    return _verdict(url, second, repeated=second is not None and second[0] == 500)


def _verdict(url: str, answer: tuple[int, str] | None, repeated: bool = False) -> str | None:
    if answer is None:
        return None
    status, said = answer
    if status in _ABSENT_STATUSES or (status == 500 and (repeated or _UNCONFIGURED.search(said))):
        route = f"GET {redact_url(url.split('?', 1)[0])}"
        again = " twice" if repeated else ""
        return redact(f"{route} answered HTTP {status}{again}" + (f": {said}" if said else ""))
    return None


def _answer(url: str, api_key: str | None) -> tuple[int, str] | None:
    """The route's HTTP error status and message; None when it answered, or could not be
    reached (the run's access check and its calls say so)."""
    try:
        with urllib.request.urlopen(get_request(url, api_key), timeout=PROBE_TIMEOUT_S):
            return None
    except urllib.error.HTTPError as answer:
        try:
            said = server_message(answer.read())
        except OSError:
            said = ""
        return answer.code, said
    except (urllib.error.URLError, OSError, ValueError):
        return None


def server_message(body: bytes) -> str:
    """The message of an error body, on one line: `{"error": {"message": ...}}` (OpenAI's),
    `{"detail": ...}` (FastAPI's), `{"error": "..."}`, else the text itself."""
    text = body.decode("utf-8", "replace").strip()
    try:
        payload = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:300]
    found: object = payload
    if isinstance(payload, dict):
        found = payload.get("error", payload.get("detail", payload.get("message", payload)))
        if isinstance(found, dict):
            found = found.get("message", found)
    return " ".join(str(found).split())[:300]
