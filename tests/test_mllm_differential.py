"""The re-implemented environments against the genuine proactivebench 0.1.1, run by Python
3.12.1 (pyenv) in a throw-away venv: on a corpus generated for every dataset, with scripted and
hash-chosen replies, every step's image, options and prompt, every sample's outcome, the loader's
selection, and the OEG answers, judge messages and parses must be the package's."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from mllm_corpus import FULL, generate_corpus
from mllm_genuine import genuine  # noqa: F401  (a fixture)
from mllm_replay import replay
from proactflow.suites.proactivebench_mllm import oeg
from proactflow.suites.proactivebench_mllm.corpus import read_dataset
from proactflow.suites.proactivebench_mllm.datasets import BY_SHORT
from proactflow.suites.proactivebench_mllm.upstream import load_upstream

DRIVER = Path(__file__).with_name("mllm_driver.py")


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
