"""The batch transport against an in-memory provider: rounds gathered into batches, split by
the provider's limits, recorded before they are created, found again by their tag."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Sequence

import pytest

from proactflow.batches.protocol import BatchLimits, BatchLine, BatchProgress, LineResult
from proactflow.batches.registry import NEVER_CREATED, BatchRecord, LocalBatchRegistry
from proactflow.batches.transport import BatchTransport, PollSchedule

FAST = PollSchedule(first_s=0.01, gather_s=0.05)


class MemoryProvider:
    name = "memory"

    def __init__(self, registry: LocalBatchRegistry, limits: BatchLimits):
        self.limits, self.registry = limits, registry
        self.created: dict[str, tuple[str, list[BatchLine]]] = {}
        self.recorded_first: list[bool] = []

    def encoded_size(self, line: BatchLine) -> int:
        return len(line.custom_id) + 10

    async def submit(self, lines: Sequence[BatchLine], tag: str) -> str:
        record = next(r for r in await self.registry.records() if r.tag == tag)
        self.recorded_first.append(record.batch_id == "" and set(record.keys) ==
                                   {line.custom_id for line in lines})
        batch_id = f"b{len(self.created) + 1}"
        self.created[batch_id] = (tag, list(lines))
        return batch_id

    async def find(self, tag: str, *, created_after: float | None = None) -> str | None:
        return next((i for i, (t, _) in self.created.items() if t == tag), None)

    async def progress(self, batch_id: str) -> BatchProgress:
        total = len(self.created[batch_id][1])
        return BatchProgress("completed", total, total, 0)

    async def results(self, batch_id: str, lines: Sequence[BatchLine] = ()
                      ) -> list[LineResult]:
        return [LineResult(line.custom_id, reply(line.custom_id), 200)
                for line in self.created[batch_id][1]]

    async def cancel(self, batch_id: str) -> None:
        pass


def reply(key: str) -> dict:
    return {"id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": f"answer to {key}"}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 3, "total_tokens": 4}}


def transport(folder: Path, limits: BatchLimits) -> tuple[BatchTransport, MemoryProvider]:
    registry = LocalBatchRegistry(folder)
    provider = MemoryProvider(registry, limits)
    return BatchTransport(provider, registry, model="openai/m", endpoint=None,
                          schedule=FAST), provider


async def ask(client: BatchTransport, key: str) -> str:
    response = await client.complete(key, model="openai/m",
                                     messages=[{"role": "user", "content": key}])
    return response.choices[0].message.content


@pytest.mark.parametrize("limits, sizes", [
    (BatchLimits(max_requests=100, max_bytes=10**6), [5]),
    (BatchLimits(max_requests=2, max_bytes=10**6), [2, 2, 1]),
    (BatchLimits(max_requests=100, max_bytes=25), [2, 2, 1]),  # 12 bytes a line
])
def test_a_round_is_one_batch_split_by_the_providers_limits(tmp_path, limits, sizes):
    client, provider = transport(tmp_path, limits)

    async def go():
        return await asyncio.gather(*(ask(client, f"k{i}") for i in range(5)))

    assert asyncio.run(go()) == [f"answer to k{i}" for i in range(5)]
    assert sorted((len(lines) for _, lines in provider.created.values()), reverse=True) == sizes
    assert all(provider.recorded_first)  # each recorded, keys and no id, before its creation
    records = asyncio.run(LocalBatchRegistry(tmp_path).records())
    assert {r.state for r in records} == {"completed"} and all(r.batch_id for r in records)


def test_a_record_without_id_is_found_by_its_tag_or_its_lines_sent_again(tmp_path):
    limits = BatchLimits(max_requests=100, max_bytes=10**6)
    client, provider = transport(tmp_path, limits)
    registry = LocalBatchRegistry(tmp_path)
    provider.created["b-old"] = ("created-then-died", [BatchLine("k1", {})])

    async def go():
        # a process died after creating this batch, before recording its id
        await registry.put(BatchRecord("created-then-died", "memory", None, "openai/m",
                                       ("k1",)))
        # and another died before creating this one
        await registry.put(BatchRecord("died-first", "memory", None, "openai/m", ("k2",)))
        return await asyncio.gather(ask(client, "k1"), ask(client, "k2"))

    assert asyncio.run(go()) == ["answer to k1", "answer to k2"]
    sent = [line.custom_id for _, lines in provider.created.values() for line in lines]
    assert sent.count("k1") == 1 and sent.count("k2") == 1  # k1 read from the old batch
    states = {r.tag: r.state for r in asyncio.run(registry.records())}
    assert states["died-first"] == NEVER_CREATED
    assert states["created-then-died"] == "completed"
    assert client.counts["read again"] == 1
