"""What a suite shows: the console's table after a run, a sweep's leaderboard and headline, its
report section, its variant's name, its verdicts for the history of nights, and the viewer's list
and pages.

Suite (base.py) inherits these defaults; a benchmark overrides the ones it needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, ClassVar, Iterator

import polars as pl

from ..cache.artifacts import ArtifactStore
from ..config.settings import RunSettings
from .declarations import (ReportPart, SampleView, StageNames, SuiteModules, Tables,
                           ViewColumn, ViewSpec)
from .history_metric import HistoryMetric


class SuitePresentation:
    """The reporting and viewing defaults of Suite; the class attributes below are Suite's."""

    group_column: ClassVar[str]
    sample_key: ClassVar[tuple[str, ...]]
    stages: ClassVar[StageNames]
    tables: ClassVar[Tables]

    modules: ClassVar[SuiteModules] = SuiteModules()
    """The suite's modules of views and history (declarations.py), declared once."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        history = cls.modules.module("history")
        if history is not None and "history_metric" not in cls.__dict__:  # its module's METRIC
            cls.history_metric = history.METRIC

    def score(self, judgments: pl.DataFrame) -> pl.DataFrame:
        raise NotImplementedError

    # One run: the console's table.

    def console_columns(self) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
        """(header, cell) of each column of the scores table printed after a run."""
        return [(name, _column(name)) for name in self.tables.scores.model_fields]

    def console_columns_for(self, settings: RunSettings
                            ) -> list[tuple[str, Callable[[dict[str, Any]], str]]]:
        """The console columns of a run with these settings: all of them by default; a suite
        whose variants fill different columns leaves out those the run's variant never fills
        (a column left empty because nothing was scored is shown, with "-")."""
        return self.console_columns()

    def summary_rows(self, scores: pl.DataFrame) -> list[dict[str, Any]]:
        """The rows shown on the console and as the run's table artifact in the Prefect UI."""
        return scores.to_dicts()

    # Several evaluations: sweeps and reports.

    def sweep_leaderboard(self, store: ArtifactStore, judgments_keys: list[str], *,
                          seed: int = 0) -> pl.DataFrame:
        """The leaderboard of these evaluations (judgments artifact keys), as a sweep ranks
        them (results/report/sweeps.py writes its files). By default the declared report
        module's, else the scores table over all of them."""
        report = self.modules.module("report")
        if report is not None:
            return report.leaderboard(store, judgments_keys, include_incomplete=True, seed=seed)
        frames = [store.get_by_key(self.stages.judgments, key).frame() for key in judgments_keys]
        return self.score(pl.concat(frames, how="diagonal_relaxed"))

    reports_section: ClassVar[bool] = True
    """True for a suite with a section on `proactflow report`'s page: by default every suite,
    its declared report module's section or its scores per evaluation."""

    def report_section(self, store: ArtifactStore, out: Path, *, keys: list[str] | None,
                       include_incomplete: bool, published: Path | None
                       ) -> tuple[str, pl.DataFrame] | None:
        """The suite's section of the report page, its HTML and its leaderboard (written in
        `out` as <suite>_leaderboard.csv), over the evaluations `keys` (None: every one in the
        store); None when there is none. `published`: a folder of the benchmark's published
        results to show beside the measured ones, for a suite that has them. By default the
        declared report module's section, else each evaluation's scores table."""
        from .report_views import scores_section

        report = self.modules.module("report")
        if report is None:
            return scores_section(self, store, out, keys=keys,
                                  include_incomplete=include_incomplete)
        return report.section(store, out, keys=keys, include_incomplete=include_incomplete,
                              published=published)

    def headline(self, board: pl.DataFrame) -> tuple[list[str], list[list[str]]]:
        """The sweep summary's table: column names and one row per evaluation."""
        return list(board.columns), [[_cell(v) for v in row] for row in board.rows()]

    def variant_name(self, judgments: pl.DataFrame) -> str:
        """What tells an evaluation's variant apart in titles, folder names and labels (the
        multimodal suite: "oeg", "mcqa hint"); empty for a suite with one way to run."""
        return ""

    def settings_variant(self, settings: RunSettings) -> str:
        """`variant_name` from a run's settings, before any table exists: the console's title
        and a sweep's folder names carry it."""
        return ""

    evaluations_with_triggers: ClassVar[bool] = False
    """True for the suite whose evaluations the report, the viewer and the history's compare
    pages read with their samples and responses (results/evaluations.py: ProactBench's); the
    others' are results/suite_evaluations.py's."""

    def evaluations_report(self, out: Path, evaluations: list[Any], *, names: dict[str, str],
                           incomplete: list[Any], samples: int, seed: int) -> ReportPart:
        """The report page's part of a suite that evaluations_with_triggers, over those
        `evaluations` (results/evaluations.py's, each written under names[key]), listing the
        `incomplete` ones left out; it writes its files in `out`."""
        raise NotImplementedError(f"{type(self).__name__} reads its evaluations elsewhere")

    def evaluations_view(self, evaluations: list[Any], samples: list[list[Any]],
                         details: list[dict[str, Any]], rows: list[list[Any]],
                         only: set[str] | None) -> dict[str, Any]:
        """The viewer's part of a suite that evaluations_with_triggers: `evaluations`
        (results/evaluations.py's) added to the page's samples, detail records and rows as its
        suite 0 (with `only`, just those samples); returns the page's spec of its list."""
        raise NotImplementedError(f"{type(self).__name__} reads its evaluations elsewhere")

    compares_judges: ClassVar[bool] = False
    """True when `rejudge --judges` can report how far the judges agree (`judge_agreement`)."""

    def judge_agreement(self, judgments: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
        """(agreement per group and pair of judges, the samples they disagree on) over the
        judgments of several judges (suites that compares_judges)."""
        raise NotImplementedError(f"{type(self).__name__} does not compare judges")

    # The history of nights (results/history*.py): a figure per night, paired comparisons.

    history_metric: ClassVar[HistoryMetric | None] = None
    """The figure the history charts and compares across nights; None: a night of this suite
    is recorded without scores."""

    def history_samples(self, judgments: pl.DataFrame) -> pl.DataFrame | None:
        """Each sample's verdict in one evaluation, as history_metric.samples_frame makes it
        (sample, unit, group, verdict and the metric's components); None when the suite
        declares no history_metric."""
        history = self.modules.module("history")
        return history.history_samples(judgments) if history is not None else None

    def legacy_history_samples(self, samples: dict[str, list]) -> pl.DataFrame | None:
        """A night's samples recorded before this suite declared its history metric, as
        `history_samples` makes them; None when `samples` is not such a record."""
        return None

    def history_view_sample(self, sample: str) -> str:
        """The viewer's sample (SampleView.sample, the address's `t=`) showing a history
        sample: where a regression's changed samples link to."""
        history = self.modules.module("history")
        return history.view_sample(sample) if history is not None else sample

    # The viewer (results/viewer/site.py): what a person reads of one sample.

    def view_spec(self) -> ViewSpec:
        """The viewer's list for this suite. By default the sample key's columns and the group
        column, which is also a filter."""
        views = self.modules.module("views")
        if views is not None:
            return views.SPEC
        key = [column for column in self.sample_key if column != "sample_index"]
        second = key[1] if len(key) > 1 else "sample_index"
        return ViewSpec((ViewColumn(key[0], "26%"), ViewColumn(second, "60px"),
                         ViewColumn(self.group_column, "84px", filter=True)))

    def sample_views(self, store: ArtifactStore, judgments_key: str) -> Iterator[SampleView]:
        """What the viewer shows of each sample of one evaluation (a judgments artifact). By
        default each sample's judgments rows as a table, its outcome their status."""
        from .views import judgments_table_views

        views = self.modules.module("views")
        if views is not None:
            return views.sample_views(self, store, judgments_key)

        return judgments_table_views(self, store, judgments_key)


def _column(name: str) -> Callable[[dict[str, Any]], str]:
    return lambda row: _cell(row.get(name))


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def percent(value: float | None) -> str:
    """A rate as the console shows it."""
    return "-" if value is None else f"{100 * value:.1f}"
