"""One EGO-sized sample of the video ProactiveBench (a 360 s clip: 360 steps) through the whole
pipeline against the fake OpenAI-compatible server of the tests.

Run by hand from the repository root (not part of the tests):

    .venv/bin/python benchmarks/video_episode.py [WIDTH HEIGHT FPS]

It writes a 360 s mpeg4 clip (320x180 at 10 fps by default, a moving square over flat shades),
an anno.json with three gold turns, and runs `proactflow run --suite proactivebench-video` three
times in child processes, each measured on its own (wall time, CPU time of the process and its
children, the peak memory of the CLI's own process): `--dry-run` on a fresh store (decodes the
clip and walks the plan), the run itself (360 model calls, then the judge), and the same run
again (every call cached, no decoding). The fake model answers from nothing (NO REPLY, and a
reply every 60 s), at once: the figures are proactflow's own cost per step, not a model's.
Request sizes are the JSON bodies the server received, images as base64 data URLs.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from video_frames import write_clip  # noqa: E402
from fake_openai import FakeOpenAI, Reply  # noqa: E402

SECONDS = 360
RUNNER = """
import atexit, resource, sys
from proactflow.cli import main
atexit.register(lambda: print("PEAK_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                              file=sys.stderr))
sys.exit(main(sys.argv[1:]))
"""


def model(request: dict) -> Reply:
    steps = sum(1 for message in request["messages"] if message["role"] == "user")
    return Reply(content="A square moves across." if steps % 60 == 0 else "NO REPLY")


def judge(request: dict) -> Reply:
    return Reply(content="2")


def measured(args: list[str]) -> dict[str, float]:
    """Wall time, CPU time and peak memory of one CLI run in a child process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", RUNNER, *args], capture_output=True,
                          text=True)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"the run failed ({done.returncode}): {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    peak = next(int(line.split()[1]) for line in done.stderr.splitlines()
                if line.startswith("PEAK_KB"))
    return {"wall_s": wall, "cpu_s": cpu, "peak_rss_mb": peak / 1024,
            "largest_child_mb": after.ru_maxrss / 1024}


def write_corpus(corpus: Path, frames: tuple[int, int, int], seconds: int,
                 gold_starts: tuple[int, ...], question_id: str) -> None:
    """An EGO part of one clip (`frames`: width, height, fps) whose three gold turns, a square
    crossing, start at `gold_starts` seconds."""
    (corpus / "EGO").mkdir(parents=True)
    write_clip(corpus / "EGO" / "clip.mp4", *frames, noise=False)
    gold = [{"role": "assistant", "content": f"The square crosses ({n}).",
             "related_timespan": [start, start + 20], "reply_timespan": [start, start + 21]}
            for n, start in enumerate(gold_starts)]
    (corpus / "EGO" / "anno.json").write_text(json.dumps([{
        "video": "clip.mp4", "question_id": question_id, "duration": float(seconds),
        "conversation": [{"role": "user", "content": "Tell me when the square crosses.",
                          "time": 0}], "answer": gold}]), encoding="utf-8")


def main() -> None:
    width, height, fps = (int(v) for v in sys.argv[1:4]) if len(sys.argv) >= 4 else (320, 180, 10)
    with tempfile.TemporaryDirectory() as folder, FakeOpenAI(
            {"watcher": model, "grader": judge}) as fake:
        corpus = Path(folder) / "corpus"
        write_corpus(corpus, (width, height, fps), SECONDS, (50, 170, 339), "ego-bench")
        args = ["run", "--suite", "proactivebench-video", "--eval-vision", "--corpus", str(corpus),
                "--parts", "EGO", "--eval-model", "openai/watcher", "--eval-api-base",
                fake.url, "--judge-model", "openai/grader", "--judge-api-base", fake.url,
                "--store", str(Path(folder) / "store")]
        print(f"clip: {SECONDS} s, {width}x{height} at {fps} fps, "
              f"{(corpus / 'EGO' / 'clip.mp4').stat().st_size / 1e6:.1f} MB")
        for name, extra in (("dry run (decode + plan)", ["--dry-run"]), ("run", []),
                            ("second run (cached)", [])):
            fake.reset_counts()
            figures = measured([*args, *extra])
            calls = fake.calls["watcher"]
            line = (f"{name}: {figures['wall_s']:.1f} s wall, {figures['cpu_s']:.1f} s CPU "
                    f"({1000 * figures['cpu_s'] / SECONDS:.1f} ms per step), peak "
                    f"{figures['peak_rss_mb']:.0f} MB (largest process so far "
                    f"{figures['largest_child_mb']:.0f} MB); model calls {calls}, judge calls "
                    f"{fake.calls['grader']}")
            sizes = [len(json.dumps(r)) for r in fake.requests if r["model"] == "watcher"]
            if sizes:
                line += (f"; request body mean {sum(sizes) / len(sizes) / 1e6:.2f} MB, max "
                         f"{max(sizes) / 1e6:.2f} MB, all {sum(sizes) / 1e6:.0f} MB")
            print(line, flush=True)


if __name__ == "__main__":
    main()
