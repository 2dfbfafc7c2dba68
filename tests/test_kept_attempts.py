"""Every reply paid for is kept (issue #36): a reply that could not be used is stored as an
attempt of its request, with its text, tokens and cost, and whether to ask again is a decision
about the stored attempts. A later run reads them instead of paying again; two runs at once
(two processes, on the store's own diskcache and on PostgreSQL) pay each attempt once."""

from __future__ import annotations

import asyncio
import json

from call_worker import store_for
from fake_openai import FakeOpenAI, Reply
from proactflow.config.settings import Generation, ModelRole, RuntimeOptions
from proactflow.providers.attempts import attempt_key
from proactflow.providers.llm import ChatClient, ChatRequest
from test_shared_calls import backend, expect, start, stop_all  # noqa: F401 (a fixture)

NOT_A_VERDICT = "the answer looks fine to me"


def unreadable(reply: str) -> str:
    raise ValueError(f"not a verdict: {reply[:20]}")


def role_at(url: str) -> ModelRole:
    return ModelRole(model="openai/m", api_base=url,
                     generation=Generation(temperature=0.0, max_tokens=16, top_p=None))


def judge_once(backend: str, url: str, text: str, tries: int, *, refresh: bool = False):
    async def go():
        store = store_for(backend)
        try:
            client = ChatClient(role_at(url), store, RuntimeOptions(
                retry_base_delay_s=0.01, judge_parse_attempts=tries), refresh=refresh)
            request = ChatRequest.build(role_at(url), [("user", text)])
            outcome = await client.call(request, unreadable)
            kept = await store.get_many([attempt_key(request.key, n) for n in range(tries)])
            return request, outcome, client.stats, kept
        finally:
            await store.close()

    return asyncio.run(go())


def test_unreadable_replies_are_kept_as_attempts_and_read_again(backend):
    with FakeOpenAI({"m": lambda _: Reply(content=NOT_A_VERDICT)}) as fake:
        request, outcome, stats, kept = judge_once(backend, fake.url, "judge this", 3)
        assert fake.calls["m"] == 3
        assert outcome.status == "error" and outcome.error.startswith("invalid judge reply")
        assert stats.invalid_replies == 3
        # Each attempt row keeps the reply's text, tokens and cost (None: no known price).
        assert sorted(kept) == [attempt_key(request.key, n) for n in range(3)]
        for n in range(3):
            row = kept[attempt_key(request.key, n)]
            assert row["content"] == NOT_A_VERDICT and row["attempt"] == n
            assert row["prompt_tokens"] > 0 and row["completion_tokens"] > 0
            assert "cost_usd" in row and row["unusable"].startswith("invalid judge reply")

        # The same call again: every attempt is read, nothing paid.
        fake.reset_counts()
        _, again, stats, _ = judge_once(backend, fake.url, "judge this", 3)
        assert fake.calls["m"] == 0
        assert again.status == "error" and again.error == outcome.error
        assert (stats.cache_hits, stats.invalid_replies) == (1, 0)

        # --judge-attempts counts the stored attempts: five asks only the two past them.
        _, _, _, kept = judge_once(backend, fake.url, "judge this", 5)
        assert fake.calls["m"] == 2 and len(kept) == 5

        # --refresh asks every attempt again.
        fake.reset_counts()
        judge_once(backend, fake.url, "judge this", 3, refresh=True)
        assert fake.calls["m"] == 3


def test_a_reply_readable_now_among_the_kept_attempts_is_the_answer(backend):
    """A stored attempt is read with the parser of the run that reads it: one that parses now
    (a more lenient parser) is the call's answer, stored as the request's, paid for once."""
    with FakeOpenAI({"m": lambda _: Reply(content='{"score": "PASS"}')}) as fake:
        request, outcome, _, _ = judge_once(backend, fake.url, "lenient", 2)
        assert outcome.status == "error" and fake.calls["m"] == 2

        async def lenient():
            store = store_for(backend)
            try:
                client = ChatClient(role_at(fake.url), store,
                                    RuntimeOptions(judge_parse_attempts=2))
                found = await client.call(request, lambda reply: json.loads(reply)["score"])
                return found, await store.get(request.key)
            finally:
                await store.close()

        found, stored = asyncio.run(lenient())
        assert found.ok and found.parsed == "PASS" and fake.calls["m"] == 2
        assert stored is not None and stored["content"] == '{"score": "PASS"}'


def test_a_valid_answer_keeps_its_key_and_no_attempt(backend):
    """The key of a valid call is the request's, as before attempts were kept (the same hash):
    yesterday's cache answers today's run."""
    role = role_at("http://127.0.0.1:9/v1")
    assert ChatRequest.build(role, [("user", "judge this")]).key == \
        "c566aa8c9d66da3bff81f31b6bc1a76d6612419a2ed7ba450f7a99277b6eb932"
    with FakeOpenAI({"m": lambda _: Reply(content="PASS")}) as fake:
        async def go(parse):
            store = store_for(backend)
            try:
                client = ChatClient(role_at(fake.url), store,
                                    RuntimeOptions(judge_parse_attempts=3))
                request = ChatRequest.build(role_at(fake.url), [("user", "valid")])
                outcome = await client.call(request, parse)
                kept = await store.get_many([attempt_key(request.key, n) for n in range(3)])
                return outcome, await store.get(request.key), kept
            finally:
                await store.close()

        outcome, stored, kept = asyncio.run(go(lambda reply: reply))
        assert outcome.ok and stored["content"] == "PASS" and kept == {}
        again, _, _ = asyncio.run(go(lambda reply: reply))
        assert again.from_cache and fake.calls["m"] == 1


def test_two_processes_at_once_pay_each_attempt_once(backend):
    """Two identical runs started together, with a judge whose replies never parse: each
    attempt reaches the server once; the second reads what the first paid for."""
    with FakeOpenAI({"m": lambda _: Reply(content=NOT_A_VERDICT, delay=0.3)}) as fake:
        workers = [start("judge", backend, fake.url, "judge this at once", "3")
                   for _ in range(2)]
        try:
            for worker in workers:
                expect(worker, "ready")
            for worker in workers:
                worker.stdin.write("go\n")
                worker.stdin.flush()
            outcomes = [json.loads(worker.communicate(timeout=90)[0]) for worker in workers]
        finally:
            stop_all(workers)
    assert fake.calls["m"] == 3
    assert [o["status"] for o in outcomes] == ["error", "error"]
    assert all(o["error"].startswith("invalid judge reply") for o in outcomes)
