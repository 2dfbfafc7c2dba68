"""Frozen outputs: a store holding runs of all four suites (several models, two nights of a
labelled series each), and everything the commands make of it, written into one folder with a
digest manifest, so that a refactor that is meant to move code without changing behaviour can
be checked byte for byte.

Run by hand from the repository root (not part of the tests: it takes a few minutes):

    .venv/bin/python tests/frozen_outputs.py OUT [--manifest FILE] [--check FILE]

OUT receives (all text normalised, see `normalise`):
  help/<command>.txt      the --help of every command and sub-command
  console/<step>.txt      what each step printed (stdout and stderr, at the file descriptors)
  files/<step>/...        the files each step wrote: every suite's run --out (its exports),
                          report's folder, view's folder, history's folder
  store/...               the store: run records, nights and each artifact (Parquet as NDJSON
                          rows), under their content-addressed names
--manifest FILE writes "sha256  path" for every file of OUT; --check FILE compares OUT with a
manifest written before and prints every path that differs (exit 1 when any does).

The store is built as the tests build theirs, against the tests' fake OpenAI-compatible servers
and tests/data corpora (viewer_stores.py's four suites, test_history.py's labelled nights):
ProactBench imported (tiny-model), run (openai/gen judged by openai/judge, openai/synth judged
by openai/judge2) and a labelled series "nightly" of openai/nightly whose answers get worse on
night 2 (a regression, with its compare page); Proactive Agent, the multimodal suite (two
models) and the video suite each run on both nights of the same series. The clock of each night
is PROACTFLOW_NOW; only what is inherently incidental is normalised: this machine's paths (the
temporary folder, the repository), run ids (numbered in the order the runs started), process
ids, files' modification times, wall-clock times and how long calls took. The fake server
listens on a fixed port (PORT): its address is part of the artifact keys.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Iterator

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
sys.path.insert(0, str(TESTS))

_PREFECT_HOME = tempfile.mkdtemp(prefix="proactflow-frozen-prefect-")
os.environ["PREFECT_HOME"] = _PREFECT_HOME
os.environ["PREFECT_SERVER_ANALYTICS_ENABLED"] = "false"
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["COLUMNS"] = "100"  # argparse wraps --help to the terminal's width
os.environ.pop("PREFECT_API_URL", None)  # runs without Prefect: no server, no event

NIGHTS = ("2026-11-01T02:00:00+00:00", "2026-11-02T02:00:00+00:00")
"""Each night's clock; each run of a night starts a minute after the one before (nights of
one moment would be ordered by their random run ids)."""
NIGHT_DATES = {moment[:10] for moment in NIGHTS}
WALL_CLOCK = re.compile(r"\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?")
"""A time of this machine's clock (the nights' fixed clock aside)."""
SERIES = "nightly"
PORT = 18731
"""The fake endpoint's port: its address is key material (a model's api_base), so it is fixed
for the artifact keys to be the same from one build to the next."""
TIMED = {"latency_s", "seconds"}
"""Columns holding how long a call or stage took: wall time, blanked."""
UNCOMPARED = ("calls", "coordination")
"""Folders of the store that are not outputs: the per-call cache's database and the limits'
lock files."""
TEXT_SUFFIXES = {".txt", ".json", ".jsonl", ".csv", ".html", ".js", ".css", ".md", ".toml",
                 ".svg", ".ndjson", ""}


class Normaliser:
    """Replaces what is incidental to a run on this machine at this moment."""

    def __init__(self, root: Path) -> None:
        self.literals: list[tuple[str, str]] = []
        for path, name in ((root, "<tmp>"), (ROOT, "<repo>"), (Path(_PREFECT_HOME),
                                                                "<prefect-home>")):
            for form in {str(path), str(path.resolve())}:
                self.literals += [(Path(form).as_uri(), f"file://{name}"), (form, name)]
        self.run_ids: dict[str, str] = {}
        """Each run's id and its placeholder, numbered in the order the runs started."""

    def text(self, text: str) -> str:
        for literal, name in self.literals:
            text = text.replace(literal, name)
        for run_id, name in self.run_ids.items():
            text = text.replace(run_id, name).replace(run_id[:8], name)
        text = re.sub(r"\bpid \d+", "pid <pid>", text)
        text = re.sub(r"(\.mp4\|\d+)\|\d{12,}", r"\1|<mtime>", text)  # a file's mtime in ns
        text = re.sub(r"^\d{2}:\d{2}:\d{2}\.\d{3} \|", "<clock> |", text, flags=re.MULTILINE)
        text = WALL_CLOCK.sub(lambda m: m[0] if m[0][:10] in NIGHT_DATES else "<time>", text)
        text = re.sub(r"\b(?!2026110[12])\d{8}T\d{6}Z", "<stamp>", text)
        text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<uuid>",
                      text)
        return text


def normalise_file(source: Path, target: Path, normaliser: Normaliser) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.suffix == ".parquet":
        import polars as pl

        frame = pl.read_parquet(source)
        frame = frame.with_columns(pl.lit(None, dtype=frame.schema[name]).alias(name)
                                   for name in frame.columns if name in TIMED)
        rows = frame.write_ndjson()
        schema = json.dumps({name: str(dtype) for name, dtype in frame.schema.items()})
        target.with_name(target.name + ".ndjson").write_text(
            normaliser.text(schema + "\n" + rows), encoding="utf-8")
        return
    if source.suffix in TEXT_SUFFIXES:
        try:
            text = source.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            pass
        else:
            if source.suffix == ".csv" and text:
                text = _untimed_csv(text)
            target.write_text(normaliser.text(untimed_json(text)), encoding="utf-8")
            return
    shutil.copyfile(source, target)


def untimed_json(text: str) -> str:
    """A JSON text with each call's wall time blanked."""
    return re.sub(r'("(?:latency_s|seconds)": ?)[0-9.e-]+', r'\1"<seconds>"', text)


def _untimed_csv(text: str) -> str:
    """A CSV export with its calls' wall-time columns blanked."""
    import csv
    import io

    rows = list(csv.reader(io.StringIO(text)))
    timed = [i for i, name in enumerate(rows[0]) if name in TIMED]
    for row in rows[1:]:
        for i in timed:
            if i < len(row) and row[i]:
                row[i] = "<seconds>"
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue()


def copy_tree(source: Path, target: Path, normaliser: Normaliser) -> None:
    """Every file of `source` into `target`, its name and content normalised."""
    for path in sorted(p for p in source.rglob("*") if p.is_file()):
        relative = normaliser.text(str(path.relative_to(source)))
        normalise_file(path, target / relative, normaliser)


@contextlib.contextmanager
def console(into: Path) -> Iterator[None]:
    """What this process writes to its stdout and stderr meanwhile, at the file descriptors
    (log handlers hold the original streams), into `into`."""
    into.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    with open(into, "wb") as sink:
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])


class Steps:
    """Each command run in this process, its console kept under a numbered step name."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.raw = work / "raw-console"
        self.count = 0
        self.codes: list[str] = []

    def cli(self, name: str, command: str, args: list[str]) -> int:
        from helpers import run_cli

        self.count += 1
        step = f"{self.count:02d}-{name}"
        with console(self.raw / f"{step}.txt"):
            try:
                code = run_cli(command, args)
            except SystemExit as exc:
                code = int(exc.code or 0)
        self.codes.append(f"{step}: exit {code}")
        return code


def write_help(out: Path) -> None:
    import argparse as ap

    from proactflow.cli.parser import build_parser

    def walk(parser: ap.ArgumentParser, names: list[str]) -> None:
        (out / "help" / ("-".join(names) or "proactflow")).with_suffix(".txt").parent.mkdir(
            parents=True, exist_ok=True)
        (out / "help" / f"{'-'.join(names) or 'proactflow'}.txt").write_text(
            parser.format_help(), encoding="utf-8")
        for action in parser._actions:
            if isinstance(action, ap._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, [*names, name])

    walk(build_parser(), [])


def fixed_time(wheel: Path) -> Path:
    """The wheel with its members dated 2026-01-01 instead of now: its sha256 names the
    package the multimodal suite's keys hold."""
    import io
    import zipfile

    with zipfile.ZipFile(wheel) as archive:
        members = [(info.filename, archive.read(info)) for info in archive.infolist()]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members:
            archive.writestr(zipfile.ZipInfo(name, date_time=(2026, 1, 1, 0, 0, 0)), data)
    wheel.write_bytes(buffer.getvalue())
    return wheel


def build(work: Path, steps: Steps) -> Path:
    """The store, and each run's --out under work/out/<step>."""
    from fake_openai import FakeOpenAI
    from helpers import cli_args
    from mllm_corpus import generate_corpus
    from mllm_suite_helpers import expected_mcqa, register, seeing_model, synthetic_wheel
    from replay import (SAMPLE_CORPUS, SAMPLE_RESULTS, published_triggers, replay_judge,
                        replay_model, synthetic_judge, synthetic_model)
    from test_history import NightlyModel, verdict_judge
    from test_proactiveagent_suite import agent, args as agent_args, reward_model
    from test_proactivebench_video_suite import args_for as video_args, grader, watcher
    from video_fixtures import write_corpus

    store, outs = work / "store", work / "out"
    published = published_triggers()
    nightly = NightlyModel()
    corpus, wheel = work / "mllm" / "corpus", work / "mllm" / "proactivebench.whl"
    generate_corpus(corpus, per_dataset=3)
    register(fixed_time(synthetic_wheel(wheel, range(3))))
    seer = seeing_model(expected_mcqa(corpus, range(3)), [])
    video_corpus = write_corpus(work / "video")
    responders = {"gen": replay_model(published), "judge": replay_judge(published),
                  "judge2": synthetic_judge, "synth": synthetic_model, "nightly": nightly,
                  "verdicts": verdict_judge, "agent": agent, "reward": reward_model,
                  "seer": seer, "seer2": seer, "watcher": watcher, "grader": grader}
    with FakeOpenAI(responders, port=PORT) as fake:
        os.environ["PROACTFLOW_NOW"] = NIGHTS[0]
        steps.cli("import-proactbench", "import",
                  [str(SAMPLE_RESULTS), "--corpus", str(SAMPLE_CORPUS), "--store", str(store),
                   "--judge-model", "openai/judge2"])
        steps.cli("run-proactbench-gen", "run",
                  cli_args(fake, store, extra=("--limit", "3", "--out", str(outs / "gen"))))
        steps.cli("run-proactbench-synth", "run",
                  cli_args(fake, store, eval_model="openai/synth", judge_model="openai/judge2",
                           extra=("--limit", "2", "--samples", "2",
                                  "--out", str(outs / "synth"))))
        for night, moment in enumerate(NIGHTS, start=1):
            minutes = iter(range(60))

            def tick() -> None:
                os.environ["PROACTFLOW_NOW"] = moment.replace(":00:00", f":{next(minutes):02d}:00")

            nightly.bad = night == 2
            tick()
            label = ("--label", SERIES)
            steps.cli(f"night{night}-proactbench", "run",
                      cli_args(fake, store, eval_model="openai/nightly",
                               judge_model="openai/verdicts",
                               extra=("--eval-revision", f"ckpt-{night}", *label,
                                      "--out", str(outs / f"nightly-{night}"))))
            tick()
            steps.cli(f"night{night}-proactiveagent", "run",
                      [*agent_args(fake, store, outs / f"agent-{night}"), *label])
            for model in ("seer", "seer2"):
                tick()
                steps.cli(f"night{night}-mllm-{model}", "run",
                          ["--suite", "proactivebench-mllm", "--eval-vision", "--corpus",
                           str(corpus), "--package", str(wheel), "--eval-model",
                           f"openai/{model}", "--eval-api-base", fake.url, "--store",
                           str(store), "--out", str(outs / f"mllm-{model}-{night}"), *label])
            tick()
            steps.cli(f"night{night}-video", "run",
                      [*video_args(fake, video_corpus, store), *label,
                       "--out", str(outs / f"video-{night}")])
    os.environ.pop("PROACTFLOW_NOW", None)
    return store


def produce(out: Path, work: Path) -> None:
    steps = Steps(work)
    normaliser = Normaliser(work)
    write_help(out)
    store = build(work, steps)
    made = work / "made"
    steps.cli("report", "report", ["--store", str(store), "--out", str(made / "report"),
                                   "--bootstrap", "200"])
    steps.cli("view", "view", ["--store", str(store), "--out", str(made / "view"),
                               "--no-open"])
    steps.cli("history", "history", ["--store", str(store), "--out", str(made / "history")])
    steps.cli("runs-ls", "runs", ["ls", "--store", str(store)])
    records = [json.loads(p.read_text(encoding="utf-8")) for p in (store / "runs").glob("*.json")]
    for record in sorted(records, key=lambda r: (r["started"], r["run_id"])):
        normaliser.run_ids[record["run_id"]] = f"<run-{len(normaliser.run_ids)}>"
    nights = [json.loads(p.read_text(encoding="utf-8"))
              for p in (store / "history").rglob("*.json")]
    for night in sorted(nights, key=lambda n: (n["night"], n["series"], n["suite"])):
        if not any(known.startswith(night["run_id"]) for known in normaliser.run_ids):
            normaliser.run_ids[night["run_id"]] = f"<run-{len(normaliser.run_ids)}>"
    (out / "console").mkdir(parents=True, exist_ok=True)
    (out / "console" / "exit-codes.txt").write_text("\n".join(steps.codes) + "\n")
    copy_tree(steps.raw, out / "console", normaliser)
    copy_tree(work / "out", out / "files" / "run-out", normaliser)
    copy_tree(made, out / "files", normaliser)
    for folder in sorted(store.iterdir()):
        if folder.name not in UNCOMPARED:
            copy_tree(folder, out / "store" / folder.name, normaliser)


def digests(out: Path) -> dict[str, str]:
    return {str(p.relative_to(out)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(out.rglob("*")) if p.is_file()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--manifest", type=Path, help="write the digests here")
    parser.add_argument("--check", type=Path, help="compare with the digests written here")
    parser.add_argument("--keep", type=Path, help="build the store here (default: a temporary "
                                                  "folder, removed)")
    args = parser.parse_args()
    if args.out.exists():
        shutil.rmtree(args.out)
    work = args.keep or Path(tempfile.mkdtemp(prefix="proactflow-frozen-"))
    if work.exists() and args.keep:
        shutil.rmtree(work)
    work.mkdir(parents=True, exist_ok=True)
    try:
        produce(args.out, work)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    found = digests(args.out)
    if args.manifest:
        args.manifest.write_text("".join(f"{d}  {p}\n" for p, d in found.items()))
    print(f"{len(found)} files in {args.out}")
    if args.check:
        frozen = dict(reversed(line.rstrip("\n").split("  ", 1))
                      for line in args.check.read_text().splitlines())
        differing = sorted(p for p in {*frozen, *found} if frozen.get(p) != found.get(p))
        for path in differing:
            print(f"differs: {path} ({'missing' if path not in found else 'new' if path not in frozen else 'changed'})")
        print(f"{len(differing)} of {len(frozen)} frozen files differ")
        return 1 if differing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
