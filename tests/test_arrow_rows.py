"""The responses stage's rows gathered as Arrow a chunk at a time (schemas/arrow.ArrowRows): the
same table as all the rows converted at once, across chunk boundaries, and none at all."""

from __future__ import annotations

import pyarrow as pa

from proactflow.schemas import arrow
from proactflow.schemas.arrow import ArrowRows, arrow_schema, to_arrow
from proactflow.suites.proactivebench_video.tables import StepRow


def _row(step: int) -> StepRow:
    return StepRow(part="EGO", question_id="q", step=step, sample_index=0, model="m",
                   status="ok" if step % 3 else "error", message=None if step % 3 else "boom",
                   response=None if step % 5 == 0 else f"reply {step} é", silent=step % 2 == 0,
                   reply_time=step + 1.0, frame_times=[float(step)] * (step % 3),
                   images_sent=step % 32, subtitles=["a"] * (step % 2), finish_reason="stop",
                   prompt_tokens=step, completion_tokens=None, latency_s=0.5, attempts=1,
                   request_key=f"{step:064x}")


def test_rows_in_chunks_are_the_table_of_all_rows(monkeypatch):
    monkeypatch.setattr(arrow, "CHUNK_ROWS", 4)  # 10 rows: two full chunks and a part
    rows = [_row(step) for step in range(10)]
    gathered = ArrowRows(arrow_schema(StepRow))
    for row in rows:
        gathered.append(row.model_dump(by_alias=True))
    table = gathered.table()
    assert table.schema == arrow_schema(StepRow)
    assert table.equals(to_arrow(rows, StepRow))


def test_no_rows_is_an_empty_table_of_the_schema():
    table = ArrowRows(arrow_schema(StepRow)).table()
    assert isinstance(table, pa.Table) and table.num_rows == 0
    assert table.schema == arrow_schema(StepRow)
