"""What a suite declares besides its methods (suites/base.py): where its data is, its
episodes' steps, its stages' names and versions, its tables' row models and its prompts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from .sources import Prompt


@dataclass(frozen=True)
class DataSource:
    """Where a suite's samples come from, located but not yet parsed: `revision` (a hub commit,
    a pinned repository commit, or a local file's sha256) enters the samples' key."""

    revision: str
    description: str
    location: Any = None
    """What the suite needs to read the data (a path, a folder, a hub snapshot)."""


Step = tuple[dict[str, Any], dict[str, Any]]
"""One answered step of an episode: (its sample row, its response row)."""


@dataclass(frozen=True)
class StageNames:
    """The artifact folder of each of the suite's four tables, and the version of what fills
    it (bumped when the suite changes what a table holds)."""

    samples: str
    responses: str
    judgments: str
    scores: str
    versions: dict[str, int] = field(default_factory=dict)

    def version(self, stage: str) -> int:
        return self.versions.get(stage, 1)


@dataclass(frozen=True)
class Tables:
    """The row model (pydantic, a description per field) of each table. Responses and
    judgments rows carry `status`, `sample_index`, `prompt_tokens` and `completion_tokens`
    (the run's record sums them)."""

    samples: type[BaseModel]
    responses: type[BaseModel]
    judgments: type[BaseModel]
    scores: type[BaseModel]


@dataclass(frozen=True)
class Prompts:
    """The prompts of one role, by name; their hashes enter that role's artifact keys."""

    by_name: dict[str, Prompt] = field(default_factory=dict)

    def __getitem__(self, name: str) -> Prompt:
        return self.by_name[name]

    def hashes(self) -> dict[str, str]:
        return {name: prompt.sha256 for name, prompt in sorted(self.by_name.items())}
