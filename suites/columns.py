"""Columns that several suites' tables hold, each said once: a table is a pydantic row model
whose fields are its columns in order (schemas/arrow.py derives its Parquet schema from them,
each column's description included), so a table reads as a list of columns, a shared one named
here, a suite's own with its Field in place."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

ModelUnderTest = Annotated[str, Field(description="Model under test.")]
NotOkReason = Annotated[str | None, Field(description="Why the row is not ok.")]

# A call to the model under test, as its responses row records it.
FinishReason = Annotated[str | None, Field(description="Provider finish reason.")]
PromptTokens = Annotated[int | None, Field(description="Prompt tokens reported by the provider.")]
CompletionTokens = Annotated[int | None, Field(description="Completion tokens reported.")]
CallLatency = Annotated[float | None,
                        Field(description="Wall time of the successful call, seconds.")]
RequestKey = Annotated[str | None, Field(description="Key of the call in the per-call cache.")]
SystemFingerprint = Annotated[str | None, Field(description="Provider fingerprint.")]
LitellmVersion = Annotated[str | None, Field(description="litellm that made the call.")]

# A judge call, as its judgments row records it.
JudgePromptSha = Annotated[str, Field(description="sha256 of the judge's system prompt.")]
JudgePromptTokens = Annotated[int | None, Field(description="Judge prompt tokens.")]
JudgeCompletionTokens = Annotated[int | None, Field(description="Judge completion tokens.")]
JudgeLatency = Annotated[float | None,
                         Field(description="Wall time of the successful judge call.")]
JudgeRequestKey = Annotated[str | None,
                            Field(description="Key of the judge call in the per-call cache.")]
