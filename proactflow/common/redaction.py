"""Keeping secrets out of everything written or shown: logs, messages, records, artifacts.

A secret is the value of an environment variable whose name looks like a credential (KEY, TOKEN,
SECRET, PASSWORD), the value of any variable a role names as its key variable (`api_key_env`,
whatever its name), and the userinfo or query string of an endpoint URL.
"""

from __future__ import annotations

import json
import os
import re
from typing import Iterable
from urllib.parse import SplitResult, urlsplit, urlunsplit

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIAL)", re.IGNORECASE)
_named_secrets: set[str] = set()
_URL_USERINFO = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)[^/\s@]+@", re.IGNORECASE)
FULL_URLS_ENV = "PROACTFLOW_FULL_URLS"
"""A JSON list of endpoint URLs that hold credentials, for a process that gets its settings
redacted (a sweep's child processes, the runs of `serve`): the full URL each redacted one
stands for."""
_URL_QUERY_VALUE = re.compile(r"(?P<lead>[a-z][a-z0-9+.-]*://[^\s?#]*\?)(?P<query>[^\s#]*)",
                              re.IGNORECASE)


def register_secret_variable(name: str | None) -> None:
    """Treat the value of environment variable `name` as a secret from now on, whatever its
    name: a role's `api_key_env` may be called anything."""
    if name:
        _named_secrets.add(name)


def secret_values() -> list[str]:
    """Values of environment variables that hold credentials, longest first (so a secret that
    contains another is replaced whole)."""
    values = {value for name, value in os.environ.items()
              if _SECRET_NAME.search(name) and len(value) >= 8}
    values |= {os.environ[name] for name in _named_secrets
               if len(os.environ.get(name, "")) >= 4}
    return sorted(values, key=len, reverse=True)


def _mask_query(query: str) -> str:
    return "&".join(part.split("=", 1)[0] + "=***" if "=" in part else "***"
                    for part in query.split("&") if part)


def redact(text: str) -> str:
    """Remove every credential value, URL userinfo and URL query value from a message before it
    is logged or stored."""
    for value in secret_values():
        text = text.replace(value, "***")
    text = _URL_USERINFO.sub(r"\g<scheme>***@", text)
    return _URL_QUERY_VALUE.sub(lambda m: m["lead"] + _mask_query(m["query"]), text)


def redact_url(url: str) -> str:
    """An endpoint URL without its secrets: userinfo becomes *** and query values ***."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "***@" + netloc.rsplit("@", 1)[1]
    return urlunsplit(SplitResult(parts.scheme, netloc, parts.path,
                                  _mask_query(parts.query), parts.fragment))


def url_has_secrets(url: str) -> bool:
    parts = urlsplit(url)
    return "@" in parts.netloc or bool(parts.query)


def full_urls(urls: Iterable[str | None], refused: str) -> str:
    """The value of $PROACTFLOW_FULL_URLS for processes that call `urls`; a one-line ValueError
    ending with `refused` when two of them differ only in what redaction hides (a process
    could not tell which)."""
    secret = sorted({url for url in urls if url and url_has_secrets(url)})
    shown: dict[str, str] = {}
    for url in secret:
        if (other := shown.setdefault(redact_url(url), url)) != url:
            raise ValueError(f"endpoints {redact_url(url)} differ only in their credentials: "
                             + refused)
    return json.dumps(secret)


def unredacted(url: str) -> str:
    """`url`, or when it arrived redacted (from Prefect's parameters), the full URL it stands
    for in $PROACTFLOW_FULL_URLS; a ValueError when that is not known here, so that a masked
    URL is never called (under the keys of the real one)."""
    if not url_has_secrets(url) or redact_url(url) != url or "***" not in url:
        return url
    known = [full for full in json.loads(os.environ.get(FULL_URLS_ENV) or "[]")
             if redact_url(full) == url]
    if len(known) != 1:
        raise ValueError(f"the endpoint {url} arrived redacted and {FULL_URLS_ENV} holds no "
                         "full URL for it here: a masked URL is never called")
    return str(known[0])
