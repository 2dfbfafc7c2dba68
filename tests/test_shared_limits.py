"""Calls in flight per model, shared: by the evaluations of one process (a sweep), and by the
processes on one store or one database, each backend a real one (a folder; PostgreSQL).

What is asserted is measured outside the process under test: calls in flight per model at the
fake server, or the slots another process (call_worker.py) can take.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from call_worker import coordination_for, store_for
from fake_openai import FakeOpenAI, Reply
from helpers import cli_args, gated_models, run_cli
from proactflow.config.settings import Generation, ModelRole, RuntimeOptions
from proactflow.limits.inflight import model_limit
from proactflow.limits.model_limits import target as limit_target
from proactflow.providers.chat import ChatRequest
from proactflow.providers.llm import ChatClient
from replay import JUDGE_PROMPT, SAMPLE_CORPUS, judged_response, synthetic_judge
import warm_spawn

WORKER = str(Path(__file__).with_name("call_worker.py"))
FAST = RuntimeOptions(retry_base_delay_s=0.01, max_attempts=1)
JUDGE_LATENCY = 0.2
CALLS_EACH = 15
"""Calls each busy process makes (test_two_busy_processes_keep_to_the_limit_together)."""


@pytest.fixture(params=["local", "postgres"])
def backend(request, tmp_path) -> str:
    """Where the slots live: beside a local call store, or in a new PostgreSQL database."""
    if request.param == "local":
        return str(tmp_path / "calls")
    return request.getfixturevalue("database")


class Worker:
    """Another process on the same backend (call_worker.py). Given `first_line`, waits for it;
    without, `expect` does, so that several workers' imports overlap."""

    def __init__(self, *args: str, first_line: str | None = None):
        self.process = warm_spawn.Popen([sys.executable, WORKER, *args], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                        text=True)
        if first_line is not None:
            self.expect(first_line)

    def expect(self, first_line: str) -> None:
        said = self.line()
        assert said == first_line, (said, self.process.stderr.read() if said == "" else "")

    def line(self) -> str:
        return self.process.stdout.readline().strip()

    def free_slots(self) -> int:
        """How many slots it can take now (mode `free`)."""
        self.process.stdin.write("count\n")
        self.process.stdin.flush()
        return int(self.line())

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=30)


def role_for(fake: FakeOpenAI, model: str) -> ModelRole:
    return ModelRole(model=f"openai/{model}", api_base=fake.url,
                     generation=Generation(temperature=0.0, max_tokens=16, top_p=None))


async def until(condition, what: str) -> None:
    deadline = time.monotonic() + 30  # a safety net, never the measure
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.01)


def test_a_slot_is_freed_on_every_way_out(backend):
    gate = threading.Event()

    def slow_or_refused(request: dict) -> Reply:
        if "refuse" in request["messages"][-1]["content"]:
            return Reply(status=400, content="a request the provider refuses")
        gate.wait(30)
        return Reply(content="late")

    with FakeOpenAI({"m": slow_or_refused}) as fake:
        role = role_for(fake, "m")
        target = limit_target(role.model, role.endpoint)
        other = Worker("free", backend, target, "2", first_line="ready")

        async def go() -> None:
            store = store_for(backend)
            try:
                limit = model_limit(target, 2, store, coordination_for(backend))
                client = ChatClient(role, store, FAST, in_flight=limit)

                def call(text: str) -> asyncio.Task:
                    return asyncio.create_task(client.call(ChatRequest.build(role, [("user",
                                                                                   text)])))

                first, second = call("first"), call("second")
                await until(lambda: fake.calls["m"] == 2, "two calls at the server")
                assert await asyncio.to_thread(other.free_slots) == 0  # both are ours
                waiting = call("third")  # no place left in this process: it waits here
                await until(lambda: limit.local._waiters, "a call waiting for a place")
                waiting.cancel()
                first.cancel()  # in flight
                await asyncio.gather(first, waiting, return_exceptions=True)
                await limit.settled()
                assert await asyncio.to_thread(other.free_slots) == 1
                gate.set()
                assert (await second).content == "late"
                refused = await client.call(ChatRequest.build(role, [("user", "refuse this")]))
                assert refused.status == "refused"  # a 400: the server's answer, kept
                await limit.settled()
                assert await asyncio.to_thread(other.free_slots) == 2
                assert limit.local.in_flight == 0 and fake.calls["m"] == 3
            finally:
                await store.close()

        try:
            asyncio.run(go())
        finally:
            gate.set()
            other.stop()


def test_a_killed_holder_frees_its_slots_and_a_waiter_takes_one(backend):
    target = "openai/m@http://127.0.0.1:9/v1"
    holder = Worker("grab", backend, target, "2", first_line="held")

    async def go() -> None:
        store = store_for(backend)
        try:
            limit = model_limit(target, 2, store, coordination_for(backend))
            polling = asyncio.create_task(limit.acquire())
            queued = asyncio.create_task(limit.acquire())  # behind the one polling
            await asyncio.sleep(0.3)
            assert not polling.done() and not queued.done()  # the dead-alive holder has both
            queued.cancel()
            await asyncio.gather(queued, return_exceptions=True)
            assert limit.local.in_flight == 1  # the cancelled waiter gave its place back
            holder.process.send_signal(signal.SIGKILL)  # no cleanup of any kind
            await asyncio.to_thread(holder.process.wait)
            await asyncio.wait_for(polling, 30)
            limit.release(await polling)
            await limit.settled()
        finally:
            await store.close()

    try:
        asyncio.run(go())
    finally:
        holder.stop()


def test_two_busy_processes_keep_to_the_limit_together(backend):
    """Each process wants twice the limit at once, so each also queues calls of its own; five
    times the limit each is enough for both to be busy at once (the limit bites from the first
    calls: it counts calls in flight, not calls per window). How the first half of the calls
    splits between them is printed, not asserted: it is best effort (measured with 30 calls
    each: 12/18 to 18/12 on an idle machine, down to 7/23 on a busy one)."""
    order: list[str] = []
    in_flight: Counter[str] = Counter()
    together = threading.Event()  # both had a call in flight at once: the limit was shared
    lock = threading.Lock()

    def answer(request: dict) -> Reply:
        who = request["messages"][-1]["content"].split()[0]
        with lock:
            order.append(who)
            in_flight[who] += 1
            if len(+in_flight) == 2:
                together.set()
        time.sleep(0.05)
        with lock:
            in_flight[who] -= 1
        return Reply(content="ok")

    with FakeOpenAI({"m": answer}) as fake:
        workers = [Worker("load", backend, fake.url, name, "3", str(CALLS_EACH))
                   for name in ("alpha", "beta")]  # both start, then both import at once
        try:
            for worker in workers:
                worker.expect("ready")
            for worker in workers:
                worker.process.stdin.write("go\n")
                worker.process.stdin.flush()
            for worker in workers:
                assert worker.line() == "done", worker.process.stderr.read()[-2000:]
        finally:
            for worker in workers:
                worker.stop()
    first_half = Counter(order[:len(order) // 2])
    print(f"{'postgres' if backend.startswith('postgresql') else 'local'}: peak "
          f"{fake.peak_by_model['m']} (limit 3) over {len(order)} calls; first half by "
          f"process: {dict(first_half)}")
    assert together.is_set(), "the two processes never had calls in flight at once"
    assert fake.peak_by_model["m"] == 3 and len(order) == 2 * CALLS_EACH


class TimedJudge:
    """A judge taking JUDGE_LATENCY per call, noting when it judged which model's response."""

    def __init__(self) -> None:
        self.spans: list[tuple[str, float, float]] = []
        self._lock = threading.Lock()

    def __call__(self, request: dict) -> Reply:
        started = time.monotonic()
        time.sleep(JUDGE_LATENCY)
        reply = synthetic_judge(request)
        with self._lock:
            self.spans.append((judged_response(request).split(":")[0], started,
                               time.monotonic()))
        return reply

    def wanted_together(self, answered: dict[str, float]) -> bool:
        """Whether each run had responses to judge (its model had answered, `answered`: when)
        before the other's last judgment ended: both runs wanted the judge at once, so a peak
        within the limit is the limit's doing, however the calls took turns."""
        last = {name: max(end for who, _, end in self.spans if who == name) for name in answered}
        return all(answered[one] < last[other] for one in answered for other in answered)

    def first_half(self) -> dict[str, int]:
        """Calls per run among the first half of the judge's calls (by start): a run that
        keeps the slots to itself would have them all."""
        ordered = sorted(self.spans, key=lambda span: span[1])
        return dict(Counter(name for name, _, _ in ordered[:len(ordered) // 2]))


def test_a_sweep_shares_a_judges_limit_between_its_evaluations(tmp_path, prefect_server):
    models, everyone, answered, _ = gated_models("alpha", "beta")
    judge = TimedJudge()
    with FakeOpenAI({**models, "limited": judge}) as fake:
        config = tmp_path / "sweep.toml"
        config.write_text(f"""
store = "{tmp_path / 'store'}"
corpus = "{SAMPLE_CORPUS}"
judge_prompt = "{JUDGE_PROMPT}"

[[judges]]
model = "openai/limited"
api_base = "{fake.url}"
concurrency = 3

[[models]]
model = "openai/alpha"
api_base = "{fake.url}"

[[models]]
model = "openai/beta"
api_base = "{fake.url}"
""")
        assert run_cli("sweep", ["--config", str(config)]) == 0
    assert everyone.is_set()
    assert fake.calls["limited"] == fake.calls["alpha"] + fake.calls["beta"] == 18  # 9 triggers each
    assert judge.wanted_together(answered)
    print(f"sweep: judge peak in flight {fake.peak_by_model['limited']} (limit 3) over "
          f"{fake.calls['limited']} calls")
    assert fake.peak_by_model["limited"] == 3


def test_two_runs_keep_to_the_judges_limit_together(backend, tmp_path, prefect_server):
    models, everyone, answered, _ = gated_models("alpha", "beta")
    judge = TimedJudge()
    database = ("--database", backend) if backend.startswith("postgresql://") else ()
    env = dict(os.environ, PREFECT_API_URL=prefect_server)
    with FakeOpenAI({**models, "limited": judge}) as fake:
        runs = [warm_spawn.Popen(
            [sys.executable, "-m", "proactflow.cli", "run",
             *cli_args(fake, tmp_path / "store", eval_model=f"openai/{model}",
                       judge_model="openai/limited",
                       extra=("--concurrency", "3", *database))],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for model in ("alpha", "beta")]
        try:
            for run in runs:
                output, _ = run.communicate(timeout=300)
                assert run.returncode == 0, output[-3000:]
        finally:
            for run in runs:
                if run.poll() is None:
                    run.kill()
    assert everyone.is_set()
    assert fake.calls["limited"] == fake.calls["alpha"] + fake.calls["beta"] == 18  # 9 triggers each
    assert judge.wanted_together(answered)
    name = "postgres" if database else "local"
    print(f"{name}: judge peak in flight {fake.peak_by_model['limited']} (limit 3) over "
          f"{fake.calls['limited']} calls from two processes; first half of the judge's calls "
          f"by run: {judge.first_half()}")
    assert fake.peak_by_model["limited"] == 3
