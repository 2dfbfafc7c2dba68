"""The memory the responses stage holds for its finished rows (proactflow/stages/responses.py),
at the video suite's full size: 170,000 step rows of the video ProactiveBench, held the way the
stage held them before 2026-11-29 (each row object until the stage ended, then every row dumped
again to build the table) and the way it holds them now (as Arrow, CHUNK_ROWS at a time).

Run by hand from the repository root (not part of the tests):

    .venv/bin/python benchmarks/response_rows.py [--rows 170000]

Python's memory is tracemalloc's peak, Arrow's is pyarrow's allocator's; the rows are
synthetic but shaped as a cold run's (a silent step, one frame brought, a 64-hex request key).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
import time
import tracemalloc

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # before litellm is imported

import pyarrow as pa  # noqa: E402

from proactflow.schemas.arrow import ArrowRows, arrow_schema, to_frame  # noqa: E402
from proactflow.suites.proactivebench_video.tables import StepRow  # noqa: E402


def row(step: int) -> StepRow:
    return StepRow(part="EGO", question_id=f"ego-{step // 1240}", step=step % 1240,
                   sample_index=0, model="openai/watcher", status="ok", message=None,
                   response="NO REPLY", silent=True, reply_time=float(step % 1240 + 1),
                   frame_times=[float(step % 1240)], images_sent=32, subtitles=[],
                   finish_reason="stop", prompt_tokens=4400, completion_tokens=2,
                   latency_s=0.01, attempts=1,
                   request_key=hashlib.sha256(str(step).encode()).hexdigest())


def held_as_objects(rows: int) -> tuple[float, float]:
    kept = []
    for step in range(rows):
        made = row(step)
        made.model_dump(by_alias=True)
        kept.append(made)
    frame = to_frame(kept, StepRow)
    return frame.height, float(pa.total_allocated_bytes())


def held_as_arrow(rows: int) -> tuple[float, float]:
    kept = ArrowRows(arrow_schema(StepRow))
    for step in range(rows):
        kept.append(row(step).model_dump(by_alias=True))
    table = kept.table()
    return table.num_rows, float(pa.total_allocated_bytes())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=170_000)
    rows = parser.parse_args().rows
    for name, hold in (("row objects, then dumped again (before)", held_as_objects),
                       ("Arrow, 2,048 rows at a time (now)", held_as_arrow)):
        gc.collect()
        tracemalloc.start()
        started = time.process_time()
        made, arrow = hold(rows)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert made == rows
        print(f"{name}: {rows:,} rows, Python peak {peak / 2**20:.0f} MB, Arrow at the end "
              f"{arrow / 2**20:.0f} MB, {time.process_time() - started:.1f} s of CPU "
              f"(traced)", flush=True)


if __name__ == "__main__":
    main()
