"""The video ProactiveBench through the whole pipeline against the fake OpenAI-compatible server
of the tests, at today's clip size and at the real one, and the plan of a full-size corpus.

Run by hand from the repository root (not part of the tests):

    .venv/bin/python benchmarks/video_episode.py [--only small,real,plan] [--repeat N]
        [--plan-steps 170000] [--real-lengths 40,160]

- small: one EGO-sized sample (a 360 s mpeg4 clip at 320x180 and 10 fps: 360 steps), run
  three times on one store: `--dry-run` (decodes the clip and walks the plan), the run (360
  model calls, then the judge), the run again (every call cached, no decoding); start-up
  included in the per-step figures, as before.
- real: a 1280x720, 30 fps clip at two lengths (40 s and 160 s by default, `--real-lengths`;
  the shorter cut from the longer), each run cold on a fresh store (decoding, plan and calls
  in one run) and then cached; the marginal CPU of a step is the difference of the two
  lengths' CPU over the difference of their steps (start-up cancels out), cold and cached.
  With --repeat N each is run N times and the median is printed. The longer clip's frames
  are also made alone first, in a process of their own: the part of a cold step's CPU that no
  model call changes.
- plan: a generated corpus of many samples, `--plan-steps` steps in all (small videos shared
  by several samples, TV samples with subtitles), planned with `--dry-run` twice: first on a
  fresh store (every video decoded, then the plan), then again (the plan alone).

Each command runs in a child process measured as benchmarks/measure.py does (CPU of its
whole process tree, the temporary Prefect server included; peak memory, the largest resident
set in the tree). The fake model answers at once (NO REPLY, a reply every 60 s): the figures
are proactflow's own cost per step, not a model's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import av

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

import video_frames  # noqa: E402
from fake_openai import FakeOpenAI, Reply  # noqa: E402
from measure import Measured, child_env, measured  # noqa: E402

SECONDS = 360
REAL = (1280, 720, 30)
REAL_LENGTHS = (40, 160)


def model(request: dict) -> Reply:
    steps = sum(1 for message in request["messages"] if message["role"] == "user")
    return Reply(content="A square moves across." if steps % 60 == 0 else "NO REPLY")


def judge(request: dict) -> Reply:
    return Reply(content="2")


def gold(n: int, start: float) -> dict:
    return {"role": "assistant", "content": f"The square crosses ({n}).",
            "related_timespan": [start, start + 20], "reply_timespan": [start, start + 21]}


def write_corpus(corpus: Path, frames: tuple[int, int, int], seconds: int,
                 gold_starts: tuple[int, ...], question_id: str) -> None:
    """An EGO part of one clip (`frames`: width, height, fps) whose three gold turns, a square
    crossing, start at `gold_starts` seconds."""
    (corpus / "EGO").mkdir(parents=True)
    video_frames.SECONDS = seconds
    video_frames.write_clip(corpus / "EGO" / "clip.mp4", *frames, noise=False)
    _write_annotation(corpus, seconds, gold_starts, question_id)


def _write_annotation(corpus: Path, seconds: int, gold_starts: tuple[int, ...],
                      question_id: str) -> None:
    (corpus / "EGO" / "anno.json").write_text(json.dumps([{
        "video": "clip.mp4", "question_id": question_id, "duration": float(seconds),
        "conversation": [{"role": "user", "content": "Tell me when the square crosses.",
                          "time": 0}],
        "answer": [gold(n, start) for n, start in enumerate(gold_starts)]}]), encoding="utf-8")


def cut(source: Path, target: Path, seconds: float) -> None:
    """The first `seconds` of a clip, its packets copied (no re-encoding)."""
    with av.open(str(source)) as given, av.open(str(target), "w") as out:
        stream = given.streams.video[0]
        copy = out.add_stream_from_template(stream)
        for packet in given.demux(stream):
            if packet.dts is None or packet.pts is None:
                continue
            if packet.pts * packet.time_base >= seconds:
                break
            packet.stream = copy
            out.mux(packet)


def run_args(fake: FakeOpenAI, corpus: Path, store: Path, parts: str = "EGO") -> list[str]:
    return [sys.executable, "-m", "proactflow.cli", "run", "--suite", "proactivebench-video",
            "--eval-vision", "--corpus", str(corpus), "--parts", parts,
            "--eval-model", "openai/watcher", "--eval-api-base", fake.url,
            "--judge-model", "openai/grader", "--judge-api-base", fake.url,
            "--store", str(store)]


def timed(command: list[str], home: Path) -> Measured:
    return measured(command, child_env(home), ROOT)


def small(fake: FakeOpenAI, folder: Path) -> None:
    corpus = folder / "small"
    write_corpus(corpus, (320, 180, 10), SECONDS, (50, 170, 339), "ego-bench")
    print(f"small clip: {SECONDS} s, 320x180 at 10 fps, "
          f"{(corpus / 'EGO' / 'clip.mp4').stat().st_size / 1e6:.1f} MB")
    store = folder / "small-store"
    for name, extra in (("dry run (decode + plan)", ["--dry-run"]), ("run", []),
                        ("second run (cached)", [])):
        fake.reset_counts()
        got = timed([*run_args(fake, corpus, store), *extra], folder / "home")
        print(f"  {name}: {got.wall_s:.1f} s wall, {got.cpu_s:.1f} s CPU "
              f"({1000 * got.cpu_s / SECONDS:.1f} ms a step, start-up included), peak "
              f"{got.peak_rss_mb:.0f} MB; model calls {fake.calls['watcher']}", flush=True)


def real(fake: FakeOpenAI, folder: Path, repeat: int,
         lengths: tuple[int, int] = REAL_LENGTHS) -> dict[str, float]:
    """The marginal CPU of a step cold and cached (ms, medians) and the tree's peak (MB), from
    clips of the two `lengths` (seconds: the shorter cut from the longer)."""
    width, height, fps = REAL
    short, long = lengths
    corpora = {seconds: folder / f"real-{seconds}" for seconds in lengths}
    started = time.monotonic()
    write_corpus(corpora[long], REAL, long, (long // 4, long // 2, long - 21), "ego-real")
    (corpora[short] / "EGO").mkdir(parents=True)
    cut(corpora[long] / "EGO" / "clip.mp4", corpora[short] / "EGO" / "clip.mp4", short)
    _write_annotation(corpora[short], short, (short // 4, short // 2, short - 21), "ego-real")
    print(f"real clips: {width}x{height} at {fps} fps, {short} s and {long} s "
          f"({(corpora[long] / 'EGO' / 'clip.mp4').stat().st_size / 1e6:.1f} MB), written in "
          f"{time.monotonic() - started:.0f} s", flush=True)
    result: dict[str, float] = {"frame": frame_alone(corpora[long] / "EGO" / "clip.mp4",
                                                     folder / "frames-alone")}
    print(f"  the frame alone (decoded, scaled, JPEG, its file; the long clip in a process of "
          f"its own): {result['frame']:.2f} ms of CPU a step", flush=True)
    figures: dict[tuple[int, str], list[Measured]] = {}
    for attempt in range(repeat):
        for seconds in lengths:
            store = folder / f"real-store-{seconds}-{attempt}"
            for name in ("cold", "cached"):
                got = timed(run_args(fake, corpora[seconds], store), folder / "home")
                figures.setdefault((seconds, name), []).append(got)
                print(f"  {seconds} s {name}: {got.cpu_s:.2f} s CPU, {got.wall_s:.1f} s wall, "
                      f"peak {got.peak_rss_mb:.0f} MB", flush=True)
    steps = long - short
    for name in ("cold", "cached"):
        marginal = [1000 * (b.cpu_s - a.cpu_s) / steps for a, b in
                    zip(figures[(short, name)], figures[(long, name)])]
        peak = max(m.peak_rss_mb for seconds in lengths for m in figures[(seconds, name)])
        result[name] = statistics.median(marginal)
        result["peak"] = max(result.get("peak", 0.0), peak)
        print(f"real size, {name}: marginal CPU of a step {statistics.median(marginal):.2f} ms "
              f"(median of {len(marginal)}: {', '.join(f'{v:.2f}' for v in marginal)}); "
              f"peak memory of the process tree {peak:.0f} MB", flush=True)
    return result


def frame_alone(video: Path, store: Path) -> float:
    """CPU a step (ms) of making the frames of `video` alone, as a cold run's step does before
    its call: the part of the cold step's cost no model call changes."""
    _, cpu, count, _, _ = video_frames.decoded_apart(video, store)
    return 1000 * cpu / count


def plan_corpus(corpus: Path, total_steps: int) -> tuple[int, int]:
    """Parts of samples summing to `total_steps` steps, each 360 s video shared by several
    samples (small videos: what the plan costs does not depend on the frames' size)."""
    seconds, per_video = 360, 6
    steps: list[int] = []
    while (left := total_steps - sum(steps)) > 0:  # 150 to 360 steps a sample
        count = min(left, 150 + (len(steps) * 37) % 211)
        steps.append(left if left - count < 30 and left <= seconds else count)
    parts = ("WEB", "EGO", "TV", "VAD")
    annotations: dict[str, list[dict]] = {part: [] for part in parts}
    videos = 0
    for i, count in enumerate(steps):
        part = parts[i % 4]
        name = f"v{i // per_video:04d}.mp4"
        path = corpus / part / name
        if not path.exists():
            video_frames.SECONDS = seconds
            path.parent.mkdir(parents=True, exist_ok=True)
            video_frames.write_clip(path, 96, 54, 2, noise=False)
            videos += 1
        conversation = [{"role": "user", "content": f"Question {i}: tell me when it crosses.",
                         "time": 0}]
        if part == "TV":
            conversation += [{"role": "user", "content": f"Subtitle: (Ann:)line {t}.",
                              "time": t + 0.5} for t in range(3, count, 7)]
        annotations[part].append({
            "video": name, "question_id": f"{part.lower()}-{i}", "duration": float(seconds),
            "conversation": conversation,
            "answer": [gold(0, max(0, count // 2 - 10)), gold(1, max(0, count - 21))]})
    for part, items in annotations.items():
        (corpus / part / "anno.json").write_text(json.dumps(items), encoding="utf-8")
    return len(steps), videos


def plan(fake: FakeOpenAI, folder: Path, total_steps: int) -> list[Measured]:
    """The two dry runs: on a fresh store, then the plan alone."""
    corpus = folder / "plan"
    started = time.monotonic()
    samples, videos = plan_corpus(corpus, total_steps)
    print(f"plan corpus: {samples} samples, {total_steps} steps, {videos} videos of 360 s "
          f"(96x54, 2 fps), written in {time.monotonic() - started:.0f} s", flush=True)
    store = folder / "plan-store"
    runs: list[Measured] = []
    for name in ("dry run on a fresh store (decode every video + plan)",
                 "dry run again (the plan alone)"):
        got = timed([*run_args(fake, corpus, store, "WEB,EGO,TV,VAD"), "--dry-run"],
                    folder / "home")
        summary = next((line.strip() for line in got.output.splitlines()
                        if "samples," in line), "")
        print(f"  {name}: {got.wall_s:.1f} s wall, {got.cpu_s:.1f} s CPU, peak "
              f"{got.peak_rss_mb:.0f} MB; {summary}", flush=True)
        runs.append(got)
    return runs


def summary(real_size: dict[str, float] | None, plans: list[Measured] | None) -> None:
    """The figures of issue #40's "done when", each beside its target."""
    def line(what: str, value: float, unit: str, target: float) -> None:
        print(f"  {what}: {value:.2f} {unit} (target at most {target:g} {unit}: "
              f"{'met' if value <= target else 'NOT met'})")

    print(f"summary (load {' '.join(f'{v:.1f}' for v in os.getloadavg())}):")
    if real_size is not None:
        line("1280x720 30 fps, marginal CPU of a step, cold", real_size["cold"], "ms", 4)
        print(f"    of which the frame alone: {real_size['frame']:.2f} ms; the rest is the model "
              f"call through litellm (ci_figures.py --only edge: its CPU per call) and the step")
        line("1280x720 30 fps, marginal CPU of a step, cached", real_size["cached"], "ms", 1)
        line("1280x720 30 fps, peak memory of the process tree", real_size["peak"], "MB", 400)
    if plans:
        for what, got in zip(("full-size plan --dry-run, fresh store (decoding included)",
                              "full-size plan --dry-run, frames stored (the plan alone)"), plans):
            line(f"{what}, wall time", got.wall_s, "s", 120)
            line(f"{what}, peak memory", got.peak_rss_mb, "MB", 1024)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="small,real,plan")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--plan-steps", type=int, default=170_000)
    parser.add_argument("--real-lengths", default=",".join(map(str, REAL_LENGTHS)),
                        help="the real-size clips' two lengths in seconds, SHORT,LONG (default "
                             "%(default)s): a longer LONG resolves the cached step's margin, "
                             "whose start-up noise is about a second of CPU")
    options = parser.parse_args()
    try:
        short, long = (int(value) for value in options.real_lengths.split(","))
    except ValueError:
        parser.error(f"--real-lengths: expected SHORT,LONG in seconds, got "
                     f"{options.real_lengths!r}")
    if not 30 <= short < long:
        parser.error(f"--real-lengths: expected 30 <= SHORT < LONG, got {short},{long}")
    chosen = set(options.only.split(","))
    print(f"load: {os.getloadavg()[0]:.1f} {os.getloadavg()[1]:.1f} "
          f"{os.getloadavg()[2]:.1f} on {os.cpu_count()} cores", flush=True)
    with tempfile.TemporaryDirectory() as name, FakeOpenAI(
            {"watcher": model, "grader": judge}) as fake:
        folder = Path(name)
        if "small" in chosen:
            small(fake, folder)
        real_size = real(fake, folder, options.repeat, (short, long)) if "real" in chosen \
            else None
        plans = plan(fake, folder, options.plan_steps) if "plan" in chosen else None
        summary(real_size, plans)


if __name__ == "__main__":
    main()
