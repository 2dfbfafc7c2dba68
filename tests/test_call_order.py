"""The order of a run's calls lets the provider's prompt cache work: a dialogue's later
triggers go out after its first was answered, a judge's calls after its first on the template,
measured on a fake that caches prefixes only once their call is answered
(tests/fake_billing.py): the run gets at least 80 % of the cached tokens an ideal order gets."""

from __future__ import annotations

import pytest

from fake_billing import BillingFake
from helpers import cli_args, run_cli
from replay import scaled_corpus, synthetic_judge, synthetic_model




# Timing-dependent: one tree gave 57 to 95 % of the ideal in runs on one machine (issue #39).
@pytest.mark.xfail(strict=False, reason="the share depends on when replies arrive")
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
