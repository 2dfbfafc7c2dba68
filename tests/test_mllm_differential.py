"""The re-implemented environments against the genuine proactivebench 0.1.1, run by Python
3.12.1 (pyenv) in a throw-away venv: on a corpus generated for every dataset, with scripted and
hash-chosen replies, every step's image, options and prompt, every sample's outcome, the loader's
selection, and the OEG answers, judge messages and parses must be the package's."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from mllm_corpus import FULL, generate_corpus
from mllm_replay import replay
from proactflow.errors import UserError
from proactflow.suites.proactivebench_mllm import oeg
from proactflow.suites.proactivebench_mllm.corpus import read_dataset
from proactflow.suites.proactivebench_mllm.datasets import BY_SHORT
from proactflow.suites.proactivebench_mllm.upstream import VERSION, fetch_wheel, load_upstream

DRIVER = Path(__file__).with_name("mllm_driver.py")
CACHE = Path.home() / ".cache" / "proactflow-tests" / f"proactivebench-{VERSION}-py3.12.1"
PIP_TIMEOUT_S = 600


def _unavailable(reason: str) -> None:
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def _python312() -> Path:
    root = os.environ.get("PYENV_ROOT")
    if not root:
        try:
            root = subprocess.run(["pyenv", "root"], capture_output=True, text=True,
                                  timeout=30).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            root = str(Path.home() / ".pyenv")
    return Path(root or Path.home() / ".pyenv") / "versions" / "3.12.1" / "bin" / "python"


@pytest.fixture(scope="session")
def genuine(tmp_path_factory):
    """(python of a venv holding the genuine package, the pinned wheel), cached across runs
    under ~/.cache/proactflow-tests (built aside, then renamed into place)."""
    python = _python312()
    if not python.is_file():
        _unavailable(f"needs pyenv's Python 3.12.1 ({python}) to run the genuine package")
    venv_python = CACHE / "venv" / "bin" / "python"
    if not (CACHE / "READY").is_file():
        CACHE.parent.mkdir(parents=True, exist_ok=True)
        build = Path(tempfile.mkdtemp(prefix="building-", dir=CACHE.parent))
        try:
            subprocess.run([str(python), "-m", "venv", str(build / "venv")], check=True,
                           capture_output=True, timeout=PIP_TIMEOUT_S)
            done = subprocess.run(
                [str(build / "venv" / "bin" / "python"), "-m", "pip", "install", "-q",
                 "--no-deps", f"proactivebench=={VERSION}", "pillow", "attrs", "jsonlines"],
                capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
            if done.returncode != 0:
                _unavailable("cannot install the genuine package: "
                             + (done.stderr.strip().splitlines() or ["?"])[-1])
            (build / "READY").write_text("ok\n")
            try:
                os.rename(build, CACHE)  # another session may have won the race: fine
            except OSError:
                pass
        finally:
            shutil.rmtree(build, ignore_errors=True)
    try:
        wheel = fetch_wheel(CACHE / "store")
    except UserError as exc:
        _unavailable(f"cannot fetch the pinned wheel: {exc}")
    wheel_file = tmp_path_factory.mktemp("wheel") / "proactivebench.whl"
    wheel_file.write_bytes(wheel)
    return venv_python, wheel_file


def test_environments_match_the_genuine_package(genuine, tmp_path):
    venv_python, wheel_file = genuine
    upstream = load_upstream(wheel_file=wheel_file)
    # Ids the package keeps, and two it filters out, per dataset.
    ids = {short: sorted(upstream.filter[full])[:12] + [max(upstream.filter[full]) + 1]
           for short, full in FULL.items()}
    corpus = tmp_path / "corpus"
    generate_corpus(corpus, per_dataset=13, seed=7, ids=ids)
    done = subprocess.run([str(venv_python), str(DRIVER), str(corpus)], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    records = [json.loads(line) for line in done.stdout.splitlines()]

    head = records[0]
    assert head["filter_sizes"] == {k: len(v) for k, v in upstream.filter.items()}
    assert head["prediction_thr"] == upstream.prediction_thr

    samples = {short: {s.sample_id: s for s in read_dataset(corpus, BY_SHORT[short],
                                                              upstream.filter)}
               for short in FULL}
    problems: list[str] = []
    counts: dict[str, int] = {}
    for record in records[1:]:
        short, script = record["short"], record["script"]
        counts[script] = counts.get(script, 0) + 1
        if script == "selection":
            ours = [s.sample_id for s in read_dataset(corpus, BY_SHORT[short], upstream.filter)]
            assert ours == record["ids"], short
            assert [s.sample_id for s in oeg.select_oeg_samples(
                list(samples[short].values()))] == record["oeg_ids"], short
            continue
        sample = samples[short][record["sample_id"]]
        if script == "oeg":
            problems += _oeg_problems(sample, record, upstream)
            continue
        found, _ = replay(sample, corpus, record, hint=script == "hint",
                          reference=script == "reference")
        problems += found
    assert not problems, "\n".join(problems[:20])
    # Every dataset ran every script; some episodes were long, some crashed the package.
    assert counts["rule"] == counts["walk"] == counts["proactive"] == counts["oeg"] >= 7 * 10
    longest = max(len(r.get("steps", [])) for r in records)
    assert longest >= 4
    assert any("crash" in r for r in records)


def _oeg_problems(sample, record, upstream) -> list[str]:
    where = f"{record['short']} {record['sample_id']} oeg"
    if "crash" in record:
        return [f"{where}: the package crashed ({record['crash']})"]
    thr = upstream.prediction_thr[record["short"]]
    ours = {"prompt": oeg.oeg_question(sample),
            "prompt_with_help": oeg.oeg_question(sample, use_hints=True),
            "first": oeg.valid_answers(sample, 1), "second": oeg.valid_answers(sample, 2),
            "messages": oeg.judge_messages(upstream, oeg.oeg_question(sample),
                                           oeg.valid_answers(sample, 1), "(model output)")}
    problems = [f"{where} {key}: {value!r} != {record[key]!r}"
                for key, value in ours.items() if record[key] != value]
    for output, with_first, with_second in record["parses"]:
        visible = oeg.visible_output(output)
        for answers, expected in ((ours["first"], with_first), (ours["second"], with_second)):
            ps, cp, agg = oeg.upstream_verdict(answers, visible, thr)
            got = {"proactive_suggestion": ps, "category_prediction": cp, "aggregate": agg}
            if got != expected:
                problems.append(f"{where} parse {output!r}: {got} != {expected}")
    return problems
