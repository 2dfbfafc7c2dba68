"""An asyncio OpenAI-compatible fake for benchmarks with a thousand calls in flight: each call
awaits its latency instead of holding a thread, so the server is never the bottleneck.

Run as a process of its own (its CPU must not count as the measured process tree's):

    python benchmarks/async_fake.py PORT LATENCY

Models `m<i>` answer like the tests' synthetic model, each with its own marker so that every
model's replies (and so the judge's requests) differ; any other model answers as the tests'
synthetic judge. GET /stats reports calls and peak calls in flight per model, and how many
request bodies were seen more than once.
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


async def completions(request: web.Request) -> web.Response:
    global repeats
    body = await request.read()
    digest = hashlib.sha256(body).hexdigest()
    repeats += digest in seen
    seen.add(digest)
    payload = json.loads(body)
    model = payload.get("model", "")
    calls[model] += 1
    in_flight[model] += 1
    peak[model] = max(peak[model], in_flight[model])
    try:
        await asyncio.sleep(request.app["latency"])
    finally:
        in_flight[model] -= 1
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
    return web.json_response({"calls": calls, "peak": peak, "repeats": repeats})


def main() -> None:
    app = web.Application(client_max_size=64 * 2**20)
    app["latency"] = float(sys.argv[2])
    app.add_routes([web.post("/v1/chat/completions", completions), web.get("/v1/models", models),
                    web.get("/stats", stats)])
    web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), print=None, backlog=4096)


if __name__ == "__main__":
    main()
