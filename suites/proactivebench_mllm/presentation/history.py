"""The multimodal ProactiveBench's nights in the history: each sample's ending and the variant's
headline figure (MCQA acc, OEG agg: the report's), resampling samples as the report's intervals
do. An episode ended on a view without pixels counts as MCQA's scores count it (not correct)."""

from __future__ import annotations

import polars as pl

from ...history_metric import mean_metric, samples_frame

METRIC = mean_metric("headline (MCQA acc, OEG agg)", "all")  # the scores' group of every dataset


def history_samples(judgments: pl.DataFrame) -> pl.DataFrame:
    ended = judgments.filter(pl.col("final")).sort("dataset", "sample_id", "sample_index")
    mcqa = pl.col("mode") == "mcqa"
    scored = pl.when(mcqa).then(pl.col("status").is_in(["scored", "image_error"])) \
        .otherwise(pl.col("status") == "scored")
    value = pl.when(mcqa).then(pl.col("correct_prediction").fill_null(False).cast(pl.Float64)) \
        .otherwise(pl.col("agg").cast(pl.Float64))
    verdict = pl.when(mcqa).then(
        pl.when(pl.col("correct_prediction")).then(pl.lit("correct"))
        .otherwise(pl.concat_str(pl.lit("wrong ("), pl.col("stop_reason").fill_null("-"),
                                 pl.lit(")")))
    ).otherwise(pl.format("ps {} cp {}", "ps", "cp"))
    sample = pl.concat_str("dataset", "sample_id", "sample_index", separator="|")
    return samples_frame(METRIC, ended.select(
        sample.alias("sample"), sample.alias("unit"), pl.col("dataset").alias("group"),
        pl.when(scored).then(verdict).alias("verdict"),
        pl.when(scored).then(value).alias("value"),
        pl.when(scored).then(1.0).alias("count")))


def view_sample(sample: str) -> str:
    """The viewer's sample showing a history sample."""
    dataset, sample_id, _ = sample.split("|")
    return f"{dataset}:{sample_id}"
