"""The call layer on its own: retry policy, per-call cache, leases and shared rate limits."""

from __future__ import annotations

import asyncio
import time

import pytest

from fake_openai import FakeOpenAI, Reply
from proactflow.cache.calls import CallCache
from proactflow.common.errors import EndpointDown, ProviderRejected
from proactflow.config.settings import Generation, ModelRole, RuntimeOptions
from proactflow.limits.ratelimit import SharedPacer
from proactflow.providers.llm import ChatClient, ChatRequest

FAST = RuntimeOptions(retry_base_delay_s=0.01, max_attempts=4, max_consecutive_failures=50)


def client(fake: FakeOpenAI, model: str, tmp_path, runtime: RuntimeOptions = FAST) -> ChatClient:
    role = ModelRole(model=f"openai/{model}", api_base=fake.url,
                     generation=Generation(temperature=0.0, max_tokens=16, top_p=None))
    return ChatClient(role, CallCache(tmp_path / "calls"), runtime)


def request(c: ChatClient, text: str = "hello") -> ChatRequest:
    return ChatRequest.build(c.role, [("user", text)])


def scripted(*replies: Reply):
    queue = list(replies)
    return lambda _: queue.pop(0) if len(queue) > 1 else queue[0]


def test_retries_429_and_5xx_then_caches_the_success(tmp_path):
    script = scripted(Reply(status=429, content="slow"), Reply(status=500, content="oops"),
                      Reply(content="fine"))
    with FakeOpenAI({"m": script}) as fake:
        c = client(fake, "m", tmp_path)
        outcome = asyncio.run(c.call(request(c)))
        assert (outcome.content, outcome.attempts, fake.calls["m"]) == ("fine", 3, 3)
        again = asyncio.run(c.call(request(c)))
        assert again.from_cache and again.content == "fine" and fake.calls["m"] == 3


def test_retry_after_is_honoured(tmp_path):
    with FakeOpenAI({"m": scripted(Reply(status=429, headers={"Retry-After": "1"}),
                                   Reply(content="ok"))}) as fake:
        c = client(fake, "m", tmp_path)
        started = time.monotonic()
        assert asyncio.run(c.call(request(c))).content == "ok"
        assert time.monotonic() - started >= 1.0
        gap = fake.call_times[1] - fake.call_times[0]
        assert gap >= 1.0


def test_a_refused_request_is_kept_and_not_asked_again_unless_refreshed(tmp_path):
    with FakeOpenAI({"m": lambda _: Reply(status=400, content="context too long")}) as fake:
        c = client(fake, "m", tmp_path)
        outcome = asyncio.run(c.call(request(c)))
        assert outcome.status == "refused" and fake.calls["m"] == 1  # not retried
        assert "HTTP 400" in outcome.error and "context too long" in outcome.error
        assert c.cache.get(request(c).key)["status"] == "refused"
        again = asyncio.run(c.call(request(c)))
        assert again.status == "refused" and again.from_cache and fake.calls["m"] == 1
        refreshing = client(fake, "m", tmp_path)
        refreshing.refresh = True
        asyncio.run(refreshing.call(request(refreshing)))
        assert fake.calls["m"] == 2


def test_exhausted_retries_give_an_error_outcome(tmp_path):
    with FakeOpenAI({"m": lambda _: Reply(status=503, content="busy")}) as fake:
        c = client(fake, "m", tmp_path)
        outcome = asyncio.run(c.call(request(c)))
        assert not outcome.ok and outcome.attempts == 4 and fake.calls["m"] == 4


def test_unauthorised_raises_for_the_whole_run(tmp_path):
    with FakeOpenAI({"m": lambda _: Reply(status=401, content="no")}) as fake:
        c = client(fake, "m", tmp_path)
        with pytest.raises(ProviderRejected, match="rejected the credentials"):
            asyncio.run(c.call(request(c)))
        assert fake.calls["m"] == 1


def test_breaker_trips_when_nothing_succeeds(tmp_path):
    runtime = RuntimeOptions(retry_base_delay_s=0.001, max_attempts=3, max_consecutive_failures=5,
                             down_after_s=0.001)
    with FakeOpenAI({"m": lambda _: Reply(status=502)}) as fake:
        c = client(fake, "m", tmp_path, runtime)

        async def many():
            for i in range(10):
                await c.call(request(c, f"q{i}"))

        with pytest.raises(EndpointDown, match="5 failed attempts in a row"):
            asyncio.run(many())
        assert fake.calls["m"] == 5


def test_a_claimed_request_waits_for_its_holder_instead_of_calling(tmp_path):
    with FakeOpenAI({"m": lambda _: Reply(content="shared", delay=0.3)}) as fake:
        first = client(fake, "m", tmp_path)
        second = client(fake, "m", tmp_path)  # another client on the same store

        async def both():
            return await asyncio.gather(first.call(request(first)), second.call(request(second)))

        a, b = asyncio.run(both())
        assert a.content == b.content == "shared"
        assert fake.calls["m"] == 1
        assert [a.from_cache, b.from_cache].count(True) == 1


def test_lease_of_a_dead_process_is_taken_over(tmp_path):
    cache = CallCache(tmp_path / "calls")
    cache._leases.set("k", (__import__("socket").gethostname(), 2**22 + 12345))
    assert cache.claim("k", ttl=60)
    other = CallCache(tmp_path / "calls")
    assert not other.claim("k", ttl=60)  # held by a live process (this one): in flight
    cache.release("k")
    assert cache.claim("k", ttl=60)


def test_pacers_on_one_store_share_the_budget(tmp_path, monkeypatch):
    sleeps: list[float] = []

    async def no_sleep(seconds):
        sleeps.append(seconds)

    monkeypatch.setattr(asyncio, "sleep", no_sleep)
    a = SharedPacer(tmp_path, "rpm|m", per_minute=600)   # one slot every 0.1 s
    b = SharedPacer(tmp_path, "rpm|m", per_minute=600)   # a second run, same model and store

    async def book():
        return [await (a if i % 2 else b).acquire() for i in range(10)]

    starts = asyncio.run(book())
    gaps = [later - earlier for earlier, later in zip(starts, starts[1:])]
    assert all(gap == pytest.approx(0.1, abs=1e-6) or gap > 0.1 for gap in gaps)
    assert starts[-1] - starts[0] >= 0.9 - 1e-6
    other_model = SharedPacer(tmp_path, "rpm|other", per_minute=600)
    assert asyncio.run(other_model.acquire()) < starts[-1]


def test_a_call_slower_than_the_timeout_is_an_error_and_not_retried(tmp_path):
    # The provider may finish (and bill) a call the client gave up on: asking again pays twice.
    runtime = RuntimeOptions(timeout_s=0.3, retry_base_delay_s=0.01, max_attempts=2)
    with FakeOpenAI({"m": lambda _: Reply(content="late", delay=1.0)}) as fake:
        c = client(fake, "m", tmp_path, runtime)
        outcome = asyncio.run(c.call(request(c)))
        assert not outcome.ok and outcome.attempts == 1 and fake.calls["m"] == 1
        assert "Timeout" in outcome.error and "not retried" in outcome.error


def test_one_loop_renews_every_held_lease_and_stops_when_none_is_held(tmp_path):
    from proactflow.cache.calls import LocalCallStore
    from proactflow.limits.leases import HeldLeases

    cache = CallCache(tmp_path / "calls")
    leases = HeldLeases(LocalCallStore(cache), ttl=0.3)

    async def hold_two_then_one():
        for key in ("a", "b"):
            assert cache.claim(key, 0.3)
            leases.hold(key)
        await asyncio.sleep(0.5)  # past the first ttl: renewed
        assert cache._leases.get("a") is not None and cache._leases.get("b") is not None
        await leases.let_go("a")
        assert cache._leases.get("a") is None
        await asyncio.sleep(0.5)
        assert cache._leases.get("b") is not None  # still renewed
        renewing = leases._renewing
        await leases.let_go("b")
        await asyncio.sleep(0)
        assert renewing is not None and renewing.cancelled() and leases._renewing is None

    asyncio.run(hold_two_then_one())
