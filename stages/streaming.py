"""A hand-over of rows from one stage to the next while the first is still running.

The responses stage puts each row as soon as its call returns; the judgments stage takes rows as
they come, so judging starts with the first response instead of after the last. Each stage still
writes its own artifact.
"""

from __future__ import annotations

import asyncio
from typing import Any

_END = object()


class StageAborted(Exception):
    """The producing stage failed: the consumer must stop without writing an artifact."""


class RowStream:
    def __init__(self) -> None:
        self._queue: asyncio.Queue[Any] = asyncio.Queue()
        self._aborted = False
        self.complete = True
        """Whether the producer finished without error rows (known once closed)."""

    def put(self, row: dict[str, Any]) -> None:
        self._queue.put_nowait(row)

    def close(self, complete: bool) -> None:
        self.complete = complete
        self._queue.put_nowait(_END)

    def abort(self) -> None:
        self._aborted = True
        self._queue.put_nowait(_END)

    @classmethod
    def of(cls, rows: list[dict[str, Any]], complete: bool = True) -> "RowStream":
        stream = cls()
        for row in rows:
            stream.put(row)
        stream.close(complete)
        return stream

    async def get(self) -> dict[str, Any] | None:
        """The next row; None once the producer is done (for every waiting consumer)."""
        item = await self._queue.get()
        if item is _END:
            self._queue.put_nowait(_END)  # wake the next consumer too
            if self._aborted:
                raise StageAborted("the stage producing the rows failed")
            return None
        return item
