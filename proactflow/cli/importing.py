"""What `import --suite proactiveagent` prints: the counts, and every trace and event of the
published traces that does not match the test data, by name."""

from __future__ import annotations

from typing import Any

_SHOWN = 12


def _listed(names: list[str]) -> str:
    more = f", and {len(names) - _SHOWN} more" if len(names) > _SHOWN else ""
    return ", ".join(names[:_SHOWN]) + more


def print_traces_import(done: Any) -> None:
    """`done` is a results.published_traces.TracesImport."""
    from ..results.upkeep.published_traces import PUBLISHED_REVISION

    print(f"{done.folder}: {done.model} (revision {PUBLISHED_REVISION}): {done.imported} of "
          f"{done.events} test events imported ({done.failed_events} failed upstream, judged "
          f"as upstream judges them), responses {done.responses_key[:10]}")
    for label, names in (("events whose published text differs (imported)", done.changed),
                         ("events not in the published traces (not_imported rows)",
                          done.not_imported),
                         ("test traces without a published file", done.missing_traces),
                         ("published traces not in the test data (not imported)",
                          done.extra_traces)):
        if names:
            print(f"  {len(names)} {label}: {_listed(names)}")
    print(f"  judge them: proactflow rejudge --suite proactiveagent --eval-model {done.model} "
          f"--eval-revision {PUBLISHED_REVISION} --judge-model JUDGE ...")
