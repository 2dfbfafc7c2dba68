"""The benchmark's seven datasets: the short names of its test scripts and the full names of its
files (`<full name>_preprocessed.jsonl`); and the two choices a run's options make among them:
which datasets (`--datasets`), which mode (`--mode`)."""

from __future__ import annotations

from dataclasses import dataclass

from ...common.errors import UserError
from ...config.settings import RunSettings
from .tables import Mode


@dataclass(frozen=True)
class Dataset:
    short: str
    """The key of the package's test scripts and of `PREDICTION_THR` (e.g. "ROD")."""
    full: str
    """The package's own name, which names the corpus file (e.g. "Realistic-Occlusion-Dataset")."""

    @property
    def file_name(self) -> str:
        return f"{self.full}_preprocessed.jsonl"


DATASETS: tuple[Dataset, ...] = (
    Dataset("ROD", "Realistic-Occlusion-Dataset"),
    Dataset("VSOD", "OcclusionDataSet-MM20"),
    Dataset("MVP-N", "MVP-N"),
    Dataset("IN-C", "ImageNet-C"),
    Dataset("QD", "QuickDraw"),
    Dataset("CIT", "ChangeIt"),
    Dataset("COCO", "coco2014"),
)
BY_SHORT = {d.short: d for d in DATASETS}
BY_FULL = {d.full: d for d in DATASETS}


def dataset(name: str) -> Dataset:
    """A dataset by its short or full name (exact spelling, as the package spells it)."""
    found = BY_SHORT.get(name) or BY_FULL.get(name)
    if found is None:
        raise UserError(f"unknown dataset {name!r}; valid: {valid_names()}")
    return found


def valid_names() -> str:
    return ", ".join(f"{d.short} ({d.full})" if d.short != d.full else d.short
                     for d in DATASETS)


def parse_datasets(value: str | None) -> tuple[Dataset, ...]:
    """`--datasets`: short or full names, comma separated, in the benchmark's order whatever
    the order given; None or empty selects all seven."""
    if value is None or not value.strip():
        return DATASETS
    names = [part.strip() for part in value.split(",") if part.strip()]
    unknown = [n for n in names if n not in BY_SHORT and n not in BY_FULL]
    if unknown:
        raise UserError(f"--datasets: unknown {', '.join(repr(n) for n in unknown)}; "
                        f"valid: {valid_names()}")
    chosen = {dataset(n) for n in names}
    return tuple(d for d in DATASETS if d in chosen)


def mode_of(settings: RunSettings) -> Mode:
    return "oeg" if settings.suite_options.get("mode") == "oeg" else "mcqa"
