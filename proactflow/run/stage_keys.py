"""The artifact key of each stage: a hash of everything that changes its output and nothing
else (the suite's own settings, the roles' key material, the keys of the stages it is computed
from). Computed here only, by StageKeys: materialisation (pipeline.py) asks it, and so do
`status`, `--dry-run`, imports and tests, which compute keys without running a stage.

The model an endpoint serves now enters the keys too: its fingerprint is taken at the start of
every run (`with_endpoint_fingerprints`), so a redeployed model gets new keys.
"""

from __future__ import annotations

from typing import Any

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


class StageKeys:
    """The key of every stage of a run with `settings`, computed here and nowhere else: from
    the suite's declarations (its stages' names and versions, the settings its data, responses
    and judgments depend on) and the roles' key material, each stage's key holding the key of
    the stage it is computed from."""

    def __init__(self, suite: Suite, settings: RunSettings | None = None) -> None:
        self.suite, self._given = suite, settings
        self.names = suite.stages

    @property
    def settings(self) -> RunSettings:
        """The run's settings (the scores' key alone is computed without them)."""
        assert self._given is not None, "this stage's key depends on the run's settings"
        return self._given

    def _spec(self, stage: str, inputs: dict[str, str], material: dict[str, Any]
              ) -> ArtifactSpec:
        return ArtifactSpec(stage, self.names.version(stage), inputs, material)

    def samples(self, source: DataSource) -> ArtifactSpec:
        return self._spec(self.names.samples, {},
                          self.suite.samples_key_settings(self.settings, source))

    def responses(self, samples_key: str, prompts: Prompts) -> ArtifactSpec:
        return self._spec(self.names.responses, {self.names.samples: samples_key}, {
            "model_under_test": self.settings.model_under_test.key_material(),
            "samples": self.settings.samples,
            **self.suite.responses_key_settings(self.settings, prompts)})

    def judgments(self, responses_key: str, prompts: Prompts) -> ArtifactSpec:
        judge = self.settings.judge
        return self._spec(self.names.judgments, {self.names.responses: responses_key}, {
            "judge": judge.key_material() if judge is not None else None,
            **self.suite.judgments_key_settings(self.settings, prompts)})

    def scores(self, judgments_key: str) -> ArtifactSpec:
        return self._spec(self.names.scores, {self.names.judgments: judgments_key}, {})

    def chain(self, samples_key: str, generation_prompts: Prompts, judge_prompts: Prompts
              ) -> tuple[ArtifactSpec, ArtifactSpec, ArtifactSpec]:
        """The responses, judgments and scores a run of these settings stores after these
        samples, each from the key of the one before."""
        responses = self.responses(samples_key, generation_prompts)
        judgments = self.judgments(responses.key, judge_prompts)
        return responses, judgments, self.scores(judgments.key)


def without_fingerprint(material: dict[str, Any]) -> dict[str, Any]:
    """Responses' key material but the fingerprint of the model their endpoint served: the
    responses of a model since redeployed or shut down are found by it (`rejudge`)."""
    role = dict(material.get("settings", {}).get("model_under_test") or {})
    role.pop("endpoint_fingerprint", None)
    return {**material, "settings": {**material.get("settings", {}), "model_under_test": role}}
