"""The real download code, exercised offline: the hub loader against a local hub cache with
HF_HUB_OFFLINE=1, and the upstream judge prompt from a local HTTP server."""

from __future__ import annotations

import os
import shutil
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from fake_openai import FakeOpenAI
from proactflow.cache.keys import text_sha256
from proactflow.common.errors import UserError
from proactflow.config.settings import UPSTREAM_PROMPT_COMMIT, UPSTREAM_PROMPT_SHA256
from proactflow.suites.sources import (UPSTREAM_MODULE_URL_ENV, extract_string_constant,
                                       fetch_upstream_judge_prompt)
from replay import (DIALOGUES, JUDGE_PROMPT, SAMPLE_CORPUS, SHARED_JUDGE_PROMPT, TRIGGERS,
                    published_triggers, replay_model)
import warm_spawn

COMMIT = "0123456789abcdef0123456789abcdef01234567"


def fake_hub_cache(root):
    """A Hugging Face cache holding the sample as bosonai/proactbench at COMMIT (= main)."""
    repo = root / "datasets--bosonai--proactbench"
    snapshot = repo / "snapshots" / COMMIT
    snapshot.mkdir(parents=True)
    shutil.copyfile(SAMPLE_CORPUS, snapshot / "final_dialogues.jsonl")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    return root


def run_offline_cli(tmp_path, fake, *extra):
    hub = tmp_path / "hub"
    if not hub.exists():
        fake_hub_cache(hub)
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(hub))
    command = [sys.executable, "-m", "proactflow.cli", "run", "--dry-run",
               "--eval-model", "openai/gen", "--eval-api-base", fake.url,
               "--judge-model", "openai/gen", "--judge-api-base", fake.url,
               "--judge-prompt", str(JUDGE_PROMPT), "--store", str(tmp_path / "store"), *extra]
    return warm_spawn.run(command, env=env, capture_output=True, text=True, timeout=120)


def test_hub_loader_reads_local_cache_offline_and_records_commit(tmp_path):
    with FakeOpenAI({"gen": replay_model(published_triggers())}) as fake:
        done = run_offline_cli(tmp_path, fake)
        assert done.returncode == 0, done.stderr
        assert f"revision {COMMIT[:19]}" in done.stdout
        assert f"{DIALOGUES} dialogues, {TRIGGERS} triggers" in done.stdout
        pinned = run_offline_cli(tmp_path, fake, "--revision", COMMIT, "--limit", "3")
        assert pinned.returncode == 0, pinned.stderr
        assert "3 dialogues" in pinned.stdout
        missing = run_offline_cli(tmp_path, fake, "--revision", "v9.9")
        assert sum(fake.calls.values()) == 0
    assert missing.returncode == 2
    assert missing.stderr.startswith("proactflow: error: cannot download final_dialogues.jsonl")
    assert missing.stderr.count("\n") == 1


def module_source(prompt: str) -> str:
    return ('"""Upstream runtime prompts (test stand-in)."""\n'
            "import sys\n\nOTHER = 'not this one'\n"
            f"JUDGE_SYSTEM_TEMPLATE = {prompt!r}\n\n"
            "sys.exit('the module must never be executed')\n")


@pytest.fixture
def upstream(monkeypatch):
    """A local stand-in for raw.githubusercontent.com serving one module text."""
    served = {"body": module_source(JUDGE_PROMPT.read_text(encoding="utf-8")), "hits": 0}

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            served["hits"] += 1
            if UPSTREAM_PROMPT_COMMIT not in self.path:
                self.send_error(404)
                return
            body = served["body"].encode("utf-8")
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv(UPSTREAM_MODULE_URL_ENV,
                       f"http://127.0.0.1:{server.server_address[1]}/{{commit}}/runtime.py")
    yield served
    server.shutdown()
    server.server_close()


def test_upstream_prompt_is_extracted_checked_and_cached(tmp_path, upstream):
    expected = text_sha256(JUDGE_PROMPT.read_text(encoding="utf-8"))
    prompt = fetch_upstream_judge_prompt(tmp_path, expected_sha256=expected)
    assert prompt.text == JUDGE_PROMPT.read_text(encoding="utf-8")
    assert prompt.sha256 == expected
    assert upstream["hits"] == 1
    again = fetch_upstream_judge_prompt(tmp_path, expected_sha256=expected)
    assert again.text == prompt.text and upstream["hits"] == 1


def test_the_pinned_hash_is_the_benchmarks_prompt(shared_data, tmp_path, upstream):
    upstream["body"] = module_source(SHARED_JUDGE_PROMPT.read_text(encoding="utf-8"))
    prompt = fetch_upstream_judge_prompt(tmp_path)
    assert prompt.sha256 == UPSTREAM_PROMPT_SHA256


def test_upstream_prompt_with_unexpected_hash_is_refused(tmp_path, upstream):
    upstream["body"] = module_source("You are a lenient judge.")
    with pytest.raises(UserError, match="refusing to use it"):
        fetch_upstream_judge_prompt(tmp_path)
    assert not (tmp_path / "inputs").exists()


def test_extract_reads_concatenated_constants_without_running_code():
    source = "import os\nos.remove('x')\nJUDGE_SYSTEM_TEMPLATE = ('a' 'b'\n  'c')\n"
    assert extract_string_constant(source) == "abc"
    with pytest.raises(UserError, match="defines no string"):
        extract_string_constant("OTHER = 'x'\n")
