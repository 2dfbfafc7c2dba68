"""Dollars as the provider bills them: prompt tokens its cache read or wrote, taken from each
reply's usage (OpenAI's and Anthropic's shapes, through litellm, over real HTTP to the fakes),
kept with the call and in the stage rows, and priced at the cache prices of litellm's map: within
1 % of litellm's own cost of the same reply."""

from __future__ import annotations

import asyncio
import json

import litellm
import polars as pl
import pytest

from fake_anthropic_batches import FakeAnthropic
from fake_openai import FakeOpenAI, Reply
from proactflow.cache.calls import CallCache
from proactflow.config.settings import Generation, ModelRole, RunSettings, RuntimeOptions
from proactflow.providers.billing import Tokens, billed_cost, cache_tokens_of, list_cost
from proactflow.providers.llm import ChatClient, ChatRequest
from proactflow.run.pipeline import StageReport
from proactflow.run.records import usage_and_cost
from proactflow.suites.proactbench.tables import ResponseRow
from schemas.arrow import conform

FAST = RuntimeOptions(retry_base_delay_s=0.01, max_attempts=2)
LONG_PROMPT = " ".join(f"w{i}" for i in range(3000))  # the fakes count a word as a token
KEY = "sk-ant-fake-key"


def ask(role: ModelRole, calls: CallCache):
    client = ChatClient(role, calls, FAST)
    outcome = asyncio.run(client.call(ChatRequest.build(role, [("user", LONG_PROMPT)])))
    return outcome, client.stats


def litellm_cost_of_the_same_reply(model: str, base: str, api_key: str) -> tuple[float, object]:
    """litellm's own price of a reply the same fake sends (its completion_cost)."""
    response = asyncio.run(litellm.acompletion(
        model=model, api_base=base, api_key=api_key, max_tokens=16, max_retries=0,
        messages=[{"role": "user", "content": LONG_PROMPT}]))
    return litellm.completion_cost(completion_response=response, model=model), response.usage


def test_openai_cached_tokens_are_stored_and_priced_as_billed(tmp_path):
    reply = Reply(content="four words of reply", cached_tokens=2048)
    with FakeOpenAI({"gpt-4o-mini": lambda _: reply}) as fake:
        role = ModelRole(model="openai/gpt-4o-mini", api_base=fake.url,
                         generation=Generation(temperature=0.0, max_tokens=16, top_p=None))
        outcome, stats = ask(role, CallCache(tmp_path / "calls"))
        again, _ = ask(role, CallCache(tmp_path / "calls"))
        theirs, usage = litellm_cost_of_the_same_reply("openai/gpt-4o-mini", fake.url, "k")
    assert (outcome.prompt_tokens, outcome.cache_read_tokens, outcome.cache_write_tokens) == \
        (3000, 2048, 0)
    assert outcome.record()["cache_read_tokens"] == 2048
    assert again.from_cache and again.cache_read_tokens == 2048  # read back from the cache
    assert (stats.paid_prompt_tokens, stats.paid_cache_read_tokens) == (3000, 2048)
    assert cache_tokens_of(usage) == (2048, 0)
    ours = billed_cost(role.model, Tokens(3000, 4, 2048, 0))
    assert ours == pytest.approx(theirs, rel=0.01)
    full = list_cost(role.model, Tokens(3000, 4, 2048, 0))
    assert ours is not None and full is not None and ours < full  # cached reads cost less


def test_anthropic_cache_reads_and_writes_are_stored_and_priced_as_billed(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", KEY)
    fake = FakeAnthropic({"claude-sonnet-4-5": lambda _: Reply(content="four words of reply")},
                         api_key=KEY)
    fake.cache_usage = lambda params: {"cache_read_input_tokens": 2048,
                                       "cache_creation_input_tokens": 700}
    with fake:
        role = ModelRole(model="anthropic/claude-sonnet-4-5", api_base=fake.url,
                         api_key_env="FAKE_ANTHROPIC_KEY",
                         generation=Generation(temperature=0.0, max_tokens=16, top_p=None))
        outcome, stats = ask(role, CallCache(tmp_path / "calls"))
        theirs, _ = litellm_cost_of_the_same_reply(role.model, fake.url, KEY)
    # litellm's prompt_tokens count the cached parts too (Anthropic's input_tokens do not).
    assert (outcome.prompt_tokens, outcome.cache_read_tokens, outcome.cache_write_tokens) == \
        (3000 + 2048 + 700, 2048, 700)
    assert (stats.paid_cache_read_tokens, stats.paid_cache_write_tokens) == (2048, 700)
    ours = billed_cost(role.model, Tokens(outcome.prompt_tokens, outcome.completion_tokens or 0,
                                          2048, 700))
    assert ours == pytest.approx(theirs, rel=0.01)


def test_batch_and_cache_discounts_multiply():
    tokens = Tokens(prompt=10_000, completion=100, cache_read=6_000, cache_write=2_000)
    from litellm.cost_calculator import batch_cost_calculator
    from litellm.types.utils import PromptTokensDetailsWrapper, Usage

    usage = Usage(prompt_tokens=10_000, completion_tokens=100, total_tokens=10_100,
                  prompt_tokens_details=PromptTokensDetailsWrapper(
                      cached_tokens=6_000, cache_creation_tokens=2_000))
    # A model whose map has batch cache prices: litellm's batch cost of the same usage.
    theirs = sum(batch_cost_calculator(usage, "anthropic/claude-sonnet-4-5"))
    assert billed_cost("anthropic/claude-sonnet-4-5", tokens, batch=True) == \
        pytest.approx(theirs, rel=0.01)
    # One without: its cache read price, halved like its input price.
    info = litellm.model_cost["gpt-4o-mini"]
    expected = (2_000 * info["input_cost_per_token_batches"]
                + 6_000 * info["cache_read_input_token_cost"] / 2
                + 2_000 * info["input_cost_per_token_batches"]
                + 100 * info["output_cost_per_token_batches"])
    assert billed_cost("openai/gpt-4o-mini", tokens, batch=True) == pytest.approx(expected)
    assert billed_cost("openai/not-a-priced-model", tokens) is None


def _frame(**columns) -> pl.DataFrame:
    return pl.DataFrame({"prompt_tokens": [3000, 1000], "completion_tokens": [4, 4], **columns})


def test_the_run_record_prices_cached_tokens_and_reads_tables_stored_before():
    role = {"model": "openai/gpt-4o-mini"}
    settings = RunSettings(model_under_test=role, judge=role)
    report = StageReport("responses", "k", False, True, 1.0, 2, {
        "paid_prompt_tokens": 3000, "paid_completion_tokens": 4,
        "paid_cache_read_tokens": 2048, "paid_cache_write_tokens": 0})
    usage = usage_and_cost(settings, _frame(cache_read_tokens=[2048, None]), _frame(),
                           [report])
    generation, judge = usage["model_under_test"], usage["judge"]
    assert (generation["paid_cache_read_tokens"], generation["cache_read_tokens"]) == \
        (2048, 2048)
    assert generation["paid_cost_usd"] == pytest.approx(
        billed_cost("openai/gpt-4o-mini", Tokens(3000, 4, 2048)))
    assert generation["paid_cost_usd"] < generation["paid_list_cost_usd"]
    # A judgments table stored before the columns existed: nothing cached, list price.
    assert judge["cache_read_tokens"] == 0
    assert judge["estimated_cost_usd"] == pytest.approx(
        list_cost("openai/gpt-4o-mini", Tokens(4000, 8)))


def test_the_summary_says_how_many_prompt_tokens_were_cached(capsys):
    from proactflow.cli.running import print_usage

    used = {"model": "m", "prompt_tokens": 7316, "completion_tokens": 90,
            "cache_read_tokens": 2048, "cache_write_tokens": 0, "estimated_cost_usd": 0.5,
            "paid_prompt_tokens": 7316, "paid_completion_tokens": 90,
            "paid_cache_read_tokens": 2048, "paid_cache_write_tokens": 0,
            "paid_cost_usd": 0.5, "paid_list_cost_usd": 0.75}
    print_usage({"judge": used})
    assert "paid this run 7316 prompt (2048 cached) + 90 completion tokens, $0.5000 " \
           "(list price $0.7500); results worth 7316 (2048 cached) + 90 tokens" \
           in capsys.readouterr().out


def test_a_table_stored_before_the_cache_columns_still_conforms():
    row = ResponseRow(unique_id_eval="d", turn=1, phase="EMERGENT", sample_index=0, model="m",
                      status="ok", message=None, response="hi", finish_reason="stop",
                      prompt_tokens=10, completion_tokens=1, latency_s=0.1, attempts=1,
                      request_key="k")
    old = pl.DataFrame([row.model_dump()]).drop("cache_read_tokens", "cache_write_tokens")
    table = conform(old, ResponseRow)
    assert table.column("cache_read_tokens").to_pylist() == [None]
    assert table.column("prompt_tokens").to_pylist() == [10]


# Prompt caching asked for (--prompt-cache): the hints go on the wire, never into the key.

SYSTEM = "You judge replies. " * 300  # about 1,400 tokens: above Anthropic's minimum


def judge_like(role: ModelRole, group: str = "judge:t") -> ChatRequest:
    from proactflow.providers.prompt_cache import CacheHint

    return ChatRequest.build(role, [("system", SYSTEM), ("user", "the dialogue")],
                             cache=CacheHint(group))


def test_the_anthropic_request_carries_its_breakpoint_and_the_key_ignores_it(tmp_path,
                                                                            monkeypatch):
    monkeypatch.setenv("FAKE_ANTHROPIC_KEY", KEY)
    fake = FakeAnthropic({"claude-sonnet-4-5": lambda _: Reply(content="ok")}, api_key=KEY)
    role = ModelRole(model="anthropic/claude-sonnet-4-5", api_base="http://127.0.0.1:9",
                     api_key_env="FAKE_ANTHROPIC_KEY",
                     generation=Generation(temperature=0.0, max_tokens=16, top_p=None))
    hinted = judge_like(role)
    plain = ChatRequest.build(role, [("system", SYSTEM), ("user", "the dialogue")])
    assert hinted.key == plain.key  # yesterday's stored answers are found
    with fake:
        role = role.model_copy(update={"api_base": fake.url})
        calls = CallCache(tmp_path / "calls")
        off = RuntimeOptions(retry_base_delay_s=0.01, prompt_cache="off")
        first = asyncio.run(ChatClient(role, calls, off).call(judge_like(role)))
        assert "cache_control" not in json.dumps(fake.interactive_bodies[-1])
        # With prompt caching, the answer stored without it is read: no call.
        again = asyncio.run(ChatClient(role, calls, FAST).call(judge_like(role)))
        assert again.from_cache and again.content == first.content
        assert sum(fake.interactive_calls.values()) == 1
        asyncio.run(ChatClient(role, CallCache(tmp_path / "other"), FAST).call(
            judge_like(role)))
    body = fake.interactive_bodies[-1]
    assert body["system"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["system"][-1]["text"] == SYSTEM  # the protocol's text, unchanged
    assert "cache_control" not in json.dumps(body["messages"])  # the user's part is not shared


def test_breakpoints_keep_to_anthropics_limits():
    from proactflow.providers.prompt_cache import CacheHint, anthropic_breakpoints

    turns = [("user" if i % 2 == 0 else "assistant", "word " * 100) for i in range(120)]
    messages = [("system", SYSTEM), *turns]
    marks = anthropic_breakpoints("anthropic/claude-sonnet-4-5", messages,
                                  CacheHint("dialogue:d", shared=100))
    assert len(marks) == 4 and marks[0] == 0 and marks[-1] == 99
    assert all(later - earlier <= 20 for earlier, later in zip(marks[1:], marks[2:]))
    short = [("system", "brief"), ("user", "hello")]
    assert anthropic_breakpoints("anthropic/claude-sonnet-4-5", short,
                                 CacheHint("judge:t")) == []  # under the minimum: none
    # Haiku's minimum is higher: a 1,400-token system prompt is not worth a breakpoint there.
    assert anthropic_breakpoints("anthropic/claude-3-5-haiku-latest", messages[:2],
                                 CacheHint("judge:t")) == []


def test_breakpoints_count_an_images_blocks_and_may_end_on_one():
    """A video step's user turn holds a block per frame: breakpoints stay within Anthropic's
    20 blocks of each other, and a turn of frames alone (no subtitle) takes one."""
    import io

    from PIL import Image

    from proactflow.providers.content import ImagePart
    from proactflow.providers.prompt_cache import CacheHint, _blocks, anthropic_breakpoints

    buffer = io.BytesIO()
    Image.new("RGB", (64, 64)).save(buffer, "PNG")
    frames = (ImagePart.of(buffer.getvalue()),) * 5
    messages = [("system", SYSTEM)]
    for step in range(12):
        messages += [("user", frames), ("assistant", f"said {step}")]
    messages.append(("user", frames))
    marks = anthropic_breakpoints("anthropic/claude-sonnet-4-5", messages,
                                  CacheHint("video:e", shared=len(messages), chain=True))
    assert marks[0] == 0 and marks[-1] == len(messages) - 1 and len(marks) == 4
    for earlier, later in zip(marks[1:], marks[2:]):
        assert sum(_blocks(content) for _, content in messages[earlier + 1:later + 1]) <= 20


def test_prompt_cache_key_goes_to_openai_only():
    from proactflow.providers.prompt_cache import CacheHint, with_hints

    wire = [{"role": "user", "content": "hi"}]
    hint = CacheHint("dialogue:d1")
    protocol = [("user", "hi")]
    assert with_hints("openai/gpt-4o-mini", None, wire, protocol, hint, "auto")[1] == \
        {"prompt_cache_key": "dialogue:d1"}
    # A server of its own (llama.cpp, vLLM, a fake) may refuse a parameter it does not know.
    assert with_hints("openai/gpt-4o-mini", "http://127.0.0.1:8080/v1", wire, protocol, hint,
                      "auto") == (wire, {})
    assert with_hints("openai/gpt-4o-mini", None, wire, protocol, hint, "off") == (wire, {})
    assert with_hints("gemini/gemini-2.5-flash", None, wire, protocol, hint, "auto") == \
        (wire, {})


def test_status_says_what_a_stage_cost_as_billed():
    from proactflow.run.preflight import worth_line

    line = worth_line("openai/gpt-4o-mini", _frame(cache_read_tokens=[2048, 0]))
    cost = billed_cost("openai/gpt-4o-mini", Tokens(4000, 8, 2048))
    assert line.split() == ["worth", f"${cost:.4f}", "as", "billed:", "4000", "prompt",
                            "(2048", "cached)", "+", "8", "completion", "tokens"]


def test_the_plan_prices_the_prefixes_the_providers_cache_can_serve(fake, tmp_path, capsys,
                                                                   shared_data):
    """Each judge call after the first sends the judge's system prompt (about 1,050 tokens,
    above the providers' minimum of 1,024) again: the plan prices it at the cache price too."""
    from helpers import cli_args, run_cli
    from replay import SHARED_JUDGE_PROMPT, synthetic_judge

    fake.responders["gpt-4o-mini"] = synthetic_judge
    args = cli_args(fake, tmp_path / "store", judge_model="openai/gpt-4o-mini",
                    extra=("--limit", "2", "--dry-run", "--judge-prompt",
                           str(SHARED_JUDGE_PROMPT)))
    assert run_cli("run", args) == 0
    printed = capsys.readouterr().out.splitlines()
    judging = next(line for line in printed if line.startswith("  judging:"))
    generation = next(line for line in printed if line.startswith("  generation:"))
    assert "prompt cache" not in generation  # the tests' dialogues are below the minimum
    prompt = int(judging.split("~")[1].split()[0].replace(",", ""))
    cacheable = int(judging.split("with ~")[1].split()[0].replace(",", ""))
    assert "judging     openai/gpt-4o-mini: 6 calls, 0 cached, 6 to make" in printed
    assert cacheable == 5 * (len(SHARED_JUDGE_PROMPT.read_text(encoding="utf-8")) // 4)
    low = float(judging.split("; $")[1].split()[0])
    assert low == pytest.approx(billed_cost("openai/gpt-4o-mini", Tokens(prompt, 0, cacheable)),
                                abs=0.005)


def test_the_sweeps_costs_are_as_billed_with_the_list_price_beside():
    from proactflow.flows.sweep import _cost_lines

    def used(paid: float, listed: float, read: int) -> dict:
        return {"model_under_test": {
            "model": "openai/gpt-4o-mini", "prompt_tokens": 5000, "completion_tokens": 10,
            "cache_read_tokens": read, "estimated_cost_usd": paid, "paid_cost_usd": paid,
            "paid_cache_read_tokens": read, "paid_list_cost_usd": listed}}

    line, = _cost_lines([used(0.5, 1.0, 2048), used(0.25, 0.5, 1024)])
    assert line == ("- model under test: 10000 prompt (3072 cached) + 20 completion tokens, "
                    "estimated cost $0.75; paid this sweep $0.75 (3072 prompt tokens cached; "
                    "list price $1.50)")
    # A run whose price is unknown makes the sum unknown; a record from before the cache
    # counts has no list price of its own: its paid cost was the list price.
    old = {"model_under_test": {"model": "m", "prompt_tokens": 1, "completion_tokens": 1,
                                "estimated_cost_usd": 0.25, "paid_cost_usd": 0.25}}
    line, = _cost_lines([used(0.5, 1.0, 2048), old])
    assert line.endswith("paid this sweep $0.75 (2048 prompt tokens cached; list price $1.25)")
    line, = _cost_lines([used(0.5, 1.0, 0), {"model_under_test": {
        **old["model_under_test"], "paid_cost_usd": "unknown"}}])
    assert line.endswith("paid this sweep unknown")


def test_an_openai_batch_line_carries_the_prompt_cache_key():
    """A batch line is the chat completions body: OpenAI takes `prompt_cache_key` there too."""
    from proactflow.batches.transport import BatchTransport
    from proactflow.providers.prompt_cache import CacheHint, with_hints

    wire = [{"role": "user", "content": "hi"}]
    messages, hints = with_hints("openai/gpt-4o-mini", None, wire, [("user", "hi")],
                                 CacheHint("judge:t"), "auto")
    body = BatchTransport.body({"model": "openai/gpt-4o-mini", "messages": messages,
                                "max_tokens": 5, "timeout": 30, **hints})
    assert body["prompt_cache_key"] == "judge:t" and body["messages"] == wire
    assert "timeout" not in body
