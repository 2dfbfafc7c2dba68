"""The gateway tier: the litellm proxy (litellm_proxy.py, from its own virtualenv) with a master
key and a requests-per-minute limit of its model, no database, in front of the llama.cpp tier's
server (llama_server.py). What reached the model is read at the recording proxy between the
gateway and llama.cpp's server, so "no answered request reached the model again" is measured there.

Without the llama extra or the proxy's virtualenv (`python tests/litellm_proxy.py` builds it)
the tier skips with the reason; under CI=true (where .ci/run installs both) it fails instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from helpers import run_cli
from replay import JUDGE_PROMPT, SAMPLE_CORPUS

# The first test also starts llama.cpp's server and the proxy (minutes on a loaded machine).
pytestmark = pytest.mark.timeout(900)

RPM = 2
"""The model's own limit at the gateway: a run of one dialogue (its triggers, their judgments)
meets it."""
KEY_VARIABLE = "PROACTFLOW_TEST_GATEWAY_KEY"
NO_BATCH_API = "/batches answered HTTP 500 twice"
"""What the probe says of the proxy without files settings: measured on litellm 1.110.2, its
batches route answers a bare "Internal Server Error" (its files routes name files_settings only
on an upload, which the probe never makes)."""


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":  # .ci/run builds both
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def gateway(tmp_path_factory):
    try:
        import gguf  # noqa: F401
        import llama_cpp.server  # noqa: F401
    except ImportError as exc:
        _unavailable(f"needs the llama extra ({exc}): pip install -c "
                     "requirements.lock -e '.[llama]' (builds for about 10 minutes)")
    from litellm_proxy import LitellmProxy, ProxyUnavailable, installed
    from llama_model import write_model
    from llama_server import LlamaServer, LlamaUnavailable

    reason = installed()
    if reason is not None:
        _unavailable(f"needs the litellm proxy: {reason}")
    folder = tmp_path_factory.mktemp("gateway")
    try:
        llama = LlamaServer({"tiny": write_model(folder / "tiny.gguf")}, folder).start()
    except LlamaUnavailable as exc:
        _unavailable(str(exc))
    try:
        proxy = LitellmProxy(llama.api_base, ["tiny"], folder, rpm=RPM).start()
    except ProxyUnavailable as exc:
        llama.stop()
        _unavailable(str(exc))
    proxy.llama = llama
    yield proxy
    proxy.stop()
    llama.stop()


@pytest.fixture
def master_key(monkeypatch):
    from litellm_proxy import MASTER_KEY

    monkeypatch.setenv(KEY_VARIABLE, MASTER_KEY)


def _args(gateway, tmp_path: Path, *extra: str, model: str = "openai/tiny") -> list[str]:
    return ["--eval-model", model, "--eval-api-base", gateway.api_base,
            "--eval-api-key-env", KEY_VARIABLE,
            "--judge-model", "openai/tiny", "--judge-api-base", gateway.api_base,
            "--judge-api-key-env", KEY_VARIABLE,
            "--corpus", str(SAMPLE_CORPUS), "--judge-prompt", str(JUDGE_PROMPT),
            "--store", str(tmp_path / "store"), *extra]


def _chat_since(gateway, start: int) -> list:
    return [e for e in gateway.llama.proxy.exchanges[start:]
            if e.path.endswith("/chat/completions")]


def _an_answer(reply: str) -> bool:
    """Whether a chat completion's reply is one a run keeps: text that ended of itself."""
    try:
        [choice] = json.loads(reply)["choices"]
    except (ValueError, KeyError, TypeError):
        return False
    return choice.get("finish_reason") == "stop" and bool(
        (choice.get("message") or {}).get("content", "").strip())


def _identity(body: dict | None) -> str:
    return json.dumps(body, sort_keys=True)


def test_a_rate_limited_run_completes_and_sends_no_answered_request_again(
        gateway, master_key, tmp_path, capsys):
    start = len(gateway.llama.proxy.exchanges)
    # One judge call per response: the tiny model's replies are noise, and a reply that is not
    # a verdict is asked again by design (--judge-attempts); what is measured here is that a
    # 429 from the gateway never makes a request reach the model twice.
    code = run_cli("run", _args(gateway, tmp_path, "--limit", "1", "--concurrency", "4",
                                "--retry-delay", "1", "--max-attempts", "10",
                                "--judge-attempts", "1"))
    said = capsys.readouterr()
    chat = _chat_since(gateway, start)
    assert chat and code in (0, 1), said.err[-2000:]
    # The gateway's 429s never reach the model, so a request the model sees again must follow a
    # failure of the model itself (llama.cpp's server answers HTTP 500 "llama_decode returned 1"
    # when requests in flight fill its context), which a run rightly retries.
    statuses: dict[str, list[int]] = {}
    for exchange in chat:
        statuses.setdefault(_identity(exchange.body), []).append(exchange.status)
    resent = [seen for seen in statuses.values() if len(seen) > 1]
    assert all(200 not in seen[:-1] for seen in resent), resent
    log = (Path(gateway.workdir) / "litellm-proxy.log").read_text(errors="replace")
    print(f"figures: {len(chat)} requests reached the model; the gateway's log mentions a "
          f"rate limit {log.count('429')} times")
    # A re-run pays nothing that was answered: only what the first run could not use (the tiny
    # model's replies are often cut at its context) is asked again.
    answered = {_identity(e.body) for e in chat if e.status == 200 and _an_answer(e.reply)}
    assert run_cli("run", _args(gateway, tmp_path, "--limit", "1", "--judge-attempts", "1")) \
        == code
    again = {_identity(e.body) for e in _chat_since(gateway, start + len(chat))}
    assert not again & answered


def test_batch_auto_through_the_gateway_runs_interactively_with_its_reason(
        gateway, master_key, tmp_path, capsys):
    start = len(gateway.llama.proxy.exchanges)
    code = run_cli("run", _args(gateway, tmp_path, "--limit", "1", "--batch", "auto",
                                "--max-attempts", "10", "--retry-delay", "1"))
    out = capsys.readouterr().out
    batch_lines = [line for line in out.splitlines() if line.startswith("batch ")]
    assert len(batch_lines) == 2 and all("interactive" in line and NO_BATCH_API in line
                                         for line in batch_lines), batch_lines
    assert code in (0, 1) and _chat_since(gateway, start)
    assert run_cli("status", _args(gateway, tmp_path, "--limit", "1", "--batch", "auto")) == 0
    assert "pending" not in capsys.readouterr().out


def test_forced_batch_through_the_gateway_stops_with_its_own_sentence(
        gateway, master_key, tmp_path, capsys):
    start = len(gateway.llama.proxy.exchanges)
    assert run_cli("run", _args(gateway, tmp_path, "--limit", "1", "--batch")) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert NO_BATCH_API in line and f"127.0.0.1:{gateway.port}" in line
    assert _chat_since(gateway, start) == []


def test_a_wrong_key_stops_with_one_line_before_paying(gateway, tmp_path, capsys,
                                                       monkeypatch):
    monkeypatch.setenv(KEY_VARIABLE, "sk-wrong")
    start = len(gateway.llama.proxy.exchanges)
    assert run_cli("run", _args(gateway, tmp_path, "--limit", "1")) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "No connected db" in line or "key" in line
    assert _chat_since(gateway, start) == []


def test_an_unknown_model_stops_with_one_line_naming_the_served_ones(
        gateway, master_key, tmp_path, capsys):
    start = len(gateway.llama.proxy.exchanges)
    assert run_cli("run", _args(gateway, tmp_path, "--limit", "1",
                                model="openai/nosuch")) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert "nosuch" in line and "tiny" in line
    assert _chat_since(gateway, start) == []
