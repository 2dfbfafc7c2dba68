"""The real-server tier: llama-cpp-python's OpenAI-compatible server (built from its source
package) on loopback, serving tiny llama models the tests write themselves (llama_model.py), with
n_ctx 1024. It is less kind than the fakes: it answers HTTP 500 to response_format json_schema,
400 to a prompt longer than its context, fills its context when a reply does not stop, and takes
image parts as text. Each suite runs end to end through the CLI, and what reached the server is
read from a recording proxy in front of it (llama_server.py).

Without llama-cpp-python (a plain clone) the tier skips with the reason; under CI=true (where
.ci/run installs it) it fails instead.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pytest

from helpers import run_cli
from replay import JUDGE_PROMPT, SAMPLE_CORPUS

REPO = Path(__file__).resolve().parent.parent


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    try:  # the extra's packages: the server, and gguf (with numpy) to write the models
        import gguf  # noqa: F401
        import llama_cpp.server  # noqa: F401
    except ImportError as exc:
        _unavailable(f"needs the llama extra ({exc}): pip install -c "
                     "requirements.lock -e '.[llama]' (builds for about 10 minutes)")
    from llama_model import write_model
    from llama_server import LlamaServer, LlamaUnavailable

    folder = tmp_path_factory.mktemp("llama")
    models = {"tiny": write_model(folder / "tiny.gguf"),
              "talky": write_model(folder / "talky.gguf", talks_on=True)}
    try:
        server = LlamaServer(models, folder).start()
    except LlamaUnavailable as exc:
        _unavailable(str(exc))
    yield server
    server.stop()


def _identity(body: dict | None) -> str:
    return json.dumps(body, sort_keys=True)


def _proactbench(llama, tmp_path, *extra: str) -> list[str]:
    return ["--eval-model", "openai/tiny", "--eval-api-base", llama.api_base,
            "--judge-model", "openai/tiny", "--judge-api-base", llama.api_base,
            "--corpus", str(SAMPLE_CORPUS), "--judge-prompt", str(JUDGE_PROMPT),
            "--store", str(tmp_path / "store"), "--out", str(tmp_path / "out"), *extra]


def _run(llama, args: list[str]) -> tuple[int, list]:
    start = len(llama.proxy.exchanges)
    code = run_cli("run", args)
    return code, llama.proxy.exchanges[start:]


def _is_judge(exchange) -> bool:
    body = exchange.body or {}
    messages = body.get("messages") or []
    return bool(messages) and messages[0].get("role") == "system" \
        and messages[0].get("content") == JUDGE_PROMPT.read_text(encoding="utf-8")


def test_proactbench_judges_after_one_refused_format_and_never_asks_a_refusal_again(
        llama, tmp_path, capsys):
    import logging

    told: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: told.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("proactflow").addHandler(handler)
    args = _proactbench(llama, tmp_path)
    try:
        code, first = _run(llama, args)
    finally:
        logging.getLogger("proactflow").removeHandler(handler)
    said = capsys.readouterr()
    assert "response_format=json_schema" in said.out  # the plan shows what the judge sends
    # /v1/models once per endpoint per run (both roles share the endpoint).
    assert sum(e.path.endswith("/models") for e in first) == 1
    chat = [e for e in first if e.path.endswith("/chat/completions")]
    judge = [e for e in chat if _is_judge(e)]
    assert judge, "the judge was asked"
    formats = [(e.body.get("response_format") or {}).get("type", "none") for e in judge]
    refused_formats = [e for e in chat if e.status != 200 and "json_object" in e.reply]
    # One rejected response_format, the first judge request; every later one sends json_object.
    assert len(refused_formats) == 1 and refused_formats[0] is judge[0]
    assert formats[0] == "json_schema" and set(formats[1:]) == {"json_object"}
    # Said once, in one line (read at the logger: the console's handlers vary in a session).
    assert sum("refuses response_format json_schema" in message for message in told) == 1
    refused = [e for e in chat if e.status in (400, 404, 413, 422)
               or (e.status == 500 and "json_object" in e.reply)]
    assert any(e.status == 400 for e in refused), "some prompt exceeds the context of 1024"

    code_again, second = _run(llama, args)
    asked_again = {_identity(e.body) for e in second if e.path.endswith("/chat/completions")}
    assert not asked_again & {_identity(e.body) for e in refused}
    assert sum(e.path.endswith("/models") for e in second) == 1
    assert code_again == code
    err = capsys.readouterr().err.strip().splitlines()
    if code:
        last = err[-1]
        assert "refused by the server" in last and "a re-run will not ask them again" in last
    # `status` counts the judgments as the summary does.
    phase = pl.read_csv(tmp_path / "out" / "phase_scores.csv", null_values="-").filter(
        pl.col("phase") == "OVERALL").row(0, named=True)
    assert run_cli("status", args) == 0
    status = [line for line in capsys.readouterr().out.splitlines()
              if line.startswith("judgments")][0]
    assert f"{phase['evaluated']} of {phase['triggers']} scored" in status
    assert (f"{phase['refused']} refused" in status) == bool(phase["refused"])


def test_a_reply_that_fills_the_context_says_context(llama, tmp_path):
    args = _proactbench(llama, tmp_path, "--limit", "1")
    args[1] = "openai/talky"
    code, exchanges = _run(llama, args)
    responses = pl.read_parquet(next((tmp_path / "store").rglob("responses/**/*.parquet")))
    truncated = responses.filter(pl.col("status") == "truncated")
    assert truncated.height >= 1
    for message in truncated["message"]:
        assert message.startswith("the reply was cut by the model's context"), message
        assert "max_tokens" not in message.split(":")[0]
    assert code == 1  # nothing scored


def test_proactive_agent_keeps_its_refusals_and_prints_no_rate_of_nothing(
        llama, tmp_path, capsys):
    from test_proactiveagent_suite import DATA

    out = tmp_path / "out"
    # A system prompt longer than the server's context: every event is refused (HTTP 400).
    long_prompt = tmp_path / "long_system_prompt.txt"
    long_prompt.write_text((DATA / "agent_system_prompt.txt").read_text(encoding="utf-8")
                           + "\n" + (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8"),
                           encoding="utf-8")
    args = ["--suite", "proactiveagent", "--corpus", str(DATA),
            "--eval-model", "openai/tiny", "--eval-api-base", llama.api_base,
            "--judge-model", "openai/tiny", "--judge-api-base", llama.api_base,
            "--eval-system-prompt-file", str(long_prompt),
            "--judge-prompt", str(DATA / "reward_system_prompt.txt"),
            "--prompt", f"agent_instruction={DATA / 'agent_step_instruction.txt'}",
            "--prompt", f"judge_instruction={DATA / 'reward_instruction.txt'}",
            "--store", str(tmp_path / "store"), "--out", str(out)]
    code, first = _run(llama, args)
    said = capsys.readouterr()
    chat = [e for e in first if e.path.endswith("/chat/completions")]
    refused = [e for e in chat if e.status in (400, 404, 413, 422)]
    assert refused and all("context" in e.reply for e in refused)
    assert sum(e.path.endswith("/models") for e in first) == 1
    verdicts = pl.read_parquet(next((tmp_path / "store").rglob(
        "proactiveagent_verdicts/**/*.parquet")))
    assert (verdicts["status"] == "refused").sum() >= len({_identity(e.body) for e in refused
                                                          if not _is_judge(e)}) > 0
    assert (verdicts["status"] == "scored").sum() == 0
    assert code == 1  # nothing scored
    table = [line for line in said.out.splitlines() if line.startswith("│")]
    assert table and all("0.0" not in line and " - " in line for line in table)
    last = said.err.strip().splitlines()[-1]
    assert "nothing scored" in last and "a re-run will not ask them again" in last

    code_again, second = _run(llama, args)
    asked_again = {_identity(e.body) for e in second if e.path.endswith("/chat/completions")}
    assert not asked_again & {_identity(e.body) for e in refused}
    assert code_again == code


def test_the_multimodal_suite_refuses_a_text_only_server_before_any_call(
        llama, tmp_path, capsys):
    from mllm_suite_helpers import make_corpus

    corpus, wheel = make_corpus(tmp_path)
    start = len(llama.proxy.exchanges)
    code = run_cli("run", ["--suite", "proactivebench-mllm", "--corpus", str(corpus),
                           "--package", str(wheel), "--eval-model", "openai/tiny",
                           "--eval-api-base", llama.api_base,
                           "--store", str(tmp_path / "store")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert "openai/tiny" in err[-1] and "--eval-vision" in err[-1] and "images" in err[-1]
    assert llama.proxy.exchanges[start:] == []  # not a single request, not even /models


def test_batch_auto_calls_the_server_interactively_and_leaves_nothing_pending(
        llama, tmp_path, capsys):
    # llama.cpp's server has chat completions and no batch API (#36 item 1): the probe reads its
    # batches route once, the plan says why each role is interactive, and status finds nothing
    # pending afterwards.
    args = _proactbench(llama, tmp_path, "--limit", "1", "--batch", "auto")
    code, exchanges = _run(llama, args)
    out = capsys.readouterr().out
    batch_lines = [line for line in out.splitlines() if line.startswith("batch ")]
    assert len(batch_lines) == 2 and all(
        "interactive" in line and "has no batch API" in line and "/batches answered HTTP" in line
        for line in batch_lines), batch_lines
    assert code in (0, 1)
    assert any(e.path.endswith("/chat/completions") for e in exchanges)
    assert not [e for e in exchanges if "/files" in e.path]  # no upload was tried
    assert [e.method for e in exchanges if "/batches" in e.path] == ["GET"]
    assert run_cli("status", args) == 0
    assert "pending" not in capsys.readouterr().out


def test_a_model_the_server_does_not_serve_stops_before_any_call(llama, tmp_path, capsys):
    # The server lists its models (#36 item 2): another name stops the run with one line that
    # names the ones it serves, before a chat request is sent.
    args = _proactbench(llama, tmp_path, "--limit", "1")
    args[1] = "openai/nosuch"
    code, exchanges = _run(llama, args)
    [line] = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and "nosuch" in line and "tiny" in line, line
    assert not [e for e in exchanges if e.path.endswith("/chat/completions")]
