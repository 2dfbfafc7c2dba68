"""The billing fakes (tests/fake_billing.py, fake_billing_anthropic.py) bill like the providers
they stand for, kinder maybe, never otherwise: Anthropic's style caches only up to the
breakpoints a request carries, from the model's minimum length on, for five minutes from the
last use; a prefix is cached once its call was answered; a batch's lines are served in order,
each reading what was answered before it. An Anthropic-style run through proactflow is
billed within 1 % of litellm's own cost of the usage the fake reported."""

from __future__ import annotations

import json
from pathlib import Path

import litellm
import pytest
from litellm.llms.anthropic.chat.transformation import AnthropicConfig

from fake_billing import BillingFake, PrefixCache
from fake_billing_anthropic import AnthropicBillingFake
from fake_openai import Reply
from helpers import cli_args, run_cli
from replay import SHARED_JUDGE_PROMPT, scaled_corpus, synthetic_judge, synthetic_model

SYSTEM = "You judge replies to a user, carefully. " * 150  # 6,000 characters: 1,500 tokens
KEY = "sk-ant-fake-key"
OK = lambda _: Reply(content="fine")  # noqa: E731


def params(model: str, marks: tuple[bool, bool], user: str = "Judge this.") -> dict:
    """A Messages request: a system block and a user block, each with or without a
    breakpoint."""
    def block(text: str, marked: bool) -> dict:
        return {"type": "text", "text": text,
                **({"cache_control": {"type": "ephemeral"}} if marked else {})}

    return {"model": model, "max_tokens": 16, "system": [block(SYSTEM, marks[0])],
            "messages": [{"role": "user", "content": [block(user, marks[1])]}]}


def cache_usage(reply: tuple[int, dict]) -> tuple[int, int, int]:
    status, body = reply
    assert status == 200, body
    used = body["usage"]
    assert used["cache_creation"]["ephemeral_5m_input_tokens"] == \
        used["cache_creation_input_tokens"]
    return used["input_tokens"], used["cache_read_input_tokens"], \
        used["cache_creation_input_tokens"]


def test_anthropic_style_caches_only_up_to_the_breakpoints_a_request_carries():
    fake = AnthropicBillingFake({"claude-sonnet-4-5": OK})
    unmarked = params("claude-sonnet-4-5", (False, False))
    first = cache_usage(fake.message(unmarked))
    assert first[1:] == (0, 0) and cache_usage(fake.message(unmarked)) == first  # never asked

    marked = params("claude-sonnet-4-5", (True, False))
    total, read, written = cache_usage(fake.message(marked))
    assert read == 0 and written >= 1500 and total == first[0] - written
    assert cache_usage(fake.message(marked)) == (total, written, 0)  # the system prompt read
    # The same prefix without a breakpoint reads nothing: a request reads only where it asks.
    assert cache_usage(fake.message(unmarked)) == first
    # A second breakpoint further on: the system prompt read, the rest up to it written.
    longer = params("claude-sonnet-4-5", (True, True), user="Judge this reply. " * 10)
    rest, read_again, more = cache_usage(fake.message(longer))
    assert (read_again, rest) == (written, 0) and more > 0
    # A request that marks only the longer prefix still finds the system prompt (lookback).
    only_last = params("claude-sonnet-4-5", (False, True), user="Judge this reply. " * 10)
    assert cache_usage(fake.message(only_last)) == (0, written + more, 0)


def test_anthropic_style_caches_nothing_below_the_models_minimum():
    """1,500 tokens: above a Sonnet model's minimum (1,024), below a Haiku model's (2,048)."""
    fake = AnthropicBillingFake({"claude-sonnet-4-5": OK, "claude-haiku-4-5": OK})
    for _ in range(2):
        haiku = cache_usage(fake.message(params("claude-haiku-4-5", (True, False))))
        sonnet = cache_usage(fake.message(params("claude-sonnet-4-5", (True, False))))
    assert haiku[1:] == (0, 0)
    assert sonnet[1] >= 1500  # the second call read what the first wrote


def test_a_prefix_is_read_once_answered_for_five_minutes_from_its_last_use():
    now = [0.0]
    cache = PrefixCache(clock=lambda: now[0])
    prefix = [(2000, ("m", "digest"))]
    # Two calls sent together: neither finds the other's prefix.
    assert cache.look("m", 2100, prefix, prefix) == 0
    assert cache.look("m", 2100, prefix, prefix) == 0
    assert cache.store("m", 0, prefix) == 2000
    assert cache.ideal_cached["m"] == 2000  # an ideal order: the second reads the first's
    now[0] = 299.0
    assert cache.look("m", 2100, prefix, prefix) == 2000  # read: kept 300 s from now
    now[0] = 598.0
    assert cache.look("m", 2100, prefix, prefix) == 2000
    now[0] = 899.0
    assert cache.look("m", 2100, prefix, prefix) == 0  # 301 s unused: gone
    assert (cache.prompt["m"], cache.cached["m"]) == (5 * 2100, 2 * 2000)


def _lines(model: str, count: int) -> list[dict]:
    return [{"custom_id": f"line-{index}", "method": "POST", "url": "/v1/chat/completions",
             "body": {"model": model, "messages": [{"role": "system", "content": SYSTEM},
                                                   {"role": "user", "content": f"n{index}"}]}}
            for index in range(count)]


def test_openai_style_batch_lines_read_what_the_lines_before_them_left():
    fake = BillingFake({"gpt-4.1": OK})
    fake.files["file-1"] = "".join(json.dumps(line) + "\n"
                                   for line in _lines("gpt-4.1", 3)).encode()
    batch = fake._create({"input_file_id": "file-1", "endpoint": "/v1/chat/completions"})
    done = fake._retrieve(batch["id"])
    assert done is not None and done["status"] == "completed"
    output = [json.loads(line) for line in fake.files[done["output_file_id"]].splitlines()]
    cached = [entry["response"]["body"]["usage"]["prompt_tokens_details"]["cached_tokens"]
              for entry in output]
    assert cached[0] == 0 and cached[1] == cached[2] >= 1024 and cached[1] % 128 == 0


def test_anthropic_style_batch_lines_read_what_the_lines_before_them_left():
    fake = AnthropicBillingFake({"claude-sonnet-4-5": OK}, completion_delay=0.0)
    requests = [{"custom_id": f"line-{index}",
                 "params": params("claude-sonnet-4-5", (True, False), user=f"n{index}")}
                for index in range(3)]
    fake.create(requests)
    batch = next(iter(fake.batches.values()))
    assert batch.ended is not None
    used = [batch.outcomes[f"line-{index}"]["message"]["usage"] for index in range(3)]
    assert used[0]["cache_read_input_tokens"] == 0
    written = used[0]["cache_creation_input_tokens"]
    assert written >= 1500
    assert [u["cache_read_input_tokens"] for u in used[1:]] == [written, written]


def _litellm_cost(model: str, usages: list[dict]) -> float:
    """litellm's own dollars for the Anthropic usages the fake sent (its transformation of
    Anthropic's usage, then its cost per token)."""
    total = 0.0
    for raw in usages:
        usage = AnthropicConfig().calculate_usage(raw, reasoning_content=None)
        prompt, completion = litellm.cost_per_token(
            model=model, prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens, usage_object=usage)
        total += prompt + completion
    return total


def _paid(store: Path) -> dict[str, dict]:
    record, = (store / "runs").glob("*.json")
    return json.loads(record.read_text(encoding="utf-8"))["usage"]


@pytest.mark.usefixtures("prefect_server", "shared_data")
@pytest.mark.parametrize("batch", [False, True], ids=["interactive", "batch"])
def test_an_anthropic_style_run_is_billed_as_litellm_prices_the_usage(tmp_path, monkeypatch,
                                                                       batch):
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", KEY)
    corpus, _ = scaled_corpus(tmp_path, 2)
    fake = AnthropicBillingFake({"claude-sonnet-4-5": synthetic_model,
                                 "claude-opus-4-5": synthetic_judge},
                                api_key=KEY, latency=0.02, completion_delay=0.05)
    extra = ("--eval-api-key-env", "FAKE_ANTHROPIC_KEY", "--judge-api-key-env",
             "FAKE_ANTHROPIC_KEY", "--judge-prompt", str(SHARED_JUDGE_PROMPT))
    with fake:
        for mode in ("off", "auto"):
            args = cli_args(fake, tmp_path / mode, corpus=corpus,  # type: ignore[arg-type]
                            eval_model="anthropic/claude-sonnet-4-5",
                            judge_model="anthropic/claude-opus-4-5",
                            extra=(*extra, "--prompt-cache", mode,
                                   *(("--batch", "--batch-poll", "0.05") if batch else ())))
            fake.replied.clear()
            assert run_cli("run", args) == 0
            judged = _paid(tmp_path / mode)["judge"]
            if mode == "off":  # no breakpoint on the wire: the provider caches nothing
                assert judged["paid_cache_read_tokens"] == judged["paid_cache_write_tokens"] == 0
    assert not fake.responder_errors, fake.responder_errors
    sent = [usage for model, usage in fake.replied if model == "claude-opus-4-5"]
    # With breakpoints: the judge's system prompt written once, then read by every other call.
    assert judged["paid_cache_write_tokens"] > 0
    assert judged["paid_cache_read_tokens"] == (len(sent) - 1) * judged["paid_cache_write_tokens"]
    if batch:
        assert judged["paid_at"] == "batch prices"
        assert judged["paid_cost_usd"] < judged["paid_list_cost_usd"]
    else:
        theirs = _litellm_cost("anthropic/claude-opus-4-5", sent)
        assert judged["paid_cost_usd"] == pytest.approx(theirs, rel=0.01)
        assert judged["paid_cost_usd"] < judged["paid_list_cost_usd"]
