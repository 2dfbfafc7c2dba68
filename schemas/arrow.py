"""Derive an Arrow schema from a pydantic row model, so each table has one definition."""

from __future__ import annotations

import types
import typing
from datetime import datetime
from enum import Enum

import pyarrow as pa
import polars as pl
from pydantic import BaseModel

_SCALARS: dict[type, pa.DataType] = {
    str: pa.string(),
    int: pa.int64(),
    float: pa.float64(),
    bool: pa.bool_(),
    datetime: pa.timestamp("us", tz="UTC"),
}


def _arrow_type(annotation) -> tuple[pa.DataType, bool]:
    """Arrow type of an annotation and whether it admits None."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        if len(members) != 1:
            raise TypeError(f"unsupported union {annotation!r}")
        return _arrow_type(members[0])[0], True
    if origin is typing.Literal:
        return pa.string(), False
    if origin is list:
        return pa.list_(arrow_type_of(args[0])), False
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        return pa.string(), False
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return pa.struct(_fields(annotation)), False
    if annotation in _SCALARS:
        return _SCALARS[annotation], False
    raise TypeError(f"no Arrow type for {annotation!r}")


def arrow_type_of(annotation) -> pa.DataType:
    return _arrow_type(annotation)[0]


def _fields(model: type[BaseModel]) -> list[pa.Field]:
    fields = []
    for name, info in model.model_fields.items():
        data_type, nullable = _arrow_type(info.annotation)
        metadata = {"description": info.description} if info.description else None
        fields.append(pa.field(info.alias or name, data_type, nullable=nullable,
                               metadata=metadata))
    return fields


def arrow_schema(model: type[BaseModel]) -> pa.Schema:
    """The Arrow schema of a row model: one column per field, in declaration order."""
    return pa.schema(_fields(model))


def to_arrow(rows: typing.Iterable[BaseModel], model: type[BaseModel]) -> pa.Table:
    """Rows (validated pydantic models) as an Arrow table of the model's schema."""
    return pa.Table.from_pylist([row.model_dump(mode="python", by_alias=True) for row in rows],
                                schema=arrow_schema(model))


CHUNK_ROWS = 2048
"""Rows an ArrowRows converts at a time. The responses stage keeps its finished rows so, not as
the suite's row objects until the stage ends: 170,000 video step rows held 637 MB of Python
objects that way and 35 MB of Arrow this way (benchmarks/response_rows.py, 2026-11-29)."""


class ArrowRows:
    """Rows (as `model_dump(by_alias=True)` gives them) gathered as an Arrow table of `schema`,
    converted CHUNK_ROWS at a time (not thread-safe: the responses stage's episodes add to it
    from one event loop)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self._chunks: list[pa.Table] = []
        self._pending: list[dict[str, typing.Any]] = []

    def append(self, row: dict[str, typing.Any]) -> None:
        self._pending.append(row)
        if len(self._pending) >= CHUNK_ROWS:
            self._flush()

    def table(self) -> pa.Table:
        self._flush()
        return pa.concat_tables(self._chunks) if self._chunks else self.schema.empty_table()

    def _flush(self) -> None:
        if self._pending:
            self._chunks.append(pa.Table.from_pylist(self._pending, schema=self.schema))
            self._pending = []


def to_frame(rows: typing.Iterable[BaseModel], model: type[BaseModel]) -> pl.DataFrame:
    return frame_of(to_arrow(rows, model))


def frame_of(table: pa.Table) -> pl.DataFrame:
    """A polars frame of an Arrow table (from_arrow's signature also admits a Series)."""
    frame = pl.from_arrow(table)
    assert isinstance(frame, pl.DataFrame)
    return frame


def conform(frame: pl.DataFrame, model: type[BaseModel]) -> pa.Table:
    """A frame as Arrow with exactly the model's columns and types; fails on a missing column,
    unless its field has a default of None (a column added later: a table stored before it
    reads as having none)."""
    schema = arrow_schema(model)
    later = [info.alias or name for name, info in model.model_fields.items()
             if not info.is_required() and info.default is None]
    frame = frame.with_columns(pl.lit(None).alias(name) for name in later
                               if name not in frame.columns)
    missing = [name for name in schema.names if name not in frame.columns]
    if missing:
        raise ValueError(f"table for {model.__name__} lacks columns {missing}")
    return frame.select(schema.names).to_arrow().cast(schema)
