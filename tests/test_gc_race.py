"""`proactflow gc` racing a run that reuses what gc planned to remove (issue #20, item 6): gc
looks at each artifact again right before removing it, and a run that finds its chosen artifact
gone computes it again instead of failing."""

from __future__ import annotations

from datetime import timedelta

import pyarrow as pa
import pytest

from helpers import cli_args, run_cli
from test_store_admin import TWO_DAYS, age_files, parquet_files

from proactflow.cache.artifacts import ArtifactSpec, ArtifactStore
from proactflow.results.upkeep.gc import collect, plan_collection, summary_lines


def test_an_artifact_a_run_reuses_after_the_plan_is_kept(tmp_path):
    store = ArtifactStore(tmp_path / "store")
    specs = {tag: ArtifactSpec("judgments", 1, {}, {"tag": tag}) for tag in ("old", "reused")}
    for spec in specs.values():
        store.put(spec, pa.table({"x": [1]}))
    age_files(store.root, 3 * 86400)
    plan = plan_collection(store, keep_latest=None, older_than=timedelta(days=1))
    assert len(plan.removed_artifacts) == 2

    found = store.get(specs["reused"])  # a run chooses to reuse it after gc planned
    collect(store, plan)

    assert parquet_files(store.root) == {"judgments": {specs["reused"].key}}
    assert found is not None and found.frame().height == 1  # the run reads it
    line = summary_lines(plan, dry_run=False)[-1]
    assert line.startswith("removed 0 run records and 1 artifacts (1 judgments)") and \
        "(1 planned artifacts kept: a run reused them meanwhile)" in line and \
        line.endswith("kept 0 runs and 1 artifacts"), line


@pytest.mark.usefixtures("prefect_server")
@pytest.mark.parametrize("stage", ["triggers", "responses", "judgments", "phase_scores"])
def test_a_run_whose_reused_artifact_gc_removed_computes_it_again(
        fake, store, monkeypatch, stage):
    args = cli_args(fake, store, extra=("--limit", "2"))
    assert run_cli("run", args) == 0
    age_files(store / "artifacts", TWO_DAYS)
    chosen = []
    get = ArtifactStore.get

    def get_then_gc_removes(self, spec):
        found = get(self, spec)  # the run has chosen it, and marked it used ...
        if found is not None and spec.stage == stage:
            found.path.unlink()  # ... and gc, past its last look, removes it
            chosen.append(found.key)
        return found

    monkeypatch.setattr(ArtifactStore, "get", get_then_gc_removes)
    fake.reset_counts()
    assert run_cli("run", args) == 0
    assert chosen and chosen[0] in parquet_files(store)[stage]  # written again
    assert sum(fake.calls.values()) == 0  # from the call cache: nothing paid twice
