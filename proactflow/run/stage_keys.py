"""The artifact key of each stage: a hash of everything that changes its output and nothing
else (the suite's own settings, the roles' key material, the keys of the stages it is computed
from). Apart from materialisation (pipeline.py) because `status`, `--dry-run`, imports and tests
compute keys without running a stage.

The model an endpoint serves now enters the keys too: its fingerprint is taken at the start of
every run (`with_endpoint_fingerprints`), so a redeployed model gets new keys.
"""

from __future__ import annotations

from ..cache.artifacts import ArtifactSpec
from ..config.endpoints import endpoint_fingerprint
from ..config.settings import ModelRole, RunSettings
from ..providers.chat import api_key_for
from ..suites.base import DataSource, Prompts, Suite


def with_endpoint_fingerprints(settings: RunSettings, roles: tuple[str, ...] = (
        "model_under_test", "judge")) -> RunSettings:
    """Each role with its own endpoint, with the fingerprint of the model that endpoint serves
    now (its /models entry), so a redeployed model gets new keys. Done at the start of every
    run, whoever starts it; a role whose endpoint lists no such model keeps none."""
    updates = {}
    for name in roles:
        role: ModelRole | None = getattr(settings, name)
        if role is not None and role.api_base and role.endpoint_fingerprint is None:
            fingerprint = endpoint_fingerprint(role.api_base, role.model, api_key_for(role))
            if fingerprint is not None:
                updates[name] = role.model_copy(update={"endpoint_fingerprint": fingerprint})
    return settings.model_copy(update=updates) if updates else settings


def samples_spec(suite: Suite, settings: RunSettings, source: DataSource) -> ArtifactSpec:
    stage = suite.stages.samples
    return ArtifactSpec(stage, suite.stages.version(stage), {},
                        suite.samples_key_settings(settings, source))


def responses_spec(suite: Suite, settings: RunSettings, samples_key: str,
                   prompts: Prompts) -> ArtifactSpec:
    stage = suite.stages.responses
    return ArtifactSpec(stage, suite.stages.version(stage), {suite.stages.samples: samples_key}, {
        "model_under_test": settings.model_under_test.key_material(),
        "samples": settings.samples, **suite.responses_key_settings(settings, prompts)})


def judgments_spec(suite: Suite, settings: RunSettings, responses_key: str,
                   prompts: Prompts) -> ArtifactSpec:
    stage = suite.stages.judgments
    judge = settings.judge.key_material() if settings.judge is not None else None
    return ArtifactSpec(stage, suite.stages.version(stage), {suite.stages.responses: responses_key},
                        {"judge": judge, **suite.judgments_key_settings(settings, prompts)})


def scores_spec(suite: Suite, judgments_key: str) -> ArtifactSpec:
    stage = suite.stages.scores
    return ArtifactSpec(stage, suite.stages.version(stage), {suite.stages.judgments: judgments_key},
                        {})
