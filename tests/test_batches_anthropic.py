"""Anthropic's Message Batches adapter against the loopback fake (tests/fake_anthropic_batches.py):
submit, progress, results, cancel, find, partial failure, expiry, the API's own failures, and a
batched call ending as the same cache record as the interactive call."""

from __future__ import annotations

import asyncio
import json
import time

import litellm
import pytest

from fake_anthropic_batches import FakeAnthropic
from fake_openai import Reply
from proactflow.batches import anthropic_wire as wire
from proactflow.batches.anthropic import AnthropicBatches
from proactflow.batches.protocol import BatchLine
from proactflow.cache.keys import content_key
from proactflow.common.errors import EndpointDown, ProviderRejected
from proactflow.providers.llm import ChatClient

KEY = "sk-ant-test-secret"
VERDICT = {"type": "json_schema", "json_schema": {"name": "verdict", "schema": {
    "type": "object", "properties": {"score": {"type": "integer"}, "why": {"type": "string"}},
    "required": ["score", "why"]}}}


def answer(request: dict) -> Reply:
    last = request["messages"][-1]["content"]
    if "verdict" in last:
        return Reply(content=json.dumps({"score": len(last) % 5, "why": "déjà vu « ok »"},
                                        ensure_ascii=False))
    return Reply(content=f"Reply to: {last}", finish_reason="length" if "long" in last else "stop")


MODELS = ("claude-3-5-sonnet-20241022", "claude-sonnet-4-5", "claude-test")


def fake_server(**options) -> FakeAnthropic:
    return FakeAnthropic({model: answer for model in MODELS}, api_key=KEY, **options)


def line(text: str, model: str = "claude-test", **params) -> BatchLine:
    body = {"model": f"anthropic/{model}", "max_tokens": 64,
            "messages": [{"role": "system", "content": "Be brief."},
                         {"role": "user", "content": text}], **params}
    return BatchLine(content_key(body), body)


def adapter(fake: FakeAnthropic, **options) -> AnthropicBatches:
    return AnthropicBatches(KEY, fake.url, timeout_s=10, retry_base_s=0.01, find_poll_s=0.1,
                            **options)


async def until_ended(batches: AnthropicBatches, batch_id: str, seconds: float = 20):
    deadline = time.monotonic() + seconds
    while not (progress := await batches.progress(batch_id)).ended:
        assert time.monotonic() < deadline, f"batch still {progress.status}"
        await asyncio.sleep(0.05)
    return progress


def run(coroutine):
    return asyncio.run(asyncio.wait_for(coroutine, 60))


def test_submit_progress_results():
    lines = [line(f"question {i}") for i in range(3)]

    async def scenario(fake):
        batches = adapter(fake)
        batch_id = await batches.submit(lines, "tag-1")
        first = await batches.progress(batch_id)
        assert (first.status, first.total) == ("in_progress", 3) and not first.ended
        done = await until_ended(batches, batch_id)
        assert (done.status, done.total, done.done, done.failed) == ("completed", 3, 3, 0)
        return await batches.results(batch_id)

    with fake_server(completion_delay=0.3) as fake:
        results = run(scenario(fake))
        assert sorted(r.custom_id for r in results) == sorted(l.custom_id for l in lines)
        by_key = {r.custom_id: r for r in results}
        for item in lines:
            result = by_key[item.custom_id]
            assert result.status_code == 200 and result.error is None
            assert result.response["choices"][0]["message"]["content"] == \
                f"Reply to: {item.body['messages'][-1]['content']}"
        # Each line sent once, carrying the tag's mark before its key.
        assert len(fake.submitted) == 3 and set(fake.submitted.values()) == {1}
        assert all(wire.split_wire_id(wire_id)[0] == wire.tag_mark("tag-1")
                   for wire_id in fake.submitted)
        assert all(h["x-api-key"] == KEY and h["anthropic-version"] for h in fake.headers_seen)


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("ask", ["plain", "verdict", "long"])
def test_a_batched_call_is_the_interactive_call(model, ask):
    """The same request sent interactively through litellm and in a batch: the fake gets the same
    /v1/messages body, and the replies become the same chat completion and cache record."""
    extra = {"response_format": VERDICT} if ask == "verdict" else {"temperature": 0.0}
    item = line(f"{ask} question about café", model, **extra)

    async def scenario(fake):
        interactive = await litellm.acompletion(**item.body, api_base=fake.url, api_key=KEY,
                                                max_retries=0, timeout=10)
        batches = adapter(fake)
        batch_id = await batches.submit([item], "tag-eq")
        await until_ended(batches, batch_id)
        # As a process that did not submit it reads it, with the lines and without them.
        fresh = adapter(fake)
        return (interactive, await batches.results(batch_id),
                await fresh.results(batch_id, [item]), await fresh.results(batch_id))

    with fake_server(completion_delay=0.05) as fake:
        interactive, [own], [given], [bare] = run(scenario(fake))
        assert fake.batch_params == fake.interactive_bodies
    expected = interactive.model_dump()
    for result in (own, given):
        batched = dict(result.response)
        for incidental in ("id", "created"):
            batched.pop(incidental), expected.pop(incidental, None)
        assert batched == expected
        request = _request_of(item)
        records = [ChatClient._outcome(request, response, 0.0, 1).record() for response in
                   (interactive, litellm.ModelResponse(**result.response))]
        assert records[0] == records[1]
        assert records[0]["status"] == ("truncated" if ask == "long" else "ok")
    if ask != "verdict" or model == "claude-sonnet-4-5":  # no forced tool: nothing to guess
        assert bare.response["choices"] == own.response["choices"]
    else:  # the schema unknown, litellm escapes the answer's non-ASCII characters
        assert json.loads(bare.response["choices"][0]["message"]["content"]) == \
            json.loads(own.response["choices"][0]["message"]["content"])


def _request_of(item: BatchLine):
    from proactflow.providers.chat import ChatRequest

    params = tuple(sorted((k, v) for k, v in item.body.items() if k not in ("model", "messages")))
    return ChatRequest(item.body["model"], None, tuple(
        (m["role"], m["content"]) for m in item.body["messages"]), params)


def test_partial_failure_and_expiry():
    """An errored line is a failed result with the provider's one-line reason; an expired one is
    absent from the results (it goes into the next batch) and the batch ends expired."""
    lines = [line(f"question {i}") for i in range(4)]
    fates = {wire.wire_id(lines[1].custom_id, "t"): "errored",
             wire.wire_id(lines[2].custom_id, "t"): "expired"}

    async def scenario(fake):
        batches = adapter(fake)
        batch_id = await batches.submit(lines, "t")
        return await until_ended(batches, batch_id), await batches.results(batch_id)

    with fake_server(completion_delay=0.2,
                     fate=lambda custom_id, params: fates.get(custom_id, "succeeded")) as fake:
        progress, results = run(scenario(fake))
    assert (progress.status, progress.total, progress.done, progress.failed) == \
        ("expired", 4, 3, 1)
    by_key = {r.custom_id: r for r in results}
    assert set(by_key) == {lines[0].custom_id, lines[1].custom_id, lines[3].custom_id}
    failed = by_key[lines[1].custom_id]
    assert failed.response is None and failed.status_code == 400
    assert failed.error == "invalid_request_error: scripted failure of this line"


def test_cancel_keeps_finished_lines():
    lines = [line(f"question {i}") for i in range(4)]

    async def scenario(fake):
        batches = adapter(fake)
        batch_id = await batches.submit(lines, "t")
        while (await batches.progress(batch_id)).done < 1:
            await asyncio.sleep(0.02)
        await batches.cancel(batch_id)
        cancelling = await batches.progress(batch_id)
        done = await until_ended(batches, batch_id)
        await batches.cancel(batch_id)  # ended: nothing to do, no error
        return cancelling, done, await batches.results(batch_id)

    with fake_server(completion_delay=4.0, cancel_delay=0.2) as fake:
        cancelling, done, results = run(scenario(fake))
        assert fake.api_requests["cancel"] == 1
    assert cancelling.status == "cancelling"
    assert done.status == "cancelled" and 1 <= done.done < 4 and done.total == 4
    assert len(results) == done.done and all(r.status_code == 200 for r in results)


def test_find_recognises_the_tag_and_waits_for_a_batch_in_progress():
    async def scenario(fake):
        batches = adapter(fake)
        batches.api.page_size = 1  # every batch on a page of its own: pagination is followed
        ours = await batches.submit([line("ours")], "run-42")
        for other in range(3):
            await batches.submit([line(f"other {other}")], f"run-{other}")
        fake.create([{"custom_id": "not-proactflows-line", "params": {"model": "claude-test",
                      "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}}])
        due = fake.batches[ours].finish_at[-1]  # when the fake ends our batch
        in_progress = time.time() < due
        found = await adapter(fake).find("run-42")  # a process that did not submit it
        returned_after_its_end = time.time() >= due
        nothing = await batches.find("run-never-submitted")
        recent = await batches.find("run-42", created_after=time.time() + 60)
        return ours, found, in_progress, returned_after_its_end, nothing, recent

    # Long enough that the batch is still running when find starts, however slow the machine.
    with fake_server(completion_delay=3.0) as fake:
        ours, found, in_progress, returned_after_its_end, nothing, recent = run(scenario(fake))
    assert in_progress, "the batch ended before find started: nothing to wait for"
    assert found == ours and returned_after_its_end  # it waited for the batch to end
    assert nothing is None and recent is None


def test_failures_of_the_api_are_one_line_errors():
    async def scenario(fake):
        batches = adapter(fake)
        with pytest.raises(ProviderRejected) as rejected:
            await AnthropicBatches("sk-ant-wrong-key", fake.url, retry_base_s=0.01).submit(
                [line("q")], "t")
        assert "authentication_error" in str(rejected.value)
        assert "sk-ant-wrong" not in str(rejected.value) and "\n" not in str(rejected.value)
        with pytest.raises(ProviderRejected, match="not_found_error"):
            await batches.progress("msgbatch_none")
        fake.api_failures += [(429, "slow down"), (529, "overloaded")]
        batch_id = await batches.submit([line("q")], "t")  # the 429 is retried, then... 529
        return batch_id

    with fake_server() as fake:
        with pytest.raises(EndpointDown, match="may have been created"):
            run(scenario(fake))
        assert fake.api_requests["create"] == 3 and not fake.submitted  # 401, 429, 529

    async def retried(fake):
        batches = adapter(fake)
        batch_id = await batches.submit([line("q")], "t")
        fake.api_failures += [(500, "hiccup"), (429, "slow down")]
        assert (await until_ended(batches, batch_id)).status == "completed"
        fake.api_failures += [(503, "down")] * 6
        with pytest.raises(EndpointDown, match="HTTP 503"):
            await batches.progress(batch_id)

    with fake_server(completion_delay=0.05) as fake:
        run(retried(fake))

    async def too_large(fake):
        batches = adapter(fake)
        with pytest.raises(ProviderRejected, match="request_too_large"):
            await batches.submit([line("q" * 2000)], "t")
        return await batches.find("t")

    with fake_server(max_request_bytes=1000) as fake:
        # Refused: known to have created nothing, so find answers without searching.
        assert run(too_large(fake)) is None
        assert not fake.submitted and fake.api_requests["list"] == 0


def test_unreachable_api_and_other_origins():
    async def unreachable():
        batches = AnthropicBatches(KEY, "http://127.0.0.1:9", attempts=2, retry_base_s=0.01)
        with pytest.raises(EndpointDown, match="connection refused"):
            await batches.progress("msgbatch_1")

    run(unreachable())

    async def elsewhere(fake):
        batches = adapter(fake)
        batch_id = await batches.submit([line("q")], "t")
        await until_ended(batches, batch_id)
        batch = await batches.api.batch(batch_id)
        batch["results_url"] = "http://127.0.0.2:1/v1/messages/batches/x/results"
        with pytest.raises(ProviderRejected, match="another origin"):
            async for _ in batches.api.result_records(batch):
                pass

    with fake_server(completion_delay=0.05) as fake:
        run(elsewhere(fake))


def test_wire_ids_and_limits():
    key = "ab" * 32
    wire_id = wire.wire_id(key, "tag")
    assert len(wire_id) <= 64 and wire.split_wire_id(wire_id) == (wire.tag_mark("tag"), key)
    assert wire.split_wire_id("someone-elses-id") is None
    with pytest.raises(ValueError):
        wire.wire_id("not-a-key", "tag")
    batches = AnthropicBatches(KEY)
    assert (batches.limits.max_requests, batches.limits.max_bytes) == (100_000, 256_000_000)
    item = line("size me")
    params, _ = asyncio.run(wire.request_params(item.body))
    sent = json.dumps({"custom_id": wire.wire_id(item.custom_id, "t"), "params": params},
                      ensure_ascii=False)
    assert 0 <= batches.encoded_size(item) - len(sent.encode()) <= 2
    assert KEY not in repr(batches)


def test_calls_waiting_while_a_format_is_learnt_go_on_together(tmp_path):
    """While one judge call learns that the server takes its response_format, the others wait;
    once it works they are made together, not one at a time under the lock (a batched call
    holds it for a whole batch turnaround)."""
    from proactflow.cache.calls import CallCache
    from proactflow.config.settings import Generation, ModelRole, RuntimeOptions
    from proactflow.providers.chat import ChatRequest

    in_flight, peaks = 0, []

    async def completion(**kwargs):
        nonlocal in_flight
        in_flight += 1
        peaks.append(in_flight)
        await asyncio.sleep(0.2)
        in_flight -= 1
        return litellm.ModelResponse(choices=[{"message": {"role": "assistant",
                                                           "content": '{"ok": true}'}}],
                                     usage={"prompt_tokens": 1, "completion_tokens": 2})

    role = ModelRole(model="openai/format-learner", api_base="http://127.0.0.1:9/v1",
                     generation=Generation(temperature=0.0, max_tokens=16, top_p=None))
    client = ChatClient(role, CallCache(tmp_path / "calls"), RuntimeOptions(),
                        completion=completion)

    async def judge_all():
        requests = [ChatRequest.build(role, [("user", f"judge {i}")],
                                      extra={"response_format": VERDICT}) for i in range(6)]
        return await asyncio.gather(*(client.call(r, json.loads) for r in requests))

    started = time.monotonic()
    outcomes = asyncio.run(judge_all())
    assert all(outcome.ok for outcome in outcomes)
    assert peaks[0] == 1 and max(peaks) == 5  # one alone, then the five others at once
    assert time.monotonic() - started < 0.2 * 6
