"""`proactflow import`: a benchmark's published results stored as the stages a run would
store, so they can be reported, compared or re-judged without paying for generation.

What a results file or folder holds and how it maps onto the suite's tables is the suite's
(its declared `imports` module, suites/stored_results.py); what an import needs of the run
layer is lent to it here: the samples and scores materialised as a run does, a stage's key, and
the run record an import leaves so that `runs ls` lists it and `gc` keeps what it stored.
"""

from __future__ import annotations

import uuid
from datetime import datetime, timezone
from pathlib import Path

from ...cache.artifacts import Artifact, ArtifactSpec, ArtifactStore
from ...config.settings import RunSettings
from ...run.pipeline import materialize_samples, materialize_scores
from ...run.run_records import record_name
from ...run.stage_keys import StageKeys
from ...suites import get_suite
from ...suites.base import Prompts, Suite
from ...suites.stored_results import ImportTools

UNKNOWN_PROMPT = "unknown"
"""The judge prompt of published labels: not established by the files, so not claimed."""


class StoreImportTools(ImportTools):
    """ImportTools over one store."""

    def __init__(self, store: ArtifactStore) -> None:
        self.store = store

    def samples(self, suite: Suite, settings: RunSettings) -> Artifact:
        return materialize_samples(suite, settings, self.store)[0]

    def scores(self, suite: Suite, judgments: Artifact) -> Artifact:
        return materialize_scores(suite, self.store, judgments)[0]

    def responses_spec(self, suite: Suite, settings: RunSettings, samples_key: str,
                       prompts: Prompts) -> ArtifactSpec:
        return StageKeys(suite, settings).responses(samples_key, prompts)

    def record(self, path: Path, digest: str, model: str, judge: str,
               artifacts: dict[str, str], corpus_revision: str | None) -> None:
        started = datetime.now(timezone.utc)
        run_id = uuid.uuid4().hex
        self.store.write_json(record_name(started, run_id), {
            "run_id": run_id, "flow": "import", "started": started.isoformat(),
            "finished": started.isoformat(), "complete": True,
            "imported_file": str(path), "imported_file_sha256": digest,
            "model_under_test": {"model": model}, "judge": {"model": judge},
            "judge_prompt_sha256": UNKNOWN_PROMPT, "corpus_revision": corpus_revision,
            "artifacts": artifacts})


def import_published(suite_name: str, source: str, store: ArtifactStore, *,
                     corpus: str | None, judge: str, model: str | None) -> list[str]:
    """Store one file or folder of `suite_name`'s published results; the lines the command
    prints about it."""
    return get_suite(suite_name).import_published(
        source, store, StoreImportTools(store), corpus=corpus, judge=judge, model=model)
