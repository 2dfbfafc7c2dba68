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


def test_a_reply_is_stamped_for_logging_only_when_a_callback_listens(monkeypatch):
    """Through litellm over HTTP: inside the edge with nobody listening, the reply is not
    stamped for the loggers (nor dispatched to them); a callback registered gets both back."""
    import asyncio

    import litellm
    from litellm.integrations.custom_logger import CustomLogger

    from fake_openai import FakeOpenAI, Reply

    litellm_costs.install()
    with FakeOpenAI({"m": lambda _: Reply(content="fine")}) as fake:
        async def ask():
            with litellm_costs.priced_per_stage():
                return await litellm.acompletion(
                    model="openai/m", api_base=fake.url, api_key="no-key", max_retries=0,
                    messages=[{"role": "user", "content": "hi"}])

        unheard = asyncio.run(ask())
        monkeypatch.setattr(litellm, "callbacks", [CustomLogger()])
        heard = asyncio.run(ask())
    assert unheard.choices[0].message.content == heard.choices[0].message.content == "fine"
    assert unheard.usage == heard.usage and unheard.model == heard.model
    assert "litellm_overhead_time_ms" not in (unheard._hidden_params or {})
    assert "litellm_overhead_time_ms" in heard._hidden_params
