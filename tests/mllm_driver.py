"""Runs the GENUINE proactivebench 0.1.1 environments on a corpus and prints what they do, one
JSON object per episode, for the differential test. Run by the Python 3.12 of a throw-away venv
holding the package (never by the test suite's own Python): standard library and Pillow only.

    python mllm_driver.py CORPUS_DIR > trace.jsonl

Replies are scripted or chosen by a hash of the prompt and the shown image's pixels, so both
sides can be compared step by step by replaying the recorded replies.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import types

# The loader module imports torch and qwen_vl_utils at the top, for code the driver never runs.
_torch = types.ModuleType("torch")
_torch.utils = types.SimpleNamespace(data=types.SimpleNamespace(Dataset=object))  # type: ignore
sys.modules.setdefault("torch", _torch)
_qwen = types.ModuleType("qwen_vl_utils")
_qwen.process_vision_info = None  # type: ignore[attr-defined]
sys.modules.setdefault("qwen_vl_utils", _qwen)

from PIL import Image  # noqa: E402
from proactivebench import data_utils, open_ended_gen  # noqa: E402
from proactivebench.environment import get_environment  # noqa: E402

SHORT = {"ROD": "Realistic-Occlusion-Dataset", "VSOD": "OcclusionDataSet-MM20",
         "MVP-N": "MVP-N", "IN-C": "ImageNet-C", "QD": "QuickDraw", "CIT": "ChangeIt",
         "COCO": "coco2014"}
HELP = " If you cannot answer this question, please tell me what I should do to help you."
MAX_STEPS = 64


def pixels(image: Image.Image) -> str:
    rgb = image.convert("RGB")
    return hashlib.sha256(f"{rgb.width}x{rgb.height}:".encode() + rgb.tobytes()).hexdigest()


def rule_reply(env, state: dict, prompt: str, digest: str, salt: str) -> str:
    """A reply in one of many forms, chosen by a hash: readable and unreadable ones alike
    ("rule", "hint", "reference"), or readable ones only, mostly actions ("walk")."""
    h = int(hashlib.sha256(f"{salt}|{prompt}|{digest}".encode()).hexdigest(), 16)
    options = state["options"]
    actions = len(options) - len(env.categories)
    walk = salt == "walk"
    # Often an action (when one is shown), so that episodes get long.
    if actions > 0 and h % 4 < (3 if walk else 2):
        index = (h >> 3) % actions
    else:
        index = (h >> 3) % len(options)
    text, letter = options[index], chr(65 + index)
    forms = [text, f"{letter}. {text}", letter, f" {letter.lower()} ", f"({letter})",
             f"The answer is {letter}. {text}", text.rstrip("."), f"Answer: {letter}",
             text.upper(), f"{letter}) {text}", "", "I am not sure.", env.answer,
             f"{letter}.", text + "\nbecause it is", f"  {text}  "]
    return forms[(h >> 11) % (3 if walk else len(forms))]


def proactive_reply(env, state: dict) -> str:
    accepted, _ = env._get_correct_options_and_categories()
    shown = [o for o in accepted if o in state["options"]]
    return shown[0] if shown else env.answer


def episode(entry: dict, data_dir: str, short: str, script: str) -> dict:
    env = get_environment(SHORT[short])(entry=entry, data_dir=data_dir,
                                        reference=script == "reference")
    hint = script == "hint"
    record: dict = {"short": short, "sample_id": entry["id"], "script": script, "steps": [],
                    "replies": []}
    phase = "get_state"
    try:
        while not env.stop and len(record["steps"]) < MAX_STEPS:
            phase = "get_state"
            state = env.get_state(hint=hint)
            prompt = data_utils.apply_multi_choice_template(state["prompt"], state["options"],
                                                            short_answer=True)
            image = state["transform"](Image.open(state["image_path"]).convert("RGB"))
            digest = pixels(image)
            if script == "proactive":
                reply = proactive_reply(env, state)
            else:
                reply = rule_reply(env, state, prompt, digest, script)
            record["steps"].append({
                "image": os.path.relpath(state["image_path"], data_dir),
                "question": state["prompt"], "options": state["options"], "prompt": prompt,
                "pixels": digest, "size": list(image.size), "reply": reply})
            record["replies"].append(reply)
            phase = "evaluate"
            env.evaluate_generated_answer(reply)
    except Exception as exc:  # the package's own assertions and errors: recorded, compared
        record["crash"] = {"replies": len(record["replies"]), "in": phase,
                           "error": type(exc).__name__}
    record["statistics"] = env.get_statistics()
    record["stop"] = env.stop
    return record


def oeg_record(entry: dict, data_dir: str, short: str) -> dict:
    env = get_environment(SHORT[short])(entry=entry, data_dir=data_dir)
    prompt = env.get_state(hint=False)["prompt"]
    first = env.get_open_ended_gen_answers()
    second = env.get_open_ended_gen_answers()
    count = len([a for a in first.split(",") if a.strip() != ""])
    h = int(hashlib.sha256(f"oeg|{short}|{entry['id']}".encode()).hexdigest(), 16)
    bits = [(h >> i) & 1 for i in range(count)]
    outputs = [",".join(map(str, bits)), "reasoning 1, 0 first\n" + ", ".join(map(str, bits)),
               ",".join(["1"] * (count + 1)), ",".join(["0"] * count), "no verdict here",
               ",".join(["1"] * max(count - 1, 1))]
    return {"short": short, "sample_id": entry["id"], "script": "oeg", "prompt": prompt,
            "prompt_with_help": prompt + HELP, "first": first, "second": second,
            "messages": open_ended_gen.get_oeg_judge_messages(prompt, first, "(model output)"),
            "parses": [[out, open_ended_gen.parse_judge_prediction(first, out, short),
                        open_ended_gen.parse_judge_prediction(second, out, short)]
                       for out in outputs]}


def main() -> None:
    data_dir = os.path.abspath(sys.argv[1])
    print(json.dumps({"script": "upstream", "filter_sizes": {
        k: len(v) for k, v in data_utils.FILTER.items()},
        "prediction_thr": open_ended_gen.PREDICTION_THR,
        "system_prompt_sha256": hashlib.sha256(
            open_ended_gen.SYSTEM_PROMPT.encode()).hexdigest()}))
    for short, full in SHORT.items():
        dataset = list(data_utils.load_proactivebench_dataset(data_dir, full))
        shuffled = list(dataset)
        random.seed(0)
        random.shuffle(shuffled)
        print(json.dumps({"script": "selection", "short": short,
                          "ids": [e["id"] for e in dataset],
                          "oeg_ids": [e["id"] for e in shuffled[:100]]}))
        for entry in dataset:
            for script in ("rule", "walk", "proactive", "hint", "reference"):
                print(json.dumps(episode(entry, data_dir, short, script)))
            try:
                print(json.dumps(oeg_record(entry, data_dir, short)))
            except Exception as exc:
                print(json.dumps({"short": short, "sample_id": entry["id"], "script": "oeg",
                                  "crash": {"error": type(exc).__name__}}))


if __name__ == "__main__":
    main()
