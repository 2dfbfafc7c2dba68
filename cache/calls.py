"""Per-call response cache: every successful LLM call, keyed by the exact request.

An interrupted stage resumes from here without repeating a finished call. Only successes are
stored; a failed call or a judge reply that did not validate is never written, so it is retried on
the next run. diskcache is SQLite underneath: safe for several processes sharing one store.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import diskcache


class CallCache:
    def __init__(self, directory: Path | str):
        self._cache = diskcache.Cache(str(directory), size_limit=2**40, eviction_policy="none")

    def get(self, request_key: str) -> dict[str, Any] | None:
        return self._cache.get(request_key)

    def __contains__(self, request_key: str) -> bool:
        return request_key in self._cache

    def put(self, request_key: str, record: dict[str, Any]) -> None:
        self._cache.set(request_key, record)

    def close(self) -> None:
        self._cache.close()
