"""A model that changed behind its name, noticed at the start of a sweep.

One fresh request per model (under test and judge): a fixed tiny prompt, never answered from
the cache, whose reply names the model that served it and its system fingerprint. For an
endpoint of the user's, its `/v1/models` entry is already part of the responses' key (a
changed entry asks again by itself); the reply's served model and fingerprint are read all the
same. When what answers now differs from what answered the cached responses (as the series'
latest night recorded them), the sweep says so by name and date, and with `refresh_on_change`
asks that model again (the `--refresh` mechanism: responses for a model under test, judgments
for a judge).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from ..config.settings import ModelRole, RunSettings
from ..providers.chat import api_key_for

PROBE_PROMPT = "Reply with the single word: ready."
PROBE_MAX_TOKENS = 16
PROBE_TIMEOUT_S = 60.0
PROBE_PROMPT_TOKENS = 16
"""An upper estimate of the probe's prompt tokens, for the plan's cost line."""


@dataclass(frozen=True)
class Probe:
    """What one fresh request found out about the model serving `model` now."""

    role: str
    """`model` (under test) or `judge`."""
    model: str
    served_model: str | None = None
    system_fingerprint: str | None = None
    error: str | None = None

    @property
    def snapshot(self) -> dict[str, str | None]:
        return {"served_model": self.served_model,
                "system_fingerprint": self.system_fingerprint}


@dataclass(frozen=True)
class Change:
    """A model whose served snapshot differs from the one that answered its cached results."""

    role: str
    model: str
    before: dict[str, Any]
    before_date: str
    now: dict[str, Any]
    now_date: str

    def line(self) -> str:
        def text(s: dict[str, Any]) -> str:
            return f"{s.get('served_model')} (fingerprint {s.get('system_fingerprint')})"
        what = "model under test" if self.role == "model" else "judge"
        return (f"{self.model} ({what}) changed behind its name: {text(self.before)} answered "
                f"its cached results on {self.before_date}, {text(self.now)} answers on "
                f"{self.now_date}")


async def _probe(role_name: str, role: ModelRole) -> Probe:
    import litellm

    kwargs: dict[str, Any] = {}
    if role.api_base:
        kwargs["api_base"] = role.api_base
    key = api_key_for(role)
    if key:
        kwargs["api_key"] = key
    try:
        response = await litellm.acompletion(
            model=role.model, messages=[{"role": "user", "content": PROBE_PROMPT}],
            max_tokens=PROBE_MAX_TOKENS, timeout=PROBE_TIMEOUT_S, max_retries=1, **kwargs)
    except Exception as exc:  # a probe that fails says so; the sweep's own calls decide
        return Probe(role_name, role.model, error=str(exc).splitlines()[0][:200] if str(exc)
                     else type(exc).__name__)
    return Probe(role_name, role.model, getattr(response, "model", None),
                 getattr(response, "system_fingerprint", None))


def roles_to_probe(runs: list[RunSettings]) -> dict[tuple[str, str], ModelRole]:
    """(role, model) -> its role settings, each model once."""
    found: dict[tuple[str, str], ModelRole] = {}
    for settings in runs:
        found.setdefault(("model", settings.model_under_test.model), settings.model_under_test)
        if settings.judge is not None:
            found.setdefault(("judge", settings.judge.model), settings.judge)
    return found


async def probe_all(runs: list[RunSettings],
                    known: set[tuple[str, str]] | None = None) -> list[Probe]:
    """One fresh request per model of the sweep (only those of `known` when given), all at
    once."""
    roles = roles_to_probe(runs)
    return list(await asyncio.gather(*(_probe(role, settings)
                                       for (role, model), settings in roles.items()
                                       if known is None or (role, model) in known)))


def changes(probes: list[Probe], latest: dict[tuple[str, str], tuple[dict[str, Any], str]],
            today: str) -> list[Change]:
    """The probed models whose snapshot differs from the one their latest night recorded."""
    found = []
    for probe in probes:
        before = latest.get((probe.role, probe.model))
        if probe.error or not probe.served_model or before is None:
            continue
        snapshot, date = before
        if (snapshot.get("served_model"), snapshot.get("system_fingerprint")) != \
                (probe.served_model, probe.system_fingerprint):
            found.append(Change(probe.role, probe.model, snapshot, date, probe.snapshot, today))
    return found


def refreshed(runs: list[RunSettings], found: list[Change]) -> list[RunSettings]:
    """`runs` with each pair calling a changed model asked again: its responses for a changed
    model under test, its judgments for a changed judge, both for both."""
    models = {c.model for c in found if c.role == "model"}
    judges = {c.model for c in found if c.role == "judge"}
    updated = []
    for settings in runs:
        stages = set()
        if settings.model_under_test.model in models:
            stages.add("responses")
        if settings.judge is not None and settings.judge.model in judges:
            stages.add("judgments")
        if settings.refresh:
            stages.add(settings.refresh)
        refresh = None if not stages else "all" if len(stages) > 1 else stages.pop()
        updated.append(settings.model_copy(update={"refresh": refresh}))
    return updated
