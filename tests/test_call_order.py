"""The order of a run's calls lets the provider's prompt cache work: a dialogue's trigger goes
out after the one before it was answered, a judge's calls after its first on the template and
its first on the trigger; measured on a fake that caches prefixes only once their call is
answered (tests/fake_billing.py), the run gets at least 80 % of the cached tokens an ideal
order gets."""

from __future__ import annotations

import asyncio

from fake_billing import BillingFake
from helpers import cli_args, run_cli
from proactflow.providers.prompt_cache import CacheHint, CallOrder
from replay import scaled_corpus, synthetic_judge, synthetic_model


def _gone_out(order: CallOrder, hints: list[CacheHint | None], answered: list[int]
              ) -> list[int]:
    """Which of the calls (entered in order) go out once the calls in `answered` are."""

    async def scenario() -> list[int]:
        turns = [order.enter(hint) for hint in hints]
        waiting = [asyncio.ensure_future(turn.wait()) for turn in turns]
        for index in answered:
            turns[index].done()
        for _ in range(len(hints) * 4):  # every wait that can end has ended
            await asyncio.sleep(0)
        out = [index for index, task in enumerate(waiting) if task.done()]
        for task in waiting:
            task.cancel()
        return out

    return asyncio.run(scenario())


def test_a_dialogues_trigger_goes_out_once_the_one_before_it_was_answered():
    dialogue = CacheHint("dialogue:d", shared=3, chain=True)
    other = CacheHint("dialogue:e", shared=3, chain=True)
    hints = [dialogue, dialogue, other, dialogue]
    assert _gone_out(CallOrder(), hints, answered=[]) == [0, 2]
    # The third trigger waits for the second, not only for the first (it extends the second).
    assert _gone_out(CallOrder(), hints, answered=[0]) == [0, 1, 2]
    assert _gone_out(CallOrder(), hints, answered=[0, 1]) == [0, 1, 2, 3]


def test_a_judges_calls_go_out_after_the_first_on_their_template_and_on_their_trigger():
    on = [CacheHint("judge:t", subgroup=trigger) for trigger in ("a", "a", "b", "b")]
    assert _gone_out(CallOrder(), on, answered=[]) == [0]
    assert _gone_out(CallOrder(), on, answered=[0]) == [0, 1, 2]  # b's first now
    assert _gone_out(CallOrder(), on, answered=[0, 2]) == [0, 1, 2, 3]
    # Without a hint (--prompt-cache off, a batch) nothing waits.
    assert _gone_out(CallOrder(), [None, None], answered=[]) == [0, 1]


def test_a_runs_order_gets_most_of_the_cached_tokens_an_ideal_order_gets(tmp_path):
    corpus, answerable = scaled_corpus(tmp_path, 6)
    # The tests' corpus is small: a small cache (blocks of 8 tokens from 32 on) makes its
    # prompts cacheable; latency lets calls overlap, as at a provider.
    fake = BillingFake({"gen": synthetic_model, "judge": synthetic_judge}, latency=0.05,
                       minimum=32, block=8)
    with fake:
        assert run_cli("run", cli_args(fake, tmp_path / "store", corpus=corpus,
                                       extra=("--concurrency", "16"))) == 0
    assert fake.calls["gen"] == answerable
    for model in ("gen", "judge"):
        got, ideal = fake.cached[model], fake.ideal_cached[model]
        print(f"{model}: {got} of the {ideal} cached prompt tokens an ideal order gets "
              f"({got / ideal:.0%}); {fake.prompt[model]} prompt tokens")
        assert ideal > 0 and got >= 0.8 * ideal
