"""The messages ProactiveBench sends and the replies it accepts, as its own scripts build them.

Pure functions, no I/O: the prompt texts are arguments (they are benchmark data, loaded at run
time by `upstream.load_upstream_prompts` or from a file of the user's), so the suite's stages
can build every request from stored rows and check every reply the same way upstream did.

The model under test sees each trace as one growing chat: the system prompt, then for every
event a user turn and its own earlier reply. Only the newest user turn carries the instruction
wrapper; once answered, upstream rewrites it to the bare observation. The judge sees one
message per event: the observations so far, the proposed task (or null) and an instruction.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

import json5
from pydantic import BaseModel, ConfigDict, Field

TASK_KEY = "Proactive Task"
RESPONSE_KEY = "Response"
PLACEHOLDER = "[placeholder]"
_JSON_FENCE = re.compile(r"```json\n(.*?)\n```", re.DOTALL)


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean",
             type(None): "null", int: "a number", float: "a number"}
    return names.get(type(value), type(value).__name__)


def bare_observation(time: str, event: str) -> str:
    """An answered event's user turn: the observation alone, Python's default `json.dumps`
    (non-ASCII escaped), keys capitalised as upstream's runner writes them."""
    return json.dumps({"Time": time, "Event": event})


def agent_user_message(instruction: str, time: str, event: str) -> str:
    """The newest event's user turn. Upstream dumps the wrapper with a placeholder and then
    substitutes the observation's JSON as plain text, so the observation lands unescaped inside
    the quotes of the "Observation" string: the result is not valid JSON, and must not be
    rebuilt with a JSON encoder."""
    wrapper = json.dumps({"Instructions": instruction, "Observation": PLACEHOLDER})
    return wrapper.replace(PLACEHOLDER, bare_observation(time, event))


def agent_messages(system_prompt: str, instruction: str, events: Sequence[tuple[str, str]],
                   replies: Sequence[str | None]) -> list[tuple[str, str]]:
    """(role, content) of the request for event k = len(replies), given the (time, event) of
    events 0..k (later ones are ignored) and the `AgentReply.history_text` of each earlier
    event, None where every attempt failed."""
    k = len(replies)
    if len(events) <= k:
        raise ValueError(f"{len(replies)} replies need at least {k + 1} events, got "
                         f"{len(events)}")
    messages = [("system", system_prompt)]
    for (time, event), reply in zip(events, replies):
        if reply is None:
            # Upstream appends the wrapped turn before asking and, when every attempt fails,
            # moves on without an assistant turn; the rewrite to the bare form runs only after
            # a success, so the failed event stays wrapped, followed directly by the next user
            # turn.
            messages.append(("user", agent_user_message(instruction, time, event)))
        else:
            messages += [("user", bare_observation(time, event)), ("assistant", reply)]
    time, event = events[k]
    messages.append(("user", agent_user_message(instruction, time, event)))
    return messages


class AgentReply(BaseModel):
    """A reply of the model under test that upstream's runner accepts."""

    model_config = ConfigDict(frozen=True)

    history_text: str = Field(description=(
        "The assistant turn upstream keeps in the chat: Python's default `json.dumps` of the "
        "reply object after normalisation (keys in the model's order; a missing task key is "
        "added last, as null)."))
    proactive_task: Any = Field(description=(
        "The proposed task as the reply holds it: a string, or any other JSON value (false, a "
        "list, a number), which upstream passes on to the judge as it is; None when the reply "
        "proposes none (missing, null or \"null\")."))


def parse_agent_reply(text: str) -> AgentReply:
    """Accept a reply as upstream's runner does, or raise ValueError with a short reason (upstream
    asks again, up to five attempts; then the event keeps the test file's object as its
    prediction, see FAILED_EVENT_PROPOSAL)."""
    if "```json" in text:
        fenced = _JSON_FENCE.search(text)
        if fenced is None:
            raise ValueError("a ```json fence whose body is not on lines of its own")
        text = fenced.group(1)  # the first fence only, as upstream
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg}: line {exc.lineno} column {exc.colno})") \
            from None
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    if not isinstance(value, dict):
        raise ValueError(f"{_json_type(value)}, not a JSON object")
    task = value.get(TASK_KEY)
    if task is None or task == "null":
        # Assigning keeps a present key in place and appends a missing one, as upstream's does:
        # the history text depends on it.
        value[TASK_KEY] = task = None
    if value.get(RESPONSE_KEY) == "null":
        value[RESPONSE_KEY] = None
    return AgentReply(history_text=json.dumps(value), proactive_task=task)


FAILED_EVENT_PROPOSAL = "candidate_task"
"""What upstream's judge is asked about at an event whose every attempt failed: the runner
leaves the test file's `agent_response` object `{"candidate_task": [...]}` in place, and the
judging script iterates over it, so its one key becomes the proposal (counted as one)."""


def judge_messages(system_prompt: str, instruction: str, observations: Sequence[dict[str, Any]],
                   task: str | None) -> list[tuple[str, str]]:
    """(role, content) of the judge's request for one event: `observations` are the objects of
    events 0..i as the trace file holds them (key order kept, extra keys included), `task` the
    proposal, None for none (upstream turns an empty prediction into a single null)."""
    body = {"Observations (Time Ascending)": list(observations), "Proposed Task": task,
            "Instruction": instruction}
    return [("system", system_prompt),
            ("user", json.dumps(body, sort_keys=False, ensure_ascii=False, indent=4))]


def parse_judge_reply(text: str) -> bool:
    """The judge's verdict as upstream's judging script reads it: the whole reply parsed with
    json5 (a ```json fence is not stripped), and `judgement == "accepted"` is acceptance, any
    other value ("Accepted", "accept", "rejected") a rejection. ValueError when the reply has
    no verdict to read (not JSON5, not an object, no "judgement" key): upstream asks again."""
    try:
        value = json5.loads(text)
    except (ValueError, RecursionError) as exc:
        raise ValueError(f"not JSON5 ({str(exc)[:200]})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{_json_type(value)}, not a JSON object")
    if "judgement" not in value:
        raise ValueError("no \"judgement\" key")
    return value["judgement"] == "accepted"


_SCORING_VERDICT = re.compile(r'(.*)"judgement": "(accepted|rejected)"', re.DOTALL)


def read_calibration_verdict(text: str) -> bool | None:
    """The verdict as upstream's reward-model scoring script reads a reply (never asking
    again): `json.loads` and its "judgement"; failing that, the last `"judgement": "accepted"`
    or `"rejected"` anywhere in the text (inside a ```json fence, after prose, in an
    unterminated object). None, no verdict, for anything else, including a parsed value other
    than the two words ("Accepted")."""
    try:
        verdict = json.loads(text)["judgement"]
    except Exception:  # upstream's bare except: any failure falls back to the expression
        found = _SCORING_VERDICT.match(text)
        verdict = found.group(2) if found else None
    return {"accepted": True, "rejected": False}.get(verdict) \
        if isinstance(verdict, str) else None
