"""litellm's per-reply cost calculation is skipped for calls of proactflow's edge only."""

from __future__ import annotations

from litellm.litellm_core_utils.litellm_logging import Logging

from proactflow.providers import litellm_costs


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


def test_success_logging_is_skipped_inside_the_edge_only_while_no_callback_wants_it(monkeypatch):
    import asyncio

    import litellm

    ran = []

    async def litellms_handler(self, *args, **kwargs):
        ran.append(kwargs.get("result"))

    monkeypatch.setattr(Logging, "response_cost_calculator", lambda self, **kwargs: 1.5)
    monkeypatch.setattr(Logging, "async_success_handler", litellms_handler)
    litellm_costs.install()
    logging_object = object.__new__(Logging)

    async def log(result):
        await logging_object.async_success_handler(result=result)

    asyncio.run(log("outside"))
    with litellm_costs.priced_per_stage():
        asyncio.run(log("inside, no callback"))
        monkeypatch.setattr(litellm, "success_callback", ["langfuse"])
        asyncio.run(log("inside, a global callback"))
        monkeypatch.setattr(litellm, "success_callback", [])
        logging_object.dynamic_async_success_callbacks = ["custom"]
        asyncio.run(log("inside, a callback of the call"))
    assert ran == ["outside", "inside, a global callback", "inside, a callback of the call"]
