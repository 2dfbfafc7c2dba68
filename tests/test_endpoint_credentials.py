"""An endpoint URL with user info (`http://alice:s3cret@host/v1`, issue #31): the credentials
reach that endpoint as `Authorization: Basic`, in place of the key's bearer token, and nowhere
else; the URL litellm gets holds none, and neither does any key, file or line shown."""

from __future__ import annotations

import base64

from fake_openai import FakeOpenAI, Reply
from helpers import cli_args, run_cli
from replay import synthetic_model

USER, PASSWORD = "alice", "s3cret-PLANTED-4471"
EXPECTED = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()


def checking_credentials(request: dict) -> Reply:
    if request["_authorization"] != EXPECTED:
        return Reply(status=401, content="wrong credentials")
    return synthetic_model(request)


def test_user_info_in_an_endpoint_url_is_sent_as_basic_authentication(
        fake, tmp_path, capsys, caplog):
    store, out = tmp_path / "store", tmp_path / "out"
    with FakeOpenAI({"guarded": checking_credentials}) as guarded:
        url = guarded.url.replace("http://", f"http://{USER}:{PASSWORD}@")
        args = cli_args(fake, store, eval_model="openai/guarded", judge_model="openai/judge2",
                        extra=("--limit", "2", "--out", str(out)))
        args[args.index("--eval-api-base") + 1] = url
        assert run_cli("run", args) == 0
        made = guarded.calls["guarded"]
        assert made > 0
        assert {r["_authorization"] for r in guarded.requests} == {EXPECTED}
        # The judge's endpoint, another one, never gets them: its placeholder key only.
        assert fake.requests and all(r["_authorization"] == "Bearer no-key-configured"
                                     for r in fake.requests)

        # The same URL again: every answer from the cache (its key did not change).
        guarded.reset_counts()
        assert run_cli("run", args) == 0
        assert guarded.calls["guarded"] == 0

    shown = capsys.readouterr()
    for text in (shown.out, shown.err, caplog.text):
        assert PASSWORD not in text
    for folder in (store, out):
        for path in folder.rglob("*"):
            if path.is_file():
                assert PASSWORD.encode() not in path.read_bytes(), path


def test_without_user_info_the_key_goes_as_before(fake, tmp_path, monkeypatch):
    from proactflow.config.endpoints import split_credentials

    assert split_credentials("http://127.0.0.1:8000/v1?x=1") == ("http://127.0.0.1:8000/v1?x=1",
                                                                 None)
    bare, header = split_credentials("https://al%40ce:p%3Ass@example.org:8443/v1")
    assert bare == "https://example.org:8443/v1"
    assert header == "Basic " + base64.b64encode(b"al@ce:p:ss").decode()
    monkeypatch.setenv("PLANTED_KEY", "sk-planted-77")
    args = cli_args(fake, tmp_path / "store", eval_model="openai/synth",
                    judge_model="openai/judge2",
                    extra=("--limit", "1", "--eval-api-key-env", "PLANTED_KEY"))
    assert run_cli("run", args) == 0
    assert {r["_authorization"] for r in fake.requests if r["model"] == "synth"} == \
        {"Bearer sk-planted-77"}
