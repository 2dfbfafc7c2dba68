"""A growing chat's per-call cache key, hashed a part at a time (cache.keys.HashedItems, the
hasher copies of providers.growing), is content_key of the whole material: for any order of
appended and replaced messages, with or without the prompt cache hint that says where the next
request may first differ, and for a request whose fields change after it was built."""

from __future__ import annotations

import dataclasses
import random

import pytest

from proactflow.cache.keys import HashedItems, around_list, canonical_json, content_key
from proactflow.config.settings import Generation, ModelRole
from proactflow.providers.chat import ChatRequest
from proactflow.providers.content import ImagePart, key_content
from proactflow.providers.growing import GrowingMessages
from proactflow.providers.prompt_cache import CacheHint

VALUES = [{}, {"a": None}, {"api_base": "http://h/v1", "z": [1, 2.5, "é"]},
          {"b": {"messages": [], "x": "\"messages\":[]"}, "c": True, "params": {"t": 0.0}}]


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("items", [[], [["user", "hi"]], [["a", 1], {"k": "ü"}, None, [[]]]])
def test_the_json_around_a_list_holds_its_items_canonically(value, items):
    around = around_list(value, "messages")
    assert around is not None
    head, tail = around
    whole = canonical_json({**value, "messages": items})
    assert head + ",".join(canonical_json(item) for item in items) + tail == whole


def test_a_value_holding_the_marker_is_hashed_whole():
    from proactflow.cache.keys import _ITEMS_GO_HERE

    value = {"a": _ITEMS_GO_HERE}
    assert around_list(value, "messages") is None
    import hashlib

    items = HashedItems([["user", "hi"]], head="{", hashed=hashlib.sha256())  # not used
    assert content_key({**value, "messages": items}) == \
        content_key({**value, "messages": [["user", "hi"]]})


def _image(n: int) -> ImagePart:
    return ImagePart(None, "image/jpeg", f"{n:064x}", None, (8, 8))


def _content(rng: random.Random, n: int):
    roll = rng.random()
    if roll < 0.4:
        return f"text {n} ü \"quoted\""
    images = tuple(_image(rng.randrange(50)) for _ in range(rng.randrange(1, 3)))
    return (*images, f"caption {n}") if roll < 0.7 else images


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("hinted", [False, True])
def test_a_grown_key_is_the_key_of_the_whole_material(seed, hinted, monkeypatch):
    monkeypatch.setattr(ImagePart, "estimated_tokens", lambda self, model: 85)
    rng = random.Random(seed)
    role = ModelRole(model="openai/watcher", api_base="http://127.0.0.1:9/v1",
                     revision="r1" if seed % 2 else None,
                     generation=Generation(temperature=0.0, max_tokens=64, top_p=None))
    chat = GrowingMessages()
    chat.append("system", "SYSTEM")
    built: list[tuple[ChatRequest, list]] = []
    for step in range(60):
        chat.append("user", _content(rng, step))
        # A change at a random earlier user turn (as a window's frames leave), sometimes below
        # every hasher kept.
        if step > 3 and rng.random() < 0.6:
            index = 1 + 2 * rng.randrange(0, step)
            chat.replace(index, "user", _content(rng, 1000 + step))
        shared = rng.randrange(1, len(chat) + 1) if hinted else None
        request = ChatRequest.build(role, chat.messages, grown=chat, sample_index=2,
                                    cache=CacheHint("g", shared=shared, chain=True))
        built.append((request, [[r, key_content(c)] for r, c in chat.messages]))
        chat.append("assistant", rng.choice(["NO REPLY", f"said {step}"]))
    for request, material in built:  # keys taken after the chat grew on: each its own
        scratch = ChatRequest.build(role, [tuple(m) for m in request.messages],
                                    sample_index=2)
        assert request.key == scratch.key
        whole = {"model": request.model, "api_base": request.api_base,
                 "params": dict(request.params), "sample_index": 2, "messages": material,
                 **dict(request.identity)}
        assert request.key == content_key(whole)
        # Other fields after it was built (a retry's parameters, another endpoint).
        hotter = dataclasses.replace(request, params=(("temperature", 1.0),))
        assert hotter.key == dataclasses.replace(scratch, params=(("temperature", 1.0),)).key
        moved = dataclasses.replace(request, api_base="http://elsewhere/v1")
        assert moved.key == dataclasses.replace(scratch, api_base="http://elsewhere/v1").key


def test_hashed_items_changed_after_hashing_are_hashed_whole_and_copy_as_lists():
    import copy
    import hashlib
    import pickle

    material = {"model": "m", "messages": []}
    head, _ = around_list({"model": "m"}, "messages")
    items = ["a", {"b": 1}]
    hasher = hashlib.sha256(head.encode("utf-8"))
    hasher.update(",".join(canonical_json(item) for item in items).encode("utf-8"))
    for change in (lambda x: x.append("c"), lambda x: x.__setitem__(0, "z"),
                   lambda x: x.pop(), lambda x: x.extend(["d"]), lambda x: x.reverse()):
        grown = HashedItems(items, head, hasher)
        assert content_key(dict(material, messages=grown)) == \
            content_key(dict(material, messages=list(items)))
        change(grown)
        assert content_key(dict(material, messages=grown)) == \
            content_key(dict(material, messages=list(grown)))
    grown = HashedItems(items, head, hasher)
    for copied in (copy.deepcopy(grown), pickle.loads(pickle.dumps(grown))):
        assert copied == items and content_key(dict(material, messages=copied)) == \
            content_key(dict(material, messages=grown))
    with pytest.raises(ValueError):
        HashedItems(items, head, None)
