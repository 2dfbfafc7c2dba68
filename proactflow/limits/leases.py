"""The leases a client holds on the calls it is making, renewed by one loop for all of them.

A lease lives `ttl` seconds unless renewed; a call can hold one for minutes (retries, judge
replies asked again, pacer waits). A renewal task per call cost a task created and cancelled on
every call; one loop per client renews every key it holds each `ttl / 3` (a new key within `ttl / 3`
of being taken) and exists only while some key is held.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..cache.calls import CallStore


class HeldLeases:
    def __init__(self, calls: CallStore, ttl: float):
        self._calls = calls
        self._ttl = ttl
        self._held: set[str] = set()
        self._renewing: asyncio.Task[None] | None = None

    def hold(self, key: str) -> None:
        """Renew the lease on `key` (just claimed) until `let_go`."""
        self._held.add(key)
        loop = asyncio.get_running_loop()
        # A loop torn down mid-call (its tasks never finished) leaves a task that will never
        # run again: this loop gets its own.
        if self._renewing is None or self._renewing.done() or self._renewing.get_loop() is not loop:
            self._renewing = loop.create_task(self._renew())

    async def let_go(self, key: str, *, released: bool = False) -> None:
        """Stop renewing and release the lease on `key` (unless the store has `released` it
        already, with the call's result)."""
        self._held.discard(key)
        if not self._held and self._renewing is not None:
            self._renewing.cancel()
            self._renewing = None
        if not released:
            await self._calls.release(key)

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self._ttl / 3)
            for key in list(self._held):
                if key not in self._held:  # let go during this round: renewing takes it again
                    continue
                try:
                    await self._calls.renew(key, self._ttl)
                except Exception:  # a store that failed once may answer at the next round;
                    continue       # the other leases must not lose their renewal meanwhile
