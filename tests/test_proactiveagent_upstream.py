"""The benchmark's files at the pinned commit, exercised offline: a local HTTP server stands in
for raw.githubusercontent.com, serving the project's stand-ins (or ../shared's real files), and
the prompts are read out of stand-in modules shaped like upstream's, which must never run."""

from __future__ import annotations

import hashlib
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from proactflow.common.errors import UserError
from proactflow.suites.proactiveagent.data import read_local_corpus, read_reward_test_set
from proactflow.suites.proactiveagent.upstream import (
    AGENT_MODULE, PROMPT_SHA256, REWARD_MODULE, REWARD_TEST_PATH, SPLITS_PATH, UPSTREAM_COMMIT,
    UPSTREAM_SHA256, UPSTREAM_URL_ENV, extract_string, fetch_upstream_file,
    load_upstream_corpus, load_upstream_prompts, load_upstream_reward_test_set, read_prompt_file)
from ports import reserved_port
from replay import PROJECT_DATA, SHARED

DATA = PROJECT_DATA / "proactiveagent"
REAL = SHARED.parent / "proactiveagent"
ROOT = Path(__file__).resolve().parents[1]


def sha(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def agent_module(system: str, instruction: str) -> str:
    """A module shaped like upstream's runner: the system prompt a top-level string, the step
    instruction a value inside a json.dumps({...}) call."""
    return ("import json\nimport sys\n\nsys.exit('the module must never be executed')\n\n"
            f"SYSTEM = {system!r}\n\nSTEP = json.dumps({{\n    \"Instructions\": "
            f"{instruction!r},\n    \"Observation\": \"[placeholder]\"\n    }})\n")


def reward_module(system: str, instruction: str) -> str:
    """Shaped like upstream's reward template: the instruction inside a function's dict."""
    return (f"import json\nSYSTEM = {system!r}\n\n"
            "def format_reward_instruction(obs, pred_task):\n    inst_dict = {\n"
            "        \"Observations (Time Ascending)\": obs,\n        \"Proposed Task\": pred_task,\n"
            f"        \"Instruction\": {instruction!r}\n    }}\n    return inst_dict\n")


@pytest.fixture
def served(monkeypatch):
    """A local stand-in for raw.githubusercontent.com: path -> bytes, at UPSTREAM_COMMIT only."""
    files: dict[str, bytes] = {}
    hits: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            hits.append(self.path)
            path = self.path.removeprefix(f"/{UPSTREAM_COMMIT}/")
            if path not in files:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Length", str(len(files[path])))
            self.end_headers()
            self.wfile.write(files[path])

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(UPSTREAM_URL_ENV,
                       f"http://127.0.0.1:{server.server_address[1]}/{{commit}}/{{path}}")
    yield files, hits
    server.shutdown()
    server.server_close()


def test_a_file_is_downloaded_checked_and_cached_once(tmp_path, served):
    files, hits = served
    files["dataset/x.json"] = b"[1, 2]"
    assert fetch_upstream_file(tmp_path, "dataset/x.json", sha(b"[1, 2]")) == b"[1, 2]"
    cached = tmp_path / "inputs" / "proactiveagent" / UPSTREAM_COMMIT / "dataset" / "x.json"
    assert cached.read_bytes() == b"[1, 2]"
    assert fetch_upstream_file(tmp_path, "dataset/x.json", sha(b"[1, 2]")) == b"[1, 2]"
    assert len(hits) == 1


def test_a_changed_file_is_refused_and_not_kept(tmp_path, served):
    files, _ = served
    files[SPLITS_PATH] = b'{"real_coding": {"files": []}}'
    with pytest.raises(UserError, match=r"^thunlp/ProactiveAgent@50940be8cdf7:dataset/test_data/"
                                        r"splits.json has sha256 [0-9a-f]{16}\.\.\., expected "
                                        r"8ab113d862e0e521\.\.\.: refusing to use it$"):
        fetch_upstream_file(tmp_path, SPLITS_PATH)
    assert not (tmp_path / "inputs").exists()


def test_a_missing_file_and_no_network_are_one_line(tmp_path, served, monkeypatch):
    with pytest.raises(UserError, match=r"^cannot download .*reward_data/test_data.jsonl from "
                                        r"http://127\.0\.0\.1:\d+/.* \(Not Found\); pass a local "
                                        r"reward test file$"):
        fetch_upstream_file(tmp_path, REWARD_TEST_PATH)
    with reserved_port() as port:
        monkeypatch.setenv(UPSTREAM_URL_ENV, f"http://127.0.0.1:{port}/{{commit}}/{{path}}")
        with pytest.raises(UserError) as caught:
            fetch_upstream_file(tmp_path, AGENT_MODULE)
    assert str(caught.value) == (
        f"cannot download thunlp/ProactiveAgent@50940be8cdf7:eval/script.py (no network: "
        f"127.0.0.1:{port} refused the connection); pass prompt files of your own "
        "(--eval-system-prompt-file, --judge-prompt, --prompt agent_instruction=FILE, "
        "--prompt judge_instruction=FILE), or run once with a network to cache it")


def serve_prompt_modules(files, monkeypatch, system, step, judge_system, judge_step):
    files[AGENT_MODULE] = agent_module(system, step).encode("utf-8")
    files[REWARD_MODULE] = reward_module(judge_system, judge_step).encode("utf-8")
    for path in (AGENT_MODULE, REWARD_MODULE):
        monkeypatch.setitem(UPSTREAM_SHA256, path, sha(files[path]))


def stand_in(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def test_prompts_are_read_out_of_the_modules_and_each_checked(tmp_path, served, monkeypatch):
    files, _ = served
    texts = {"agent_system": stand_in("agent_system_prompt.txt"),
             "step_instruction": stand_in("agent_step_instruction.txt"),
             "reward_system": stand_in("reward_system_prompt.txt"),
             "reward_instruction": stand_in("reward_instruction.txt")}
    serve_prompt_modules(files, monkeypatch, *texts.values())
    for name, text in texts.items():
        monkeypatch.setitem(PROMPT_SHA256, name, sha(text))
    prompts = load_upstream_prompts(tmp_path)
    assert {name: getattr(prompts, name).text for name in texts} == texts
    assert prompts.step_instruction.sha256 == sha(texts["step_instruction"])
    assert prompts.reward_instruction.source == ("thunlp/ProactiveAgent@50940be8cdf7:eval/"
                                                 "reward_model_template.py format_reward_"
                                                 "instruction['Instruction']")
    monkeypatch.setitem(PROMPT_SHA256, "reward_system", sha("another judge"))
    with pytest.raises(UserError, match=r"reward_model_template.py SYSTEM has sha256 .*: "
                                        "refusing to use it$"):
        load_upstream_prompts(tmp_path)


def test_extraction_needs_one_plain_string():
    source = "import os\nos.remove('x')\nA = ('a' 'b')\nB = {'k': 1 + 1}\ndef f():\n  " \
             "return [{'k': 'x'}, {'k': 'y'}]\n"
    assert extract_string(source, "m.py", "A") == "ab"
    with pytest.raises(UserError, match=r"^m.py defines no C$"):
        extract_string(source, "m.py", "C")
    with pytest.raises(UserError, match=r"^m.py: B\['k'\] is not a plain string$"):
        extract_string(source, "m.py", "B", "k")
    with pytest.raises(UserError, match=r"^m.py: f holds 2 dict keys 'k', not one$"):
        extract_string(source, "m.py", "f", "k")


def test_a_prompt_file_is_taken_byte_for_byte(tmp_path):
    prompt = read_prompt_file(DATA / "reward_system_prompt.txt")
    assert prompt.text.endswith("</Format>\n") and prompt.sha256 == sha(prompt.text)
    (tmp_path / "blank.txt").write_text(" \n", encoding="utf-8")
    with pytest.raises(UserError, match="^prompt file is empty: "):
        read_prompt_file(tmp_path / "blank.txt")
    with pytest.raises(UserError, match="^prompt file not found: "):
        read_prompt_file(tmp_path / "none.txt")


def test_the_pinned_files_are_the_benchmarks(shared_data, tmp_path, served):
    files, _ = served
    for path in UPSTREAM_SHA256:
        if (REAL / path).is_file():  # the two eval modules are not in ../shared
            files[path] = (REAL / path).read_bytes()
    assert len(files) == 14
    events, splits = load_upstream_corpus(tmp_path)
    assert (events, splits) == read_local_corpus(REAL / "dataset" / "test_data")
    assert {name: len(traces) for name, traces in splits.items()} == \
        {"real_average": 12, "real_coding": 6, "real_writing": 6}
    assert load_upstream_reward_test_set(tmp_path) == \
        read_reward_test_set(REAL / REWARD_TEST_PATH)


def test_the_pinned_prompt_hashes_are_the_benchmarks(shared_data, tmp_path, served, monkeypatch):
    """Shared holds three of the four texts; the fourth (the judge's closing instruction) is
    checked with a stand-in, its pin having been taken from the repository at the commit."""
    files, _ = served
    real = {name: (REAL / f).read_text(encoding="utf-8") for name, f in [
        ("agent_system", "agent_system_prompt.txt"),
        ("step_instruction", "agent_step_instruction.txt"),
        ("reward_system", "reward_system_prompt.txt")]}
    judge_step = stand_in("reward_instruction.txt")
    serve_prompt_modules(files, monkeypatch, real["agent_system"], real["step_instruction"],
                         real["reward_system"], judge_step)
    monkeypatch.setitem(PROMPT_SHA256, "reward_instruction", sha(judge_step))
    prompts = load_upstream_prompts(tmp_path)
    assert {name: getattr(prompts, name).text for name in real} == real


def test_no_upstream_prompt_text_is_in_the_repository(shared_data):
    """The prompts are benchmark data loaded at run time: no line of them is copied here."""
    lines = {line.strip() for name in ("agent_system_prompt.txt", "reward_system_prompt.txt",
                                       "agent_step_instruction.txt")
             for line in (REAL / name).read_text(encoding="utf-8").splitlines()
             if len(line.strip()) >= 30}
    assert len(lines) >= 10
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if path.is_file() and not any(p.startswith(".") or p == "__pycache__" for p in parts) \
                and path.suffix in {".py", ".txt", ".json", ".jsonl", ".md", ".toml", ".yaml"}:
            text = path.read_text(encoding="utf-8", errors="replace")
            assert not [line for line in lines if line in text], path
