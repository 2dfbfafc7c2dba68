"""The seam between the generic pipeline and one benchmark.

A suite declares what differs between benchmarks and nothing else: where its samples come from,
how the model under test is prompted (including how its context evolves over an episode), how a
reply is read, how it is scored (an LLM judge, a reward model behind an OpenAI-compatible
endpoint, or a deterministic check) and how scores aggregate into groups. The stages
(stages/), the one edge to providers (proactflow/providers/llm.py), the artifact store and
per-call cache (cache/), the flows and the CLI are written once for every suite:

    samples ──plan──► requests ──execute──► outcomes ──interpret──► responses
    responses ──plan──► judge requests ──execute──► outcomes ──interpret──► judgments
    judgments ──aggregate──► scores

Planning and interpreting are pure (`generation_request`, `response_row`, `judgment_request`,
`judgment_row`, `score`); only the executor makes calls. An episode is a list of samples answered
in order by one growing conversation: ProactBench's episodes are single triggers (each context is
fixed by the corpus), Proactive Agent's are whole traces (the model's own earlier replies become
its assistant turns). Episodes run in parallel; the steps of one episode run in order.

A suite can also declare an environment: a sample is then shown again and again, each next view
computed from the replies so far (`another_step`, `step_limit`), and every step is a responses
row numbered by `step_column`. The stages and the plan need nothing else: a killed run replays
an episode's steps from the per-call cache and continues where it stopped. Messages may hold
images (proactflow.providers.content): keyed and stored by their hash, sent as data URLs.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any, Callable, ClassVar

import polars as pl
from pydantic import BaseModel

from ..cache.artifacts import ArtifactStore
from ..config.settings import ModelRole, RunSettings
from ..providers.chat import ChatOutcome, ChatRequest
from .declarations import (DataSource, Prompts, SampleView, StageNames, Step, Tables, ViewColumn,
                           ViewSpec)
from .coverage import Coverage, causes_of, coverage_of
from .history_metric import HistoryMetric
from .presentation import SuitePresentation, _cell, _column, percent
from .stored_results import SuiteStoredResults


class Suite(SuitePresentation, SuiteStoredResults, ABC):
    """One benchmark. Subclasses set the class attributes and implement the abstract methods;
    the defaults fit a benchmark whose samples are answered one call each."""

    name: ClassVar[str]
    """What `--suite` and a sweep file's `suite` say."""
    display_name: ClassVar[str]
    """The benchmark's name as people write it."""
    title: ClassVar[str]
    """Who made the benchmark and what it is, for the report and `--help`."""
    group_column: ClassVar[str]
    """The column of the samples, responses and judgments that scores aggregate by (ProactBench:
    phase; Proactive Agent: split)."""
    sample_noun: ClassVar[str] = "samples"
    """What a sample is called in messages (ProactBench: triggers; Proactive Agent: events)."""
    sample_key: ClassVar[tuple[str, ...]]
    """The columns that identify a sample in every table (with sample_index where sampled)."""
    stages: ClassVar[StageNames]
    tables: ClassVar[Tables]
    asks_model: ClassVar[bool] = True
    """False when the responses come from the data (judge calibration): no model to reach."""
    needs_judge: ClassVar[bool] = True
    """False for a suite scored by a deterministic check: no judge role, no judge call."""
    default_judge: ClassVar[str | None] = None
    """The judge a run is given when --judge-model is not (ProactBench: the paper's)."""
    takes_judge_response_format: ClassVar[bool] = True
    """False when the judge is asked exactly as the benchmark's own scripts ask it: no
    structured output is requested, so --judge-response-format is refused."""
    step_column: ClassVar[str | None] = None
    """Interactive suites only: the column of the responses and judgments that numbers the
    steps of one sample (0, 1, ...); it orders their rows after the sample key."""
    sends_images: ClassVar[bool] = False
    """True when the model under test is shown images: a model that does not take them (or of
    which neither litellm's model map nor the user says it does) is refused before any call."""
    option_names: ClassVar[tuple[str, ...]] = ()
    """The suite's own options (`RunSettings.suite_options`, e.g. --datasets) it takes; any
    other given is a one-line error."""
    error_statuses: ClassVar[tuple[str, ...]] = ("error", "generation_error", "judge_error")
    """Row statuses that mean a call failed: an artifact holding them is incomplete, is
    computed again by the next run, and counts as lost coverage."""

    # The data.

    @abstractmethod
    def locate(self, settings: RunSettings, store: ArtifactStore) -> DataSource:
        """Find the data without parsing it: its revision decides whether the stored samples
        can be used."""

    @abstractmethod
    def samples_key_settings(self, settings: RunSettings, source: DataSource) -> dict[str, Any]:
        """What about the data and its selection changes the samples table."""

    @abstractmethod
    def build_samples(self, settings: RunSettings, source: DataSource) -> pl.DataFrame:
        """The samples table (rows of `tables.samples`), validated: a bad input is a one-line
        UserError naming file, line and field."""

    # The model under test.

    def generation_defaults(self, role: str, reasoning: bool) -> dict[str, Any]:
        """The generation settings the suite's protocol gives a role (`reasoning`: for a
        reasoning model). By default only a token budget is sent: the provider's own sampling
        defaults apply."""
        if reasoning:
            return {"temperature": 1.0, "max_tokens": 32768, "top_p": None}
        return {"temperature": None, "max_tokens": 4096, "top_p": None}

    def option_generation_defaults(self, role: str, reasoning: bool,
                                   options: dict[str, Any]) -> dict[str, Any]:
        """`generation_defaults` given the suite's own options (RunSettings.suite_options), for
        a suite whose protocol sends other settings in another mode."""
        return self.generation_defaults(role, reasoning)

    def generation_prompts(self, settings: RunSettings, store: ArtifactStore) -> Prompts:
        """Prompts the model under test is sent besides the data (none by default)."""
        return Prompts()

    def responses_key_settings(self, settings: RunSettings, prompts: Prompts) -> dict[str, Any]:
        """Key material of the responses besides the model and samples."""
        return {"prompts": prompts.hashes()} if prompts.by_name else {}

    def episodes(self, samples: pl.DataFrame) -> list[list[int]]:
        """Row indices of the samples, grouped into episodes answered in order by one growing
        conversation. By default every sample is an episode of its own."""
        return [[index] for index in range(samples.height)]

    def prefix_group(self, sample: dict[str, Any]) -> str | None:
        """Samples whose generation prompts share a prefix (a dialogue's triggers) name the
        same group: they go out in waves (stages/responses.py), so that the provider's prompt
        cache serves it. None by default: no order."""
        return None

    @abstractmethod
    def generation_request(self, sample: dict[str, Any], earlier: list[Step],
                           role: ModelRole, prompts: Prompts, sample_index: int
                           ) -> ChatRequest | None:
        """The call for one sample given the episode's earlier steps (each sample with its
        response row, in order); None when the sample cannot be asked (its row then says
        why)."""

    @abstractmethod
    def response_row(self, sample: dict[str, Any], outcome: ChatOutcome | None,
                     role: ModelRole, sample_index: int) -> BaseModel:
        """The responses row of one sample: the reply read (parsed where the protocol expects a
        format), or the reason there is none."""

    def step_row(self, sample: dict[str, Any], earlier: list[Step], outcome: ChatOutcome | None,
                 role: ModelRole, sample_index: int) -> BaseModel:
        """The responses row of one step, seeing the episode's earlier steps: an interactive
        suite records the step's number, what it showed and the environment's reading of the
        reply. By default `response_row`."""
        return self.response_row(sample, outcome, role, sample_index)

    takes_parts: ClassVar[bool] = False
    """True for a suite whose data has parts chosen with --parts (the video ProactiveBench);
    the option is refused for the others."""

    def parse_parts(self, text: str) -> tuple[str, ...]:
        """--parts (or a sweep file's `parts`, comma-joined) read and checked by a suite that
        takes_parts; the others' runs refuse the option (cli/suite_options.py)."""
        return tuple(piece.strip() for piece in text.split(","))
    steps_known: ClassVar[bool] = False
    """True when a sample's steps do not depend on what the model replies (a video plays on
    whatever it says): the plan then walks every step with `stand_in_reply` and estimates each
    request at its own size, instead of counting the rest at the first unanswered step's."""

    def another_step(self, sample: dict[str, Any], earlier: list[Step]) -> bool:
        """After a step on `sample` (the last of `earlier`): whether its environment shows it
        again, the next view computed from the replies so far. By default a sample is answered
        once."""
        return False

    def step_limit(self, sample: dict[str, Any]) -> int:
        """The most steps a sample may take (the environment's own limit; the stages never go
        past it, whatever `another_step` says)."""
        return 1

    def reply_parser(self) -> Callable[[str], Any] | None:
        """Reads the model's reply where the protocol expects a format; raises ValueError for a
        reply that is not one, which is then asked again (up to the judge's tries) and never
        cached. None: every reply is the model's answer, as it is."""
        return None

    def stand_in_reply(self, sample: dict[str, Any]) -> str | None:
        """A reply like the model's, to estimate the judge's prompt before the model has
        answered (the plan printed before a run)."""
        return None

    def plan_summary(self, samples: pl.DataFrame) -> str:
        """What the plan says it covers, e.g. "4 dialogues, 10 triggers"."""
        return f"{samples.height} {self.sample_noun}"

    # Scoring.

    def judge_prompts(self, settings: RunSettings, store: ArtifactStore) -> Prompts:
        """Prompts the judge is sent (none for a deterministic check)."""
        return Prompts()

    def judgments_key_settings(self, settings: RunSettings, prompts: Prompts) -> dict[str, Any]:
        """Key material of the judgments besides the judge and the responses."""
        return {"prompts": prompts.hashes()}

    def judgment_request(self, sample: dict[str, Any], response: dict[str, Any],
                         role: ModelRole | None, prompts: Prompts, settings: RunSettings
                         ) -> ChatRequest | None:
        """The judge call for one response; None when the response is scored without one (a
        failed or unusable reply carried through, or a deterministic check)."""
        return None

    judges_episodes: ClassVar[bool] = False
    """True when a judge call is about a sample's whole episode rather than one response (the
    video ProactiveBench judges each gold turn with every reply inside its window): the
    judgments stage then waits for each episode to end and asks `episode_judge_requests` and
    `episode_judgment_rows` instead of `judgment_request` and `judgment_row`."""

    def episode_judge_requests(self, sample: dict[str, Any], steps: list[dict[str, Any]],
                               role: ModelRole | None, prompts: Prompts,
                               settings: RunSettings) -> list[ChatRequest]:
        """Episode-judged suites: the judge calls one ended episode needs (`steps`: its
        responses rows in order), in an order `episode_judgment_rows` relies on."""
        return []

    def episode_judgment_rows(self, sample: dict[str, Any], steps: list[dict[str, Any]],
                              outcomes: list[ChatOutcome], role: ModelRole | None,
                              prompts: Prompts) -> list[BaseModel]:
        """Episode-judged suites: the judgments rows of one ended episode, given the outcome of
        each planned judge call in order. A failed call is a row with its status; what had
        nothing to judge still gets its row."""
        raise NotImplementedError(f"{self.name} judges episodes but builds no rows for them")

    def episode_judge_calls_at_most(self, sample: dict[str, Any]) -> int:
        """Episode-judged suites: the most judge calls one episode of this sample can need,
        for the plan before its replies exist (0: unknown)."""
        return 0

    def episode_ended(self, sample: dict[str, Any], steps: list[dict[str, Any]]) -> bool:
        """Whether these responses rows (in order) are a sample's whole episode."""
        return len(steps) >= self.step_limit(sample) or not self.another_step(
            sample, [(sample, step) for step in steps])

    def accept_judge_reply(self, text: str) -> Any:
        """The verdict in a judge reply; ValueError when it is not one (the judge is then asked
        again, and an unusable reply is never cached)."""
        raise ValueError("this suite has no judge")

    @abstractmethod
    def judgment_row(self, sample: dict[str, Any], response: dict[str, Any],
                     outcome: ChatOutcome | None, role: ModelRole | None,
                     prompts: Prompts) -> BaseModel:
        """The judgments row of one response."""

    # Aggregation and outputs.

    @abstractmethod
    def score(self, judgments: pl.DataFrame) -> pl.DataFrame:
        """The scores table (rows of `tables.scores`): per group and overall. Failed and
        unscored rows are counted, never dropped and never given a score."""

    scored_statuses: ClassVar[tuple[str, ...]] = ("scored",)
    lost_statuses: ClassVar[dict[str, str]] = {"generation": "generation_error",
                                               "judge": "judge_error", "refused": "refused"}
    """Each kind of lost coverage and the judgments status it is counted by."""
    lasting_losses: ClassVar[dict[str, str]] = {}
    """Kinds of loss (besides `refused`) that a re-run cannot win back, and what can."""

    def counted_rows(self, judgments: pl.DataFrame) -> pl.DataFrame:
        """The judgments rows coverage counts (all of them, unless a suite keeps several rows
        per sample)."""
        return judgments

    def coverage(self, judgments: pl.DataFrame) -> Coverage:
        """(scored, total, lost by failure kind) over every judgments row, for the run's exit
        status."""
        return coverage_of(self.counted_rows(judgments), self.scored_statuses,
                           self.lost_statuses)

    def loss_causes(self, judgments: pl.DataFrame) -> dict[str, str]:
        """The cause the rows give for each kind of loss, for the run's last line."""
        return causes_of(self.counted_rows(judgments), self.lost_statuses)

    main_output: ClassVar[str]
    """The export file the Prefect UI links to."""

    @abstractmethod
    def write_outputs(self, out: Path, samples: pl.DataFrame, responses: pl.DataFrame,
                      judgments: pl.DataFrame, scores: pl.DataFrame,
                      provenance: dict[str, Any]) -> dict[str, str]:
        """The export files of one run in `out`; returns name -> path."""

    def check_settings(self, settings: RunSettings) -> None:
        """One-line UserErrors for settings this suite cannot take (before any call)."""
