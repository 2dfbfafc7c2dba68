"""The completion a batched role's calls go through: each call hands its line to a collector and
awaits its line's result, and the collector sends what has gathered as one batch when the flow
of new calls pauses (or a batch is full). One round of a stage's calls is then one batch: every
episode's next step, every judge call of the responses that came back.

Before a line is sent, the store's registry is asked whether a batch already holds its request
(registry.py): a live batch is awaited, an ended one read; only a request in no batch, or one its
batch never ran, is sent (again: counted in `counts["resent"]`). A result comes back as litellm
returns an interactive reply, so the call ends as the same cache record; a line that failed
raises as the interactive call's failure would (LineFailed carries its HTTP status).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections import Counter
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

import litellm
from litellm.litellm_core_utils.llm_response_utils.convert_dict_to_response import \
    convert_to_model_response_object

from .openai_batches import PROVIDERS as OPENAI_STYLE
from .protocol import ENDED, BatchLine, BatchProvider, LineResult, NotCreated
from .registry import NEVER_CREATED, BatchRecord, BatchRegistry

log = logging.getLogger("proactflow")

_CALL_ONLY = frozenset({"model", "messages", "timeout", "max_retries", "api_base", "api_key",
                        "extra_headers"})
"""What the client passes to a completion that is not part of a batch line's body."""


CLOCK_SKEW_S = 600.0
"""How far the clock of the host that recorded a batch may be from the provider's."""

LIVE: set[str] = set()
"""Ids of the batches this process created or waits for that have not ended: what a Ctrl-C
leaves running at the provider."""


class LineFailed(Exception):
    """A batch line the provider answered with an error: classified as the same HTTP failure of
    an interactive call (a 400 is the request's refusal, a 5xx is asked again, ...)."""

    def __init__(self, status_code: int, message: str):
        super().__init__(message)
        self.status_code = status_code


@dataclass(frozen=True)
class PollSchedule:
    first_s: float = 30.0
    """The first wait between two looks at a batch's state."""
    factor: float = 1.5
    most_s: float = 600.0
    gather_s: float = 2.0
    """A pause this long in new calls sends what has gathered."""
    gather_most_s: float = 60.0
    """What has gathered is sent after this long at most, even while calls keep coming."""


class BatchTransport:
    """One role's batches at one provider endpoint. `complete(key, **litellm_kwargs)` stands for
    `litellm.acompletion` in the role's ChatClient."""

    def __init__(self, provider: BatchProvider, registry: BatchRegistry, *, model: str,
                 endpoint: str | None, schedule: PollSchedule = PollSchedule(),
                 on_progress: Callable[[BatchRecord], Awaitable[None]] | None = None,
                 api_base: str | None = None, api_key_env: str | None = None,
                 refresh: bool = False):
        self.provider, self.registry = provider, registry
        self.refresh = refresh
        """--refresh: a result of a batch that ended before this run is not reused (a batch
        still running is waited for: its answers are new)."""
        self.api_base, self.api_key_env = api_base, api_key_env
        self.model, self.endpoint, self.schedule = model, endpoint, schedule
        self.on_progress = on_progress
        self.counts: Counter[str] = Counter()
        """lines sent, batches created, lines resent (their batch never ran them), lines read
        from batches found in the store."""
        self._pending: dict[str, tuple[BatchLine, asyncio.Future[LineResult | None]]] = {}
        self._pending_bytes = 0
        self._first_pending = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._followed: dict[str, asyncio.Task[dict[str, LineResult]]] = {}
        self._running: set[asyncio.Task[None]] = set()
        self._consumed: set[str] = set()
        """Keys whose stored batch result this process has used once: asked again, they go in
        a new batch (a reply the client found unusable)."""
        self._own: set[str] = set()
        """Tags of the batches this transport created."""
        self._resending: set[str] = set()
        """Keys whose earlier batch ended without running them: counted in the next one."""
        self._awaited_lines: dict[str, BatchLine] = {}
        """Lines whose request a batch found in the registry holds: handed to the provider
        when that batch's results are read, as a batch of this transport's own would be."""

    async def complete(self, key: str, **kwargs: Any) -> Any:
        line = BatchLine(key, self.body(kwargs))
        result = await self._result_for(line)
        if result.response is None:
            raise LineFailed(result.status_code or 500, result.error or "the batch line failed")
        return convert_to_model_response_object(response_object=result.response,
                                                model_response_object=litellm.ModelResponse())

    @staticmethod
    def body(kwargs: dict[str, Any]) -> dict[str, Any]:
        """The request as the provider's chat completions endpoint takes it, with the
        parameters litellm would send for this model (e.g. max_completion_tokens)."""
        model, provider, _, _ = litellm.get_llm_provider(kwargs["model"],
                                                         api_base=kwargs.get("api_base"))
        params = {name: value for name, value in kwargs.items() if name not in _CALL_ONLY}
        if provider not in OPENAI_STYLE:  # the protocol's body is OpenAI's request: the
            return {"model": model, "messages": kwargs["messages"], **params}  # adapter maps it
        try:
            mapped = litellm.get_optional_params(model=model, custom_llm_provider=provider,
                                                 **params)
        except Exception:  # a parameter litellm does not map: sent as given
            mapped = dict(params)
        mapped.pop("stream", None)
        extra = mapped.pop("extra_body", None) or {}
        return {"model": model, "messages": kwargs["messages"], **mapped, **extra}

    async def _result_for(self, line: BatchLine) -> LineResult:
        key = line.custom_id
        if key not in self._consumed:
            record = await self.registry.holding(key)
            if record is not None and not (self.refresh and not record.live):
                self._awaited_lines[key] = line
                results = await self._follow(record)
                self._awaited_lines.pop(key, None)
                self._consumed.add(key)
                if key in results:
                    self.counts["read again"] += record.tag not in self._own
                    return results[key]
                if await self._created(record.tag):
                    self._resending.add(key)
        while True:
            result = await self._collect(line)
            self._consumed.add(key)
            if result is not None:
                return result
            self._resending.add(key)  # its batch expired or was cancelled before running it

    # Gathering lines into batches.

    async def _collect(self, line: BatchLine) -> LineResult | None:
        held = self._pending.get(line.custom_id)
        if held is not None:  # asked twice at once: one line
            return await asyncio.shield(held[1])
        loop = asyncio.get_running_loop()
        future: asyncio.Future[LineResult | None] = loop.create_future()
        if not self._pending:
            self._first_pending = loop.time()
        self._pending[line.custom_id] = (line, future)
        self._pending_bytes += self.provider.encoded_size(line)
        limits = self.provider.limits
        if self._timer is not None:
            self._timer.cancel()
        if len(self._pending) >= limits.max_requests or self._pending_bytes >= limits.max_bytes:
            self._flush()
        else:
            wait = min(self.schedule.gather_s,
                       self._first_pending + self.schedule.gather_most_s - loop.time())
            self._timer = loop.call_later(max(0.0, wait), self._flush)
        return await asyncio.shield(future)

    def _flush(self) -> None:
        self._timer = None
        pending, self._pending, self._pending_bytes = list(self._pending.values()), {}, 0
        for chunk in self._split(pending):
            task = asyncio.ensure_future(self._run(chunk))
            self._running.add(task)
            task.add_done_callback(self._running.discard)

    def _split(self, pending: list[tuple[BatchLine, asyncio.Future[LineResult | None]]]
               ) -> list[list[tuple[BatchLine, asyncio.Future[LineResult | None]]]]:
        limits = self.provider.limits
        chunks: list[list[tuple[BatchLine, asyncio.Future[LineResult | None]]]] = [[]]
        size = 0
        for item in pending:
            grows = self.provider.encoded_size(item[0])
            if chunks[-1] and (len(chunks[-1]) >= limits.max_requests
                               or size + grows > limits.max_bytes):
                chunks.append([])
                size = 0
            chunks[-1].append(item)
            size += grows
        return [chunk for chunk in chunks if chunk]

    async def _run(self, chunk: list[tuple[BatchLine, asyncio.Future[LineResult | None]]]
                   ) -> None:
        try:
            results = await self._submit([line for line, _ in chunk])
        except BaseException as exc:
            for _, future in chunk:
                if not future.done():
                    future.set_exception(exc) if not isinstance(exc, asyncio.CancelledError) \
                        else future.cancel()
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        for line, future in chunk:
            if not future.done():
                future.set_result(results.get(line.custom_id))

    async def _submit(self, lines: list[BatchLine]) -> dict[str, LineResult]:
        tag = uuid.uuid4().hex
        resent = sum(line.custom_id in self._resending for line in lines)
        self._resending.difference_update(line.custom_id for line in lines)
        record = BatchRecord(tag, self.provider.name, self.endpoint, self.model,
                             tuple(line.custom_id for line in lines), api_base=self.api_base,
                             api_key_env=self.api_key_env, resent=resent)
        # Recorded before the batch exists: a crash from here on leaves it to be found.
        await self.registry.put(record)
        self._own.add(tag)
        batch_id: str | None
        try:
            batch_id = await self.provider.submit(lines, tag)
        except NotCreated as exc:
            await self.registry.put(record.with_(state=NEVER_CREATED, ended=time.time()))
            raise exc.__cause__ or exc
        except Exception as exc:
            # Created or not? The provider says; an unanswered question leaves the record
            # without an id, for whoever needs these requests next to ask again.
            batch_id = await self._found_after(record, exc)
            if batch_id is None:
                await self.registry.put(record.with_(state=NEVER_CREATED, ended=time.time()))
                raise
        assert batch_id is not None
        self.counts["lines sent"] += len(lines)
        self.counts["batches"] += 1
        self.counts["resent"] += resent
        if resent:
            log.info("batch %s (%s): %d of its %d lines sent again, their earlier batch having "
                     "ended without running them", batch_id, self.model, resent, len(lines))
        record = record.with_(batch_id=batch_id, state="validating", submitted=time.time())
        await self.registry.put(record)
        await self._progressed(record)
        return await self._follow(record)

    async def _found_after(self, record: BatchRecord, failure: Exception) -> str | None:
        """The batch `record` stands for, after its creation failed with `failure`; None when
        the provider says there is none. A provider that cannot say leaves the record without
        an id (for the next run, or `batches cancel`, to settle) and `failure` is raised: it is
        what went wrong, not the question after it."""
        try:
            return await self.provider.find(record.tag,
                                             created_after=record.created - CLOCK_SKEW_S)
        except Exception as exc:
            log.warning("batch of %d lines (%s, tag %s): whether it was created is unknown (%s)",
                        record.total, self.model, record.tag[:12],
                        str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__)
        raise failure  # outside the handler: its own cause stays the one it was raised with

    async def _progressed(self, record: BatchRecord) -> None:
        if self.on_progress is not None:
            await self.on_progress(record)

    # Following a batch to its end.

    async def _created(self, tag: str) -> bool:
        found = next((record for record in await self.registry.records() if record.tag == tag),
                     None)
        return found is not None and found.state != NEVER_CREATED

    def _follow(self, record: BatchRecord) -> "asyncio.Future[dict[str, LineResult]]":
        task = self._followed.get(record.tag)
        if task is None:
            task = self._followed[record.tag] = asyncio.ensure_future(self._until_ended(record))
        return asyncio.shield(task)

    async def _until_ended(self, record: BatchRecord) -> dict[str, LineResult]:
        if not record.batch_id:
            found: str | None = await self.provider.find(
                record.tag, created_after=record.created - CLOCK_SKEW_S)
            if found is None:  # its process died before creating it
                await self.registry.put(record.with_(state=NEVER_CREATED, ended=time.time()))
                return {}
            record = record.with_(batch_id=found, state="validating",
                                  submitted=record.submitted or time.time())
            await self.registry.put(record)
        delay = self.schedule.first_s
        failures = 0
        if record.state not in ENDED:
            LIVE.add(record.batch_id)
        while record.state not in ENDED:
            try:
                progress = await self.provider.progress(record.batch_id)
            except Exception as exc:  # the provider unreachable for a while: look again later
                failures += 1
                if failures >= 10:
                    raise
                log.warning("batch %s: its state could not be read (%s); trying again",
                            record.batch_id, str(exc).splitlines()[0][:200])
            else:
                failures = 0
                now = record.with_(state=progress.status, done=progress.done,
                                   failed=progress.failed,
                                   ended=time.time() if progress.ended else None)
                if now != record:
                    record = now
                    await self.registry.put(record)
                    await self._progressed(record)
                if progress.ended:
                    LIVE.discard(record.batch_id)
                    break
            await asyncio.sleep(delay)
            delay = min(delay * self.schedule.factor, self.schedule.most_s)
        lines = [self._awaited_lines[key] for key in record.keys if key in self._awaited_lines]
        return {result.custom_id: result for result in await self.provider.results(
            record.batch_id, lines)}
