"""Responders that replay published ProactBench results through the fake server.

The model under test answers each trigger with the response gpt-5.5 gave upstream, and the judge
answers with the label upstream's judge gave that response, so a run over the shared sample must
reproduce the published counts exactly.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from fake_openai import Reply

# The project's own small corpus (written for these tests: all three phases, a trigger without a
# user message, non-ASCII text, a long context) with an upstream-shaped results file of a
# fictional model whose labels were written by hand. Every test uses it unless it needs the
# benchmark's real data.
PROJECT_DATA = Path(__file__).resolve().parent / "data"
SAMPLE_CORPUS = PROJECT_DATA / "dialogues.jsonl"
SAMPLE_RESULTS = PROJECT_DATA / "tiny-model_results.jsonl"
JUDGE_PROMPT = PROJECT_DATA / "judge_prompt.txt"

# The benchmark's real excerpts and published labels, beside the repository when present
# (tests that need them take the `shared_data` fixture: skipped without them, failed under CI).
# What the tests' own corpus holds (the results file has no row for the trigger without a user
# message: nothing was generated there).
DIALOGUES = 4
TRIGGERS = 10
ANSWERABLE = 9

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "proactbench"
SHARED_CORPUS = SHARED / "sample_dialogues.jsonl"
SHARED_RESULTS = SHARED / "sample_gpt-5.5_results.jsonl"
SHARED_JUDGE_PROMPT = SHARED / "judge_system_prompt.txt"


def scaled_corpus(folder: Path, copies: int) -> tuple[Path, int]:
    """The tests' corpus `copies` times over, each copy with its own ids and user messages (so
    that every request is a call of its own), for tests that need a run long enough to
    interrupt; answer it with the synthetic model and judge. Returns the file and its number
    of answerable triggers."""
    rows = []
    for copy in range(copies):
        for row in read_jsonl(SAMPLE_CORPUS):
            row = json.loads(json.dumps(row))
            row["unique_id_eval"] += f"__copy{copy}"
            for record in row["turn_records"]:
                if record["user_message"] is not None:
                    record["user_message"] += f" (copy {copy})"
            rows.append(row)
    path = folder / f"corpus_x{copies}.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                    encoding="utf-8")
    return path, ANSWERABLE * copies


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def published_triggers(results_path: Path = SAMPLE_RESULTS) -> list[dict]:
    """(user message, regenerated response, label, phase) of every published trigger that was
    answered (a trigger without a user message has no response to replay)."""
    out = []
    for row in read_jsonl(results_path):
        turns = {t["turn"]: t for t in row["turn_records"]}
        for point in row["trigger_points"]:
            if turns[point["turn"]]["assistant_response"] is None:
                continue
            record = turns[point["turn"]]
            out.append({"unique_id_eval": row["unique_id_eval"], "turn": point["turn"],
                        "phase": point["evaluation_rubric"]["type"],
                        "user_message": record["user_message"],
                        "response": record["assistant_response"],
                        "label": point["evaluation_result"]})
    return out


def _last_user(request: dict) -> str:
    return [m["content"] for m in request["messages"] if m["role"] == "user"][-1]


def replay_model(triggers: list[dict]):
    """Answers with the published response for the conversation's last user message."""
    by_user = {t["user_message"]: t["response"] for t in triggers}
    return lambda request: Reply(content=by_user[_last_user(request)])


_FOOTER = "\n\n--- END OF CONTEXT ---\n"


def judged_response(request: dict) -> str:
    """The regenerated response inside a judge request (the history's last entry)."""
    message = _last_user(request)
    history = message[:message.index(_FOOTER)]
    return history.rsplit("[Assistant]: ", 1)[1]


def replay_judge(triggers: list[dict]):
    """Answers with the published label of the response being judged."""
    by_response = {t["response"]: t["label"] for t in triggers}

    def respond(request: dict) -> Reply:
        label = by_response[judged_response(request)]
        return Reply(content=json.dumps({"evaluation_result": label}))

    return respond


def digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest(), 16)


def synthetic_model(request: dict) -> Reply:
    """A deterministic answer derived from the conversation."""
    return Reply(content=f"Reply {digest(_last_user(request)) % 100000}: here is a plan.")


def synthetic_judge(request: dict) -> Reply:
    """A deterministic verdict derived from the response being judged, quoting it verbatim."""
    response = judged_response(request)
    score = ("PASS", "PARTIAL", "FAIL")[digest(response) % 3]
    return Reply(content=json.dumps({"evaluation_result": {
        "status": "EVALUATED", "score": score, "rationale": "deterministic test verdict",
        "evidence": response[:30]}}))
