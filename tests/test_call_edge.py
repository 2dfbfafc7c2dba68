"""The call edge against real provider behaviour: replies that are not answers, rate-limit
bursts, lease renewal, first-writer-wins caching, effective endpoints and keys."""

from __future__ import annotations

import asyncio
import threading

import pytest

from fake_openai import FakeOpenAI, Reply
from proactflow.cache.calls import CallCache
from proactflow.common.errors import EndpointDown
from proactflow.common.redaction import redact, register_secret_variable
from proactflow.config.endpoints import effective_endpoint, normalise_endpoint
from proactflow.config.settings import Generation, ModelRole, RuntimeOptions
from proactflow.providers.chat import NO_KEY_PLACEHOLDER
from proactflow.providers.llm import ChatClient, ChatRequest
from proactflow.suites.proactbench.judgments import parse_judge_reply

FAST = RuntimeOptions(retry_base_delay_s=0.01, max_attempts=4)


def role_for(fake: FakeOpenAI, model: str, **extra) -> ModelRole:
    return ModelRole(model=f"openai/{model}", api_base=fake.url,
                     generation=Generation(temperature=0.0, max_tokens=16, top_p=None), **extra)


def make_client(fake: FakeOpenAI, model: str, tmp_path, runtime: RuntimeOptions = FAST,
                **extra) -> ChatClient:
    return ChatClient(role_for(fake, model), CallCache(tmp_path / "calls"), runtime, **extra)


def ask(client: ChatClient, text: str = "hello", accept=None):
    return asyncio.run(client.call(ChatRequest.build(client.role, [("user", text)]), accept))


@pytest.mark.parametrize("reply, status", [
    (Reply(content=""), "empty"),
    (Reply(content="   \n"), "empty"),
    (Reply(content="half a sent", finish_reason="length"), "truncated"),
    (Reply(content="", finish_reason="length"), "truncated"),
    (Reply(content="", finish_reason="content_filter"), "blocked"),
])
def test_a_reply_that_is_not_an_answer_gets_its_own_status(tmp_path, reply, status):
    with FakeOpenAI({"m": lambda _: reply}) as fake:
        client = make_client(fake, "m", tmp_path)
        outcome = ask(client)
        assert (outcome.ok, outcome.status) == (False, status)
        assert outcome.error
        # Kept as what it is (the model's reply to this request), never served as an answer.
        again = ask(client)
        assert again.from_cache and again.status == status and not again.ok
        assert fake.calls["m"] == 1


def test_a_cached_empty_answer_from_an_older_version_is_not_an_answer(tmp_path):
    cache = CallCache(tmp_path / "calls")
    role = ModelRole(model="openai/m", api_base="http://127.0.0.1:9/v1",
                     generation=Generation(temperature=0.0, max_tokens=16, top_p=None))
    request = ChatRequest.build(role, [("user", "hello")])
    cache.put(request.key, {"content": "", "finish_reason": "stop", "prompt_tokens": 1,
                            "completion_tokens": 0, "latency_s": 0.1, "attempts": 1})
    outcome = asyncio.run(ChatClient(role, cache, FAST).call(request))
    assert outcome.from_cache and outcome.status == "empty"


def test_a_judge_reply_cut_at_max_tokens_is_not_asked_again(tmp_path):
    truncated = Reply(content='{"evaluation_result": {"status": "EVAL', finish_reason="length")
    with FakeOpenAI({"judge": lambda _: truncated}) as fake:
        client = make_client(fake, "judge", tmp_path)
        outcome = ask(client, accept=parse_judge_reply)
        assert outcome.status == "truncated" and fake.calls["judge"] == 1
        assert ChatRequest.build(client.role, [("user", "hello")]).key not in client.cache


def test_judge_replies_with_reasoning_or_lower_case_words_are_read():
    verdict = parse_judge_reply('<think>The user asked {"x": 1}... PASS?</think>\n'
                                '{"evaluation_result": {"status": "evaluated", "score": "pass", '
                                '"rationale": "r", "evidence": "e"}}')
    assert (verdict.status, verdict.score) == ("EVALUATED", "PASS")
    only_closing = parse_judge_reply('thinking {"a": 2}</think>{"status": "Evaluated", '
                                     '"score": "Partial"}')
    assert only_closing.score == "PARTIAL"


def test_a_429_burst_at_concurrency_64_completes_and_backs_off(tmp_path):
    state = {"rate_limited": 0}
    lock = threading.Lock()

    def burst(_):
        with lock:  # the fake serves each request on its own thread
            saturated = state["rate_limited"] < 96  # a whole wave and more
            state["rate_limited"] += saturated
        if saturated:
            return Reply(status=429, content="rate limited", headers={"Retry-After": "0.2"})
        return Reply(content="fine", delay=0.02)

    runtime = RuntimeOptions(concurrency=64, retry_base_delay_s=0.05, max_attempts=2,
                             max_consecutive_failures=5, down_after_s=0.5)
    with FakeOpenAI({"m": burst}) as fake:
        client = make_client(fake, "m", tmp_path, runtime)

        async def many():
            return await asyncio.gather(*(client.call(ChatRequest.build(
                client.role, [("user", f"q{i}")])) for i in range(200)))

        outcomes = asyncio.run(many())
    assert all(outcome.ok for outcome in outcomes)
    assert client.stats.rate_limited == state["rate_limited"] == 96
    assert client.in_flight.peak <= 64
    assert client.in_flight.lowest < 64  # it backed off


def test_the_breaker_still_trips_on_an_endpoint_that_keeps_failing(tmp_path):
    runtime = RuntimeOptions(retry_base_delay_s=0.01, max_attempts=50,
                             max_consecutive_failures=3, down_after_s=0.3)
    with FakeOpenAI({"m": lambda _: Reply(status=503, content="down")}) as fake:
        client = make_client(fake, "m", tmp_path, runtime)
        with pytest.raises(EndpointDown, match="no call succeeded for 0.3 s"):
            ask(client)


def test_a_lease_is_renewed_while_its_call_runs(tmp_path):
    runtime = RuntimeOptions(lease_ttl_s=0.3)
    with FakeOpenAI({"m": lambda _: Reply(content="slow", delay=1.2)}) as fake:
        client = make_client(fake, "m", tmp_path, runtime)
        request = ChatRequest.build(client.role, [("user", "hello")])
        seen = []

        async def watch():
            call = asyncio.create_task(client.call(request))
            for _ in range(4):
                await asyncio.sleep(0.25)
                seen.append(client.cache._leases.get(request.key) is not None)
            await call

        asyncio.run(watch())
    assert all(seen), seen  # a 0.3 s lease still held after a second
    assert client.cache._leases.get(request.key) is None  # and released at the end


def test_the_first_stored_answer_wins(tmp_path):
    cache = CallCache(tmp_path / "calls")
    assert cache.put("k", {"content": "first"}) == {"content": "first"}
    assert cache.put("k", {"content": "second"}) == {"content": "first"}
    assert cache.put("k", {"content": "third"}, replace=True) == {"content": "third"}


def test_refresh_asks_again_and_replaces_the_cached_answer(tmp_path):
    answers = iter(["old", "new"])
    with FakeOpenAI({"m": lambda _: Reply(content=next(answers))}) as fake:
        assert ask(make_client(fake, "m", tmp_path)).content == "old"
        assert ask(make_client(fake, "m", tmp_path, refresh=True)).content == "new"
        assert ask(make_client(fake, "m", tmp_path)).content == "new"
        assert fake.calls["m"] == 2


def test_served_model_fingerprint_and_litellm_version_are_recorded(tmp_path):
    reply = Reply(content="hi", served_model="m-2026-11-01", system_fingerprint="fp_abc")
    with FakeOpenAI({"m": lambda _: reply}) as fake:
        outcome = ask(make_client(fake, "m", tmp_path))
    assert (outcome.served_model, outcome.system_fingerprint) == ("m-2026-11-01", "fp_abc")
    assert outcome.litellm_version and outcome.litellm_version[0].isdigit()


def test_a_revision_label_changes_the_key():
    plain = ModelRole(model="openai/m", api_base="http://h/v1",
                      generation=Generation(temperature=0.0, max_tokens=16, top_p=None))
    labelled = plain.model_copy(update={"revision": "ckpt-2"})
    key = lambda role: ChatRequest.build(role, [("user", "x")]).key  # noqa: E731
    assert key(plain) != key(labelled)
    assert "revision" not in plain.key_material() and labelled.key_material()["revision"]


def test_the_key_names_the_effective_endpoint(monkeypatch):
    assert normalise_endpoint("http://LOCALHOST:8000/v1/") == "http://127.0.0.1:8000/v1"
    assert normalise_endpoint("https://api.example.com:443/v1") == "https://api.example.com/v1"
    assert normalise_endpoint("http://[::1]:8000/v1") == "http://127.0.0.1:8000/v1"
    secret_url = normalise_endpoint("http://bob:hunter22@h:1/v1?key=abc123&v=2")
    assert "hunter22" not in secret_url and "abc123" not in secret_url

    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    assert effective_endpoint("gpt-4o-mini", None) is None
    role = ModelRole(model="gpt-4o-mini",
                     generation=Generation(temperature=0.7, max_tokens=16, top_p=1.0))
    default_key = ChatRequest.build(role, [("user", "x")]).key
    monkeypatch.setenv("OPENAI_BASE_URL", "http://localhost:8000/v1/")
    assert effective_endpoint("gpt-4o-mini", None) == "openai:http://127.0.0.1:8000/v1"
    assert ChatRequest.build(role, [("user", "x")]).key != default_key
    monkeypatch.setenv("VERTEXAI_PROJECT", "proj")
    monkeypatch.setenv("VERTEXAI_LOCATION", "europe-west4")
    assert effective_endpoint("vertex_ai/gemini-2.5-pro", None) == \
        "vertex_ai:proj/europe-west4"


def test_a_custom_endpoint_never_gets_the_openai_key(tmp_path, monkeypatch):
    secret = "sk-" + "openai-key-for-api.openai.com-only-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    with FakeOpenAI({"m": lambda _: Reply(content="ok")}) as fake:
        ask(make_client(fake, "m", tmp_path))
        assert fake.requests[0]["_authorization"] == f"Bearer {NO_KEY_PLACEHOLDER}"


def test_redaction_covers_named_variables_and_urls(monkeypatch):
    monkeypatch.setenv("MY_ENDPOINT_CRED", "opaque-value-42")
    assert "opaque-value-42" in redact("saw opaque-value-42")  # not a credential-like name...
    register_secret_variable("MY_ENDPOINT_CRED")
    assert redact("saw opaque-value-42") == "saw ***"  # ...until a role names it as its key
    text = redact("POST http://bob:hunter22@host:1/v1/chat?api-key=xyz987&v=2 failed")
    assert "hunter22" not in text and "xyz987" not in text and "host:1/v1/chat" in text


def test_calls_queued_behind_a_format_probe_go_out_together_once_it_is_confirmed(tmp_path):
    """A judge's response_format is tried by one call first; the calls that queued behind it
    must then go out at the judge's width, not one at a time (issue #26: a sweep's judge went
    on at one call in flight for minutes, every call that had queued behind the first one)."""
    verdict = Reply(content='{"evaluation_result": {"status": "evaluated", "score": "pass", '
                            '"rationale": "r", "evidence": "e"}}', delay=0.3)
    runtime = RuntimeOptions(concurrency=16, retry_base_delay_s=0.01, max_attempts=2)
    with FakeOpenAI({"judge": lambda _: verdict}) as fake:
        client = make_client(fake, "judge", tmp_path, runtime)
        schema = {"type": "json_schema", "json_schema": {"name": "v", "schema": {}}}

        async def many():
            return await asyncio.gather(*(client.call(ChatRequest.build(
                client.role, [("user", f"q{i}")], extra={"response_format": schema}),
                parse_judge_reply) for i in range(48)))

        outcomes = asyncio.run(many())
        arrivals = sorted(fake.call_times)
    assert all(outcome.ok for outcome in outcomes) and fake.calls["judge"] == 48
    assert arrivals[1] - arrivals[0] >= 0.29  # the format's first call went alone
    # Then the 47 that waited for it went out together, up to the judge's limit (one at a time
    # before the fix; a loaded machine may start the last few after the first ones have ended).
    assert 8 < fake.peak_by_model["judge"] <= 16
