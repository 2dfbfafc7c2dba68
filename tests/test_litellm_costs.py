"""litellm's per-reply cost calculation and success logging are skipped for calls of
proactflow's edge only, on the litellm installed (its internals checked against what the patches
rely on), and skipped with one warning on a litellm whose internals differ."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import types

import litellm
import litellm.utils

from proactflow.providers import litellm_costs
from proactflow.providers.litellm_setup import set_up_litellm

CALLBACK_LISTS = ("callbacks", "success_callback", "_async_success_callback",
                  "failure_callback", "_async_failure_callback")


def keep_callbacks(monkeypatch) -> None:
    """litellm copies a callback registered in `callbacks` into its other lists when called:
    each list is put back after the test, so that no later test has a listener."""
    for name in CALLBACK_LISTS:
        if isinstance(getattr(litellm, name, None), list):
            monkeypatch.setattr(litellm, name, list(getattr(litellm, name)))


def test_the_installed_litellm_has_every_internal_the_patches_and_batches_touch():
    from litellm.litellm_core_utils.litellm_logging import Logging
    from litellm.litellm_core_utils.llm_response_utils import convert_dict_to_response

    set_up_litellm()  # wrapped or not, the signatures read are litellm's own
    assert litellm_costs.contract_problems(litellm) == []
    expected = {
        Logging.response_cost_calculator: ["self", "result", "cache_hit", "litellm_model_name",
                                           "router_model_id", "ignore_stamped_cost"],
        Logging.async_success_handler: ["self", "result", "start_time", "end_time",
                                        "cache_hit", "kwargs"],
        litellm.utils.dispatch_success_logging: [
            "logging_obj", "result", "start_time", "end_time", "is_completion_with_fallbacks",
            "is_litellm_internal_call"],
        litellm.utils.update_response_metadata: [
            "result", "logging_obj", "model", "kwargs", "start_time", "end_time",
            "include_overhead", "cache_hit"],
        # batches/transport.py turns a batch line's body into litellm's reply with it.
        convert_dict_to_response.convert_to_model_response_object: [
            "response_object", "model_response_object", "response_type", "stream",
            "start_time", "end_time", "hidden_params", "_response_headers",
            "convert_tool_call_to_json_mode"],
    }
    for function, names in expected.items():
        assert list(inspect.signature(function).parameters) == names, function
    for name in litellm_costs.READ:
        assert isinstance(getattr(litellm, name), list), name
    assert getattr(Logging.response_cost_calculator, "__proactflow__", False)  # installed


def test_a_litellm_without_those_internals_is_left_alone_with_one_warning(caplog):
    """A stand-in litellm module lacking them: nothing is wrapped, one warning line, and
    asking again warns no more; calls then cost litellm's own CPU."""
    stand_in = types.ModuleType("litellm")
    stand_in.__version__ = "9.9.9"  # type: ignore[attr-defined]
    stand_in.utils = types.SimpleNamespace(  # type: ignore[attr-defined]
        update_response_metadata=lambda result, logging_obj: None)
    stand_in.callbacks = []  # type: ignore[attr-defined]
    before = dict(vars(stand_in))
    litellm_costs._warned.clear()
    with caplog.at_level(logging.WARNING, logger="proactflow"):
        assert litellm_costs.install(stand_in) is False
        assert litellm_costs.install(stand_in) is False
    warnings = [r.getMessage() for r in caplog.records if r.name == "proactflow"]
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert "9.9.9" in warnings[0] and "dispatch_success_logging" in warnings[0]
    assert dict(vars(stand_in)) == before
    with litellm_costs.priced_per_stage():  # the edge's context still works around calls
        pass


def test_litellm_prices_a_reply_outside_the_edge_and_not_inside(monkeypatch):
    """Through litellm over HTTP, a callback listening so that the reply is stamped: litellm's
    own cost outside proactflow's edge, none inside (proactflow prices per stage)."""
    from litellm.integrations.custom_logger import CustomLogger

    from fake_openai import FakeOpenAI, Reply

    set_up_litellm()
    keep_callbacks(monkeypatch)
    monkeypatch.setattr(litellm, "callbacks", [CustomLogger()])
    with FakeOpenAI({"gpt-4o-mini": lambda _: Reply(content="fine")}) as fake:
        async def ask(inside: bool):
            with litellm_costs.priced_per_stage() if inside else contextlib.nullcontext():
                return await litellm.acompletion(
                    model="openai/gpt-4o-mini", api_base=fake.url, api_key="no-key",
                    max_retries=0, messages=[{"role": "user", "content": "hi"}])

        outside, inside = asyncio.run(ask(False)), asyncio.run(ask(True))
    assert outside._hidden_params["response_cost"] > 0
    assert "litellm_overhead_time_ms" in inside._hidden_params  # stamped: a callback listens
    assert inside._hidden_params.get("response_cost") is None


def test_a_reply_is_stamped_for_logging_only_when_a_callback_listens(monkeypatch):
    """Through litellm over HTTP: inside the edge with nobody listening, the reply is not
    stamped for the loggers (nor dispatched to them); a callback registered gets both back."""
    from litellm.integrations.custom_logger import CustomLogger

    from fake_openai import FakeOpenAI, Reply

    set_up_litellm()
    keep_callbacks(monkeypatch)
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
