"""An asyncio OpenAI-compatible fake for benchmarks with a thousand calls in flight: each call
awaits its latency instead of holding a thread, so the server is never the bottleneck.

Run as a process of its own (its CPU must not count as the measured process tree's):

    python benchmarks/async_fake.py PORT LATENCY

Models `m<i>` answer like the tests' synthetic model, each with its own marker so that every
model's replies (and so the judge's requests) differ; any other model answers as the tests'
synthetic judge. GET /stats reports calls and peak calls in flight per model, and how many
request bodies were seen more than once, and when the first request and the last reply of the
models and of the judge came (wall clock).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
from collections import Counter
from pathlib import Path

from aiohttp import web

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from replay import synthetic_judge, synthetic_model  # noqa: E402

calls: Counter[str] = Counter()
in_flight: Counter[str] = Counter()
peak: Counter[str] = Counter()
seen: set[str] = set()
repeats = 0
# wall-clock (time.time()) of the first request and the last reply, per role ("models", "judge"),
# so the benchmark can say where a sweep's wall time goes: before the calls, during, after
timeline: dict[str, list[float]] = {}
# calls in flight per role, averaged over each 5-second window from the first request
in_flight_windows: dict[str, dict[int, list[int]]] = {}


async def sample_in_flight(app: web.Application) -> None:
    while True:
        await asyncio.sleep(0.25)
        if not timeline:
            continue
        window = str(int((time.time() - min(first for first, _ in timeline.values())) // 5))
        for role in ("models", "judge"):
            count = sum(n for model, n in in_flight.items()
                        if model.startswith("m") == (role == "models"))
            total = in_flight_windows.setdefault(role, {}).setdefault(window, [0, 0])
            total[0] += count
            total[1] += 1


async def start_sampling(app: web.Application):
    task = asyncio.create_task(sample_in_flight(app))
    yield
    task.cancel()


async def completions(request: web.Request) -> web.Response:
    global repeats
    body = await request.read()
    digest = hashlib.sha256(body).hexdigest()
    repeats += digest in seen
    seen.add(digest)
    payload = json.loads(body)
    model = payload.get("model", "")
    calls[model] += 1
    role = "models" if model.startswith("m") else "judge"
    timeline.setdefault(role, [time.time(), 0.0])
    in_flight[model] += 1
    peak[model] = max(peak[model], in_flight[model])
    try:
        await asyncio.sleep(request.app["latency"])
    finally:
        in_flight[model] -= 1
        timeline[role][1] = time.time()
    reply = synthetic_model(payload) if model.startswith("m") else synthetic_judge(payload)
    content = f"[{model}] {reply.content}" if model.startswith("m") else reply.content
    prompt = sum(len(str(m.get("content", "")).split()) for m in payload.get("messages", []))
    return web.json_response({
        "id": f"chatcmpl-{calls[model]}", "object": "chat.completion", "created": int(time.time()),
        "model": model, "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": len(content.split()),
                  "total_tokens": prompt + len(content.split())}})


async def models(request: web.Request) -> web.Response:
    return web.json_response({"object": "list", "data": []})


async def stats(request: web.Request) -> web.Response:
    return web.json_response({"calls": calls, "peak": peak, "repeats": repeats,
                              "timeline": timeline,
                              "in_flight": {role: {w: round(t / n) for w, (t, n) in windows.items()}
                                            for role, windows in in_flight_windows.items()}})


def main() -> None:
    app = web.Application(client_max_size=64 * 2**20)
    app["latency"] = float(sys.argv[2])
    app.cleanup_ctx.append(start_sampling)
    app.add_routes([web.post("/v1/chat/completions", completions), web.get("/v1/models", models),
                    web.get("/stats", stats)])
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, backlog=4096)


if __name__ == "__main__":
    main()
