"""Five nightly sweeps on a fake clock: the history, a regression that is real, a model that
changed behind its name, and the Prefect event an automation would act on.

The model under test answers well on nights 1-3 (each night a new checkpoint label, so it is
asked again and answers the same), badly on night 4 (a new checkpoint that regressed, except on
one trigger), and on night 5 the same checkpoint label is served by another snapshot (a new
system fingerprint) that the cache would hide: the probe notices it and refresh_on_change asks
again.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from datetime import datetime, timezone
from pathlib import Path

import polars as pl
import pytest

from browser import Browser, chromium_path
from fake_openai import Reply
from helpers import cli_args, run_cli
from replay import JUDGE_PROMPT, SAMPLE_CORPUS, _last_user, judged_response

pytestmark = pytest.mark.usefixtures("prefect_server")

ROOT = Path(__file__).resolve().parents[1]
PLACEHOLDER = "00000000-0000-0000-0000-000000000000"


class NightlyModel:
    """A model whose answers and served snapshot the test sets night by night."""

    def __init__(self) -> None:
        self.bad = False
        self.kept_good: str | None = None
        """The one user message still answered well on a bad night."""
        self.fingerprint = "fp-1"
        self.asked: list[str] = []

    def __call__(self, request: dict) -> Reply:
        message = _last_user(request)
        self.asked.append(message)
        quality = "bad" if self.bad and message != self.kept_good else "good"
        return Reply(content=f"{quality} answer to: {message[:40]}", served_model="nightly",
                     system_fingerprint=self.fingerprint)


def verdict_judge(request: dict) -> Reply:
    if "END OF CONTEXT" not in _last_user(request):  # the sweep's snapshot probe
        return Reply(content="ready", served_model="judge-snap", system_fingerprint="j-1")
    response = judged_response(request)
    score = "PASS" if response.startswith("good") else "FAIL"
    return Reply(content=json.dumps({"evaluation_result": {
        "status": "EVALUATED", "score": score, "rationale": "test verdict",
        "evidence": response[:20]}}), served_model="judge-snap", system_fingerprint="j-1")


def _sweep_file(path, fake, store, out, revision: str) -> None:
    path.write_text(f"""
name = "nightly"
store = "{store}"
out = "{out}"
corpus = "{SAMPLE_CORPUS}"
judge_prompt = "{JUDGE_PROMPT}"
regression_threshold = 0.05
refresh_on_change = true
processes = 1

[[judges]]
model = "openai/verdicts"
api_base = "{fake.url}"

[[models]]
model = "openai/nightly"
api_base = "{fake.url}"
revision = "{revision}"
""")


def _trigger_kept_good(store) -> str:
    """The user message of a trigger of a dialogue with other scored triggers: it stays good on
    night 4, so its sample keeps its verdict and every dialogue still has one that changed."""
    from proactflow.cache.artifacts import ArtifactStore
    from proactflow.results.evaluations import evaluation_of
    from proactflow.results.history.nights import read_nights

    artifacts = ArtifactStore(str(store))
    evaluation = evaluation_of(artifacts, read_nights(artifacts)[0].pairs[0]["judgments"])
    assert evaluation is not None
    scored = evaluation.judgments.filter(pl.col("status") == "scored")
    unit = scored.group_by("unique_id_eval").len().filter(pl.col("len") > 1)["unique_id_eval"][0]
    first = scored.filter(pl.col("unique_id_eval") == unit).sort("turn").row(0, named=True)
    return evaluation.triggers.filter(
        (pl.col("unique_id_eval") == unit) & (pl.col("turn") == first["turn"])
    )["user_message"][0]


class Webhook:
    """A local HTTP endpoint a Prefect notification block posts to."""

    def __init__(self) -> None:
        from http.server import BaseHTTPRequestHandler, HTTPServer

        received = self.received = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                received.append(self.rfile.read(int(self.headers["Content-Length"])).decode())
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args) -> None:
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_port}/hook"


def _apply_automation(webhook: Webhook) -> list:
    """automations/notify-on-regression.yaml as a user applies it, its block a webhook here."""
    import asyncio

    import yaml
    from prefect.blocks.notifications import CustomWebhookNotificationBlock
    from prefect.client.orchestration import get_client
    from prefect.events.schemas.automations import AutomationCore

    block = CustomWebhookNotificationBlock(name="proactflow-test", url=webhook.url,
                                           json_data={"text": "{{subject}}\n{{body}}"})
    block_id = block.save("proactflow-history-test", overwrite=True)
    text = (ROOT / "automations" / "notify-on-regression.yaml").read_text()
    assert text.count(PLACEHOLDER) == 2
    automations = yaml.safe_load(text.replace(PLACEHOLDER, str(block_id)))["automations"]

    async def create() -> list:
        async with get_client() as client:
            return [await client.create_automation(AutomationCore.model_validate(a))
                    for a in automations]

    return asyncio.run(create())


def _delete_automations(ids: list) -> None:
    import asyncio

    from prefect.client.orchestration import get_client

    async def delete() -> None:
        async with get_client() as client:
            for automation_id in ids:
                await client.delete_automation(automation_id)

    asyncio.run(delete())


def _look_at(page: Path, table: pl.DataFrame, tmp_path: Path) -> None:
    """The page in a browser: a point per night and group, the bands, the labels drawn; its
    screenshot is docs/images/history.png (PROACTFLOW_SCREENSHOTS=docs/images)."""
    with Browser(page.as_uri()) as browser:
        # The whole page, not its first chart: the charts are in the HTML, and a loaded machine
        # showed the browser a page parsed up to 15 of its 20 points (CI, 2026-11-29).
        browser.wait_for("document.readyState === 'complete' && "
                         "document.querySelectorAll('svg').length > 0")
        assert browser.evaluate("document.querySelectorAll('svg circle').length") == \
            table.filter(pl.col("score").is_not_null()).height
        assert browser.evaluate("document.querySelectorAll('svg polygon').length") == \
            table["group"].n_unique()
        boxes = browser.evaluate("[...document.querySelectorAll('svg')].map(s => "
                                 "s.getBoundingClientRect().height)")
        assert all(height > 100 for height in boxes)
        shots = Path(os.environ.get("PROACTFLOW_SCREENSHOTS", tmp_path))
        shots.mkdir(parents=True, exist_ok=True)
        browser.screenshot(shots / "history.png")
        assert (shots / "history.png").stat().st_size > 10_000


def _events(api: str, name: str, since: datetime | None = None) -> list[dict]:
    """The events of this name on the worker's server; with `since`, from then on only (the
    server is shared with the test files before this one, whose sweeps may be named alike)."""
    filter_: dict = {"event": {"name": [name]}}
    if since is not None:
        filter_["occurred"] = {"since": since.isoformat()}
    request = urllib.request.Request(
        f"{api}/events/filter", method="POST", headers={"Content-Type": "application/json"},
        data=json.dumps({"filter": filter_, "limit": 50}).encode())
    with urllib.request.urlopen(request) as response:
        return json.loads(response.read())["events"]


def _artifacts(api: str, key: str, since: datetime) -> list[dict]:
    """The versions of the artifact with this key created from `since` on, newest first."""
    request = urllib.request.Request(
        f"{api}/artifacts/filter", method="POST", headers={"Content-Type": "application/json"},
        data=json.dumps({"artifacts": {"key": {"any_": [key]}}, "limit": 50,
                         "sort": "CREATED_DESC"}).encode())
    with urllib.request.urlopen(request) as response:
        return [artifact for artifact in json.loads(response.read())  # "...Z": 3.10 too
                if datetime.fromisoformat(artifact["created"].replace("Z", "+00:00")) >= since]


def test_five_nights(fake, tmp_path, capsys, monkeypatch, prefect_server):
    model = NightlyModel()
    fake.responders["nightly"] = model
    fake.responders["verdicts"] = verdict_judge
    store, config = tmp_path / "store", tmp_path / "nightly.toml"
    began = datetime.now(timezone.utc)
    results = {}
    webhook = Webhook()
    automations = _apply_automation(webhook)
    for night in range(1, 6):
        monkeypatch.setenv("PROACTFLOW_NOW", f"2026-11-0{night}T02:00:00+00:00")
        out = tmp_path / f"night{night}"
        _sweep_file(config, fake, store, out, f"ckpt-{min(night, 4)}")
        if night == 4:
            model.bad = True
            model.kept_good = kept
        if night == 5:
            model.fingerprint = "fp-2"  # another snapshot behind the same name and label
        model.asked.clear()
        code = run_cli("sweep", ["--config", str(config), "--fail-on-regression"])
        printed = capsys.readouterr().out
        results[night] = (code, printed, (out / "sweep.md").read_text(), model.asked[:])
        if night == 1:
            kept = _trigger_kept_good(store)

    for night in (1, 2, 3):
        code, printed, summary, asked = results[night]
        assert code == 0, printed
        assert "REGRESSION" not in printed and "Regressions" not in summary
        assert "changed behind its name" not in summary
    # Nights 2-3 asked every trigger again (new checkpoint labels, and the probe: night 1 had
    # no night to compare with) and got the same verdicts.
    assert len(results[2][3]) == len(results[1][3]) + 1 > 2

    code, printed, summary, _ = results[4]
    assert code == 1, printed  # --fail-on-regression
    assert "REGRESSION  openai/nightly judged by openai/verdicts (OVERALL)" in printed
    top = summary.split("## Regressions and improvements", 1)
    assert top[0].strip() == "# ProactBench sweep" or top[0].startswith("# ")
    assert "2026-11-03 02:00 (ckpt-3" in summary and "2026-11-04 02:00 (ckpt-4" in summary

    from proactflow.cache.artifacts import ArtifactStore
    from proactflow.results.history.nights import read_nights
    from proactflow.results.history.scores import all_findings

    nights = read_nights(ArtifactStore(str(store)), series="nightly")
    assert [n.night.day for n in nights] == [1, 2, 3, 4, 5]
    findings = all_findings(nights)
    assert {(f.after[:10], f.kind) for f in findings} == {("2026-11-04", "regression")}
    overall = next(f for f in findings if f.group == "OVERALL")
    assert overall.ci_high < 0 and overall.delta < -0.05
    night3 = nights[2].pairs[0]["samples"]
    scored_before = {s for s, v in zip(night3["sample"], night3["verdict"]) if v is not None}
    kept_sample = {s for s, v, w in zip(night3["sample"], night3["verdict"],
                                        nights[3].pairs[0]["samples"]["verdict"]) if v == w}
    assert len(kept_sample & scored_before) == 1  # the trigger that stayed good
    assert {c["sample"] for c in overall.changed} == scored_before - kept_sample
    assert all((c["before"], c["after"]) == ("PASS", "FAIL") for c in overall.changed)
    assert overall.samples == len(scored_before)
    report = (tmp_path / "night4" / "report.html").read_text()
    assert "Since the night before" in report
    # The changed triggers side by side: a viewer of nights 3 and 4 holding only them, in the
    # night's own folder (and, for the latest night, where it always was).
    own = Path(nights[3].location).stem
    side = tmp_path / "night4" / "nights" / own / "compare" / "1"
    compare = (side / "index.html").resolve().as_uri()
    assert f"([side by side]({compare}#t=" in summary and f'href="{compare}#t=' in report
    assert (tmp_path / "night4" / "compare" / "1" / "index.html").exists()
    details = list((side / "data").glob("t*.js"))
    assert len(details) == len(overall.changed)
    assert all(d.read_text().count('"response":') == 2 for d in details)

    # Night 5: the served snapshot changed behind ckpt-4; noticed, and asked again.
    code, printed, summary, asked = results[5]
    assert "openai/nightly (model under test) changed behind its name: nightly (fingerprint " \
           "fp-1) answered its cached results on 2026-11-04 02:00, nightly (fingerprint fp-2) " \
           "answers on 2026-11-05 02:00" in summary
    assert "CHANGED openai/nightly" in printed
    assert "snapshot check: 2 fresh calls, one per model the series 'nightly' has seen" in printed
    assert len(asked) == len(results[1][3]) + 1  # the probe and every trigger, not the cache
    assert fake.probes["nightly"] == 4 and fake.probes["verdicts"] == 4  # nights 2-5
    assert nights[4].pairs[0]["snapshot"] == {"served_model": "nightly",
                                              "system_fingerprint": "fp-2"}
    assert code == 0, printed  # same answers as night 4: no regression

    # The history command: table and page.
    history_out = tmp_path / "history"
    assert run_cli("history", ["--config", str(config), "--out", str(history_out)]) == 0
    printed = capsys.readouterr().out
    assert "REGRESSION: openai/nightly judged by openai/verdicts" in printed
    table = pl.read_csv(history_out / "history.csv")
    overall_rows = table.filter(pl.col("group") == "OVERALL").sort("night")
    assert overall_rows["night"].str.slice(0, 10).to_list() == [
        f"2026-11-0{n}" for n in range(1, 6)]
    scores = overall_rows["score"].to_list()
    assert scores[0] == scores[1] == scores[2] == 1.0 and scores[3] == scores[4] < 0.5
    assert overall_rows["point"].to_list()[3:] == ["ckpt-4, nightly (fp-1)",
                                                   "ckpt-4, nightly (fp-2)"]
    assert (overall_rows["ci_low"] <= overall_rows["score"]).all()
    page = (history_out / "history.html").read_text()
    assert page.count("<svg") == table["group"].n_unique()
    assert "<polygon" in page and "ckpt-4, nightly (fp-2)" in page
    assert (tmp_path / "night4" / "nights" / own / "report.html").resolve().as_uri() in page
    if chromium_path() is not None or os.environ.get("CI") == "true":
        _look_at(history_out / "history.html", table, tmp_path)

    # The regression reached Prefect as an event, with what an automation needs.
    regressions = results[4][1].count("REGRESSION  ")  # a line each, and an event each
    payloads: list[dict] = []
    for _ in range(150):  # the server stores events in batches, a moment after receiving them
        payloads = [e["payload"] for e in _events(prefect_server, "proactflow.regression", began)
                    if e["payload"].get("series") == "nightly"]
        if len(payloads) >= regressions:
            break
        time.sleep(0.2)
    assert len(payloads) == regressions >= 1, (payloads, results[4][1])
    overall_event = next(p for p in payloads if p["group"] == "OVERALL")
    assert overall_event["model"] == "openai/nightly" and overall_event["suite"] == "proactbench"
    assert overall_event["judge"] == "openai/verdicts"
    assert overall_event["delta"] == pytest.approx(overall.delta)
    assert overall_event["interval"] == pytest.approx([overall.ci_low, overall.ci_high])
    assert not _events(prefect_server, "proactflow.improvement", began)

    # The series' artifacts: one key each, a version per night (the UI shows their history).
    leaderboards = _artifacts(prefect_server, "nightly-leaderboard", began)
    assert len(leaderboards) == 5 and "## Regressions and improvements" in \
        leaderboards[1]["data"]  # night 4's, the one before the latest
    assert len(_artifacts(prefect_server, "nightly-scores", began)) == 5
    assert len(_artifacts(prefect_server, "nightly-report", began)) == 5

    # And the automation a user applies from the repository notified, once per finding.
    for _ in range(150):
        if len(webhook.received) >= len(payloads):
            break
        time.sleep(0.2)
    _delete_automations(automations)
    notified = [json.loads(body)["text"] for body in webhook.received]
    assert len(notified) == len(payloads)
    assert any(text.startswith("proactflow: openai/nightly regressed on proactbench\n"
                               "openai/nightly judged by openai/verdicts\n(proactbench, "
                               "OVERALL, series nightly):") for text in notified)
    assert f"{100 * overall.delta:+.1f} points" in "".join(notified)


def test_a_labelled_run_is_a_night_of_its_series(fake, tmp_path, capsys, monkeypatch,
                                                 prefect_server):
    """A point of a series like a sweep's night: recorded, compared, told to Prefect as the
    same event, and charted with its report linked."""
    model = NightlyModel()
    fake.responders["nightly"] = model
    fake.responders["verdicts"] = verdict_judge
    store = tmp_path / "store"
    for day, revision in ((1, "ckpt-1"), (2, "ckpt-2")):
        monkeypatch.setenv("PROACTFLOW_NOW", f"2026-11-0{day}T09:00:00+00:00")
        model.bad = day == 2
        args = cli_args(fake, store, eval_model="openai/nightly", judge_model="openai/verdicts",
                        extra=("--eval-revision", revision, "--label", "checkpoints",
                               "--out", str(tmp_path / f"day{day}")))
        assert run_cli("run", args) == 0
    printed = capsys.readouterr().out
    assert "history: a night of series 'checkpoints'" in printed
    assert "REGRESSION: openai/nightly judged by openai/verdicts (proactbench, OVERALL)" in \
        printed

    from proactflow.cache.artifacts import ArtifactStore
    from proactflow.results.history.nights import read_nights

    nights = read_nights(ArtifactStore(str(store)), series="checkpoints")
    assert [(n.date, n.pairs[0]["revision"]) for n in nights] == [
        ("2026-11-01 09:00", "ckpt-1"), ("2026-11-02 09:00", "ckpt-2")]

    payloads: list[dict] = []
    for _ in range(150):  # the server stores events a moment after it receives them
        payloads = [e["payload"] for e in _events(prefect_server, "proactflow.regression")
                    if e["payload"].get("series") == "checkpoints"]
        if any(p["group"] == "OVERALL" for p in payloads):
            break
        time.sleep(0.2)
    assert {(p["model"], p["suite"], p["group"]) for p in payloads} >= {
        ("openai/nightly", "proactbench", "OVERALL")}
    assert all(p["delta"] < 0 < p["samples"] and p["metric"] == "weighted score"
               for p in payloads)

    assert run_cli("history", ["--store", str(store), "--series", "checkpoints", "--out",
                               str(tmp_path / "history")]) == 0
    table = pl.read_csv(tmp_path / "history" / "history.csv").filter(group="OVERALL")
    assert table["point"].str.slice(0, 6).to_list() == ["ckpt-1", "ckpt-2"]
    assert table["score"][1] < table["score"][0]
    page = (tmp_path / "history" / "history.html").read_text()
    # The run's main export as it was that night, kept in the night's own folder.
    kept = tmp_path / "day2" / "nights" / Path(nights[1].location).stem / "metrics.json"
    assert "<svg" in page and kept.resolve().as_uri() in page and kept.exists()
