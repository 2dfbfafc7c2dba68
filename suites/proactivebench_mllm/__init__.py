"""The multimodal ProactiveBench (`proactivebench` 0.1.1, MIT): its environments re-implemented
as pure state transitions, its corpus reader and its open-ended judge protocol.

- datasets: the seven datasets and `parse_datasets` (--datasets);
- upstream: FILTER, the OEG judge prompts and PREDICTION_THR, read from the pinned wheel;
- corpus: `read_corpus` / `read_dataset` (the package's selection), `check_first_images`;
- environment: `start`, `view`, `read_reply`, `step`, `play`, `abandon`, `statistics`,
  `stop_reason` (rules, replies and sample hold the per-dataset rules they apply);
- images: `image_bytes` (what to send), `shown_image`, `pixel_digest`;
- oeg: question, valid answers, judge messages and parsing; scores: MCQA acc and ps.
"""
