"""Stable content keys: sha256 of canonical JSON.

A key over a list that grows a little at a time (a video episode's chat, re-sent at every step)
need not encode and hash the whole list again: a list given as HashedItems carries a sha256
already fed the JSON up to its closing bracket, and content_key finishes that copy with the
rest of the JSON. The bytes hashed are the same, so the key is the same.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any


_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False)
"""json.dumps with these options, made once (dumps makes an encoder per call)."""


def canonical_json(value: Any) -> str:
    """JSON with sorted keys, no whitespace and raw UTF-8: equal values give equal text."""
    return _CANONICAL.encode(value)


class HashedItems(list[Any]):
    """A list, with (when `head` is set) a sha256 fed `head` and then its items' canonical
    JSON, comma-separated: canonical_json of a dict holding the list is that dict's JSON up to
    the list's items (around_list) followed by them, when its head is `head`. The hasher is
    copied, never fed; a dict whose head is another is hashed whole."""

    __slots__ = ("head", "hashed")

    def __init__(self, items: Any = (), head: str | None = None, hashed: Any = None):
        super().__init__(items)
        if (head is None) != (hashed is None):
            raise ValueError("HashedItems: a head and its hasher go together")
        self.head, self.hashed = head, hashed

    def _changed(self) -> None:
        """A change to the items makes the hasher stale: hashed whole from now on."""
        self.head = self.hashed = None

    def __reduce__(self) -> tuple[Any, ...]:
        # A hasher does not pickle or deep-copy: a copy is a plain list, hashed whole.
        return (list, (list(self),))


def _forgetting(name: str) -> Any:
    change = getattr(list, name)

    def changed(self: HashedItems, *args: Any) -> Any:
        self._changed()
        return change(self, *args)

    changed.__name__ = name
    return changed


for _name in ("append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse",
              "__setitem__", "__delitem__", "__iadd__", "__imul__"):
    setattr(HashedItems, _name, _forgetting(_name))


def content_key(value: Any) -> str:
    if isinstance(value, dict):
        for name, items in value.items():
            if isinstance(items, HashedItems) and items.head is not None:
                around = around_list({k: v for k, v in value.items() if k != name}, name)
                if around is not None and around[0] == items.head:
                    hasher = items.hashed.copy()
                    hasher.update(around[1].encode("utf-8"))
                    return str(hasher.hexdigest())
                break
    return hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def text_sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_ITEMS_GO_HERE = "\ue000items of around_list\ue000"  # private-use characters: in no real value


_AROUND: dict[str, tuple[str, str] | None] = {}
"""around_list's answers by the repr of its arguments (every step of an episode asks twice)."""
_UNSEEN = object()


def around_list(value: dict[str, Any], name: str) -> tuple[str, str] | None:
    """canonical_json of `value` with a list at key `name`, split where that list's items go:
    head + ",".join(canonical_json(item) for item in items) + tail is canonical_json of
    `value` holding those items at `name`. None for a value holding this function's marker."""
    # Values whose reprs are equal have the same JSON (repr tells 1, 1.0 and True apart and
    # writes a float as JSON does); equal values with other reprs are only computed again.
    memo = repr((value, name))
    found_before = _AROUND.get(memo, _UNSEEN)
    if found_before is not _UNSEEN:
        return found_before  # type: ignore[return-value]
    marker = canonical_json(_ITEMS_GO_HERE)
    head, found, tail = canonical_json({**value, name: [_ITEMS_GO_HERE]}).partition(marker)
    if len(_AROUND) >= 1024:
        _AROUND.clear()
    around = _AROUND[memo] = (head, tail) if found and marker not in tail else None
    return around
