"""Open-ended generation (the package's tests/oeg.py and open_ended_gen.py): the first view's
question answered freely, judged by an LLM against the sample's acceptable answers.

Quirk reported, not reproduced: the package asks a ChangeIt environment for its answers twice
(oeg.py:130 for the judge's messages, 148 for the parser) and, away from the video's ends, each
call appends "Rewind the video." to the environment's own list, so the parser expects one item
more than the judge was shown and the sample scores 0. proactflow parses against the answers the
judge saw, and computes the package's figure (`upstream_*`) beside it.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from .environment import rules
from .environment import EpisodeState, question, start
from .sample import Sample
from .upstream import Upstream

HELP_SENTENCE = " If you cannot answer this question, please tell me what I should do to help you."
OEG_SAMPLES = 100
OEG_SEED = 0
THINK_END = "</think>"
_VERDICTS = re.compile(r"[01](?:\s*,\s*[01])*")
T = TypeVar("T")


def select_oeg_samples(samples: Sequence[T], limit: int = OEG_SAMPLES) -> list[T]:
    """The package's OEG selection: shuffled with random.seed(0), the first `limit` kept
    (oeg.py:72-74)."""
    chosen = list(samples)
    random.Random(OEG_SEED).shuffle(chosen)
    return chosen[:limit]


def oeg_question(sample: Sample, use_hints: bool = False) -> str:
    """The first view's question alone (no options), plus the help sentence with USE_HINTS."""
    text = question(sample, start(sample))
    return text + HELP_SENTENCE if use_hints else text


def valid_answers(sample: Sample, call: int = 1) -> str:
    """get_open_ended_gen_answers() at the first state, on the package's `call`-th call to it
    on the same environment (only ChangeIt's differs between calls)."""
    state: EpisodeState = start(sample)
    short = sample.dataset
    if short == "ROD":
        return "Move the blocks, Move the camera."
    if short == "MVP-N":
        return "Rotate the object, Move the camera."
    options, categories = rules.accepted_answers(sample, state)
    if short == "IN-C":
        return ", ".join(a.replace(".", "") for a in options + categories) + "."
    if short == "CIT":
        # Every call appends once to the list returned; that list is the environment's own away
        # from the video's ends (1079, 1117-1119), so there the appends accumulate.
        appended = call if rules.cit_answers_shared(sample, state) else 1
        answers = options + [rules.CIT_REWIND] * appended + categories
        return ",".join(a.replace(".", "") for a in answers) + "."
    named = ", ".join(c.replace(".", "") for c in categories)
    lead = {"VSOD": "Wait for the occlusion to disappear, Rewind the video, Move the camera, ",
            "QD": "Add more details to the drawing, ",
            "COCO": "Move the camera, Move farther from the object, "}[short]
    return lead + named + "."


def judge_messages(upstream: Upstream, prompt: str, answers: str,
                   generated: str) -> list[dict[str, str]]:
    """The judge's chat (open_ended_gen.py:10-31): the answers split on ",", stripped, every "."
    removed, shown as a Python list."""
    correct = [a.strip().replace(".", "") for a in answers.split(",")]
    user = upstream.user_prompt.format(user_prompt=prompt, correct_answers=correct,
                                       generated_answer=generated)
    return [{"content": upstream.system_prompt, "role": "system"},
            {"content": user, "role": "user"}]


def visible_output(judge_reply: str) -> str:
    """The judge's reply after its thinking: the text after the last `</think>`, newlines
    stripped at both ends (oeg.py:133-146)."""
    index = judge_reply.rfind(THINK_END)
    tail = judge_reply if index < 0 else judge_reply[index + len(THINK_END):]
    return tail.strip("\n")


@dataclass(frozen=True)
class Verdict:
    """A judge's reply, parsed."""

    status: Literal["ok", "judge_error"]
    detail: str
    """Why a judge_error: no 0/1 list, or a list of the wrong length."""
    ps: int | None
    """1 when an acceptable proactive suggestion was judged present (None on judge_error)."""
    cp: int | None
    """1 when the right category was judged present."""
    agg: int | None
    """ps or cp."""


def expected_items(answers: str) -> int:
    return len([a for a in answers.split(",") if a.strip() != ""])


def parse_verdicts(answers: str, judge_output: str, threshold: int) -> Verdict:
    """The judge's visible output read as the package reads it (open_ended_gen.py:34-64), except
    that a missing list or one of the wrong length is a judge_error instead of all zeros."""
    found = _VERDICTS.findall(judge_output)
    if not found:
        return Verdict("judge_error", "no 0/1 list in the judge's reply", None, None, None)
    values = [int(t.strip()) for t in found[-1].split(",") if t.strip() != ""]
    expected = expected_items(answers)
    if len(values) != expected:
        return Verdict("judge_error", f"{len(values)} verdicts for {expected} answers",
                       None, None, None)
    ps = int(1 in values[:threshold])
    cp = int(1 in values[threshold:])
    return Verdict("ok", "", ps, cp, int(ps or cp))


def check_verdicts(answers: str, threshold: int, judge_reply: str) -> None:
    """ValueError when the judge's reply holds no 0/1 list of the right length for these
    answers: the judge is asked again, as its attempts allow, within the run."""
    verdict = parse_verdicts(answers, visible_output(judge_reply), threshold)
    if verdict.status != "ok":
        raise ValueError(verdict.detail)


def upstream_verdict(answers: str, judge_output: str, threshold: int) -> tuple[int, int, int]:
    """The package's own figure for the same reply: all zeros where proactflow sees an error."""
    verdict = parse_verdicts(answers, judge_output, threshold)
    if verdict.status != "ok":
        return 0, 0, 0
    assert verdict.ps is not None and verdict.cp is not None and verdict.agg is not None
    return verdict.ps, verdict.cp, verdict.agg


def oeg_messages(upstream: Upstream, sample: Sample, generated: str,
                 use_hints: bool = False) -> list[dict[str, str]]:
    """The judge's chat for a sample's free answer: the question the model saw (help sentence
    included with USE_HINTS, as the package passes it) and the answers of the first call."""
    return judge_messages(upstream, oeg_question(sample, use_hints), valid_answers(sample, 1),
                          generated)


def judge_sample(upstream: Upstream, sample: Sample,
                 judge_reply: str) -> tuple[Verdict, tuple[int, int, int]]:
    """proactflow's verdict (parsed against the answers the judge was shown) and the package's
    figure (parsed against its second call's answers, errors as zeros) for one judge reply."""
    visible = visible_output(judge_reply)
    threshold = upstream.prediction_thr[sample.dataset]
    return (parse_verdicts(valid_answers(sample, 1), visible, threshold),
            upstream_verdict(valid_answers(sample, 2), visible, threshold))


@dataclass(frozen=True)
class OegScores:
    samples: int
    judged: int
    judge_errors: int
    ps: float | None
    """100 × mean ps over the judged samples (judge errors counted apart), None if none."""
    cp: float | None
    agg: float | None
    upstream_ps: float | None
    """The package's figures: over every sample, judge errors scored 0 (oeg.py:153-165)."""
    upstream_cp: float | None
    upstream_agg: float | None


def oeg_scores(verdicts: Sequence[Verdict], upstream: Sequence[tuple[int, int, int]]) -> OegScores:
    judged = [v for v in verdicts if v.status == "ok"]

    def mean(values: list[int]) -> float | None:
        return 100 * sum(values) / len(values) if values else None

    return OegScores(
        samples=len(verdicts), judged=len(judged), judge_errors=len(verdicts) - len(judged),
        ps=mean([v.ps or 0 for v in judged]), cp=mean([v.cp or 0 for v in judged]),
        agg=mean([v.agg or 0 for v in judged]), upstream_ps=mean([u[0] for u in upstream]),
        upstream_cp=mean([u[1] for u in upstream]), upstream_agg=mean([u[2] for u in upstream]))
