"""What the suite's end-to-end tests share: a generated corpus, a synthetic wheel of the
package (FILTER keeping the generated ids, synthetic judge prompts) with a suite registered to
accept it, and a fake model that sees: it decodes each request's image and answers only when
the pixels are the ones the environment shows at that step."""

from __future__ import annotations

import base64
import hashlib
import io
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

from PIL import Image

from fake_openai import Reply
from mllm_corpus import FULL, generate_corpus

from proactflow.suites import register_suite
from proactflow.suites.proactivebench_mllm import environment
from proactflow.suites.proactivebench_mllm.environment import rules
from proactflow.suites.proactivebench_mllm.corpus import read_corpus
from proactflow.suites.proactivebench_mllm.datasets import DATASETS
from proactflow.suites.proactivebench_mllm.environment.images import pixel_digest, shown_image
from proactflow.suites.proactivebench_mllm.sample import EnvironmentCrash, Sample
from proactflow.suites.proactivebench_mllm.suite import ProactiveBenchMllm

JUDGE = """SYSTEM_PROMPT = 'synthetic judge system text'
USER_PROMPT = "Q={user_prompt} A={correct_answers} O={generated_answer}"
PREDICTION_THR = {"ROD": 2, "VSOD": 3, "MVP-N": 2, "IN-C": 1, "QD": 1, "CIT": 2, "COCO": 2}
"""
UNREADABLE = "(A)"


def synthetic_wheel(path: Path, ids: range) -> Path:
    loader = "import torch\nFILTER = " + repr({full: list(ids) for full in FULL.values()}) + "\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("proactivebench/data_utils.py", loader)
        archive.writestr("proactivebench/open_ended_gen.py", JUDGE)
    path.write_bytes(buffer.getvalue())
    return path


def register(wheel: Path) -> None:
    """The suite, taking the synthetic wheel instead of the pinned release."""
    register_suite(ProactiveBenchMllm(hashlib.sha256(wheel.read_bytes()).hexdigest()))


def make_corpus(root: Path, per_dataset: int = 8) -> tuple[Path, Path]:
    """(corpus folder, synthetic wheel), generated here."""
    generate_corpus(root / "corpus", per_dataset=per_dataset)
    wheel = synthetic_wheel(root / "proactivebench.whl", range(per_dataset))
    register(wheel)
    return root / "corpus", wheel


def policy(sample: Sample, state: environment.EpisodeState, view: environment.View) -> str:
    """Replies of every kind, chosen by the sample: proactive (the first accepted action's
    text while there is one, then the answer's letter), the answer at once, an unreadable
    "(A)", or a wrong category."""
    kind = sample.sample_id % 4
    if (sample.dataset, sample.sample_id) in (("QD", 2), ("IN-C", 1)):
        kind = 0  # the generator's entries where acting crashes the package: act
    accepted, _ = rules.accepted_answers(sample, state)
    actions = [o for o in view.options[:len(view.options) - len(sample.categories)]
               if o in accepted]
    if kind == 0 and actions:
        return actions[0]
    if kind in (0, 1):
        return chr(65 + view.options.index(sample.answer))
    if kind == 2:
        return UNREADABLE
    wrong = [c for c in sample.categories if c != sample.answer]
    return f"{chr(65 + view.options.index(wrong[0]))}. {wrong[0]}"


@dataclass
class Expected:
    replies: dict[tuple[str, str], str] = field(default_factory=dict)
    """(prompt, pixel digest) -> the reply: a request is answered only for the right image."""
    episodes: dict[tuple[str, int], dict] = field(default_factory=dict)
    """(dataset, id) -> correct_prediction, num_turns, stop_reason, steps."""
    calls: int = 0


def expected_mcqa(corpus: Path, ids: range, hint: bool = False,
                  reference: bool = False) -> Expected:
    """Every episode played here with the environment, the images rendered as it shows them."""
    expected = Expected()
    keep = {d.full: set(ids) for d in DATASETS}
    for short, samples in read_corpus(corpus, DATASETS, keep).items():
        for sample in samples:
            state, reason = environment.start(sample, reference), None
            while not state.stop:
                view = environment.view(sample, state, hint)
                if view.empty:
                    reason = "image_error"
                    break
                reply = policy(sample, state, view)
                digest = pixel_digest(shown_image(corpus, view))
                expected.replies[(view.prompt, digest)] = reply
                expected.calls += 1
                try:
                    state = environment.step(sample, state, reply)
                except EnvironmentCrash:
                    reason = "environment_crash"
                    break
            expected.episodes[(short, sample.sample_id)] = {
                "correct_prediction": state.correct_prediction if reason != "environment_crash"
                else None, "num_turns": state.num_turns if reason != "environment_crash"
                else None, "stop_reason": reason or environment.stop_reason(state)}
    return expected


def decoded(request: dict) -> tuple[str, str]:
    """(the text, the pixel digest of the image) of a single-turn request: image, then text."""
    (message,) = request["messages"]
    image_part, text_part = message["content"]
    header, encoded = image_part["image_url"]["url"].split(",", 1)
    assert header.startswith("data:image/") and header.endswith(";base64")
    image = Image.open(io.BytesIO(base64.b64decode(encoded)))
    return text_part["text"], pixel_digest(image)


def seeing_model(expected: Expected, wrong: list[str]) -> "callable":
    def respond(request: dict) -> Reply:
        key = decoded(request)
        if key not in expected.replies:
            wrong.append(key[0][:60])
            return Reply(content="I see another image")
        return Reply(content=expected.replies[key])
    return respond
