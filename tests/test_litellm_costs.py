"""litellm's per-reply cost calculation is skipped for calls of proactflow's edge only."""

from __future__ import annotations

from litellm.litellm_core_utils.litellm_logging import Logging

from proactflow import litellm_costs


def test_the_calculator_is_litellms_own_outside_the_edge_and_skipped_inside(monkeypatch):
    calls = []

    def litellms_calculator(self, *args, **kwargs):
        calls.append(kwargs)
        return 1.5

    monkeypatch.setattr(Logging, "response_cost_calculator", litellms_calculator)
    litellm_costs.install()
    wrapper = Logging.response_cost_calculator
    litellm_costs.install()  # once per process: no wrapper around the wrapper
    assert Logging.response_cost_calculator is wrapper
    logging_object = object.__new__(Logging)
    assert logging_object.response_cost_calculator(result=None) == 1.5  # anyone else's call
    with litellm_costs.priced_per_stage():
        assert logging_object.response_cost_calculator(result=None) is None
    assert logging_object.response_cost_calculator(result=None) == 1.5  # and after
    assert len(calls) == 2
