"""Throughput of the real worker path: N conversations x 3 turns against the fake endpoint.

    python bench/throughput.py [--n 300] [--concurrency 10] [--latency 0.1] [--backends http,embedded,postgres]
                               [--shape trees|turns]
                               [--worker-procs 2] [--worker-threads 50] [--explain] [--repeat 1]

For each backend (embedded = SQLite + filesystem broker; postgres = PostgreSQL + Redis, when reachable) it
starts a fresh database, real `celery worker` processes and the fake OpenAI server (real HTTP on
127.0.0.1), launches one run of N conversation trees that each take exactly 3 turns (fail, fail, pass),
and measures the wall time from launch to the run's end. Ideal = ceil(N / C) x turns x latency: a
scheduler with zero overhead. `--shape turns` plays N evals of 4 scripted turns graded by common checks instead
(the same figures on a suite of another shape). It prints both, their ratio, the model calls the fake answered, and the
CPU the workers and the machine spent; with the `http` backend (the bare HTTP client making the same calls,
on by default) it ends with each backend's CPU per model call against the client's. --explain adds where
the time beyond the model calls went (per-conversation phases and slot gaps); --repeat K measures each
backend K times and reports the median, since one run on a shared machine varies by a few percent. bench/conversations.py measures other
workloads with the same code.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import math
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

TURNS = 3
PG_URL = os.environ.get("BENCH_PG_URL", "postgres://postgres@127.0.0.1:5432/evalsite_bench")
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/14")


@dataclass
class Workload:
    """What one measurement runs: a suite, how the fake answers it, and the ideal wall time."""

    source: str  # suite YAML; its evals (times their iterations) are the run's conversations
    ideal: float  # seconds a zero-overhead scheduler would take
    scripts: dict[str, list[str]] = field(default_factory=dict)  # fake.script(first_user, replies)
    rules: list[tuple[str, str]] = field(
        default_factory=list
    )  # fake.rule(contains, reply, where=rules_where)
    rules_where: str = "last"
    calls: int = (
        TURNS  # model calls a conversation makes one after another (the bare HTTP client makes as many)
    )
    # fake.tool_rounds: the rounds of tool calls before its text answer, when the suite offers tools
    tool_rounds: int = 1

    def prime(self, fake) -> None:
        fake.tool_rounds = self.tool_rounds
        for first_user, replies in self.scripts.items():
            fake.script(first_user, replies)
        for contains, reply in self.rules:
            fake.rule(contains, reply, where=self.rules_where)


def workload(args) -> Workload:
    if getattr(args, "shape", "trees") == "turns":
        return Workload(
            source=scripted_yaml(args.n),
            ideal=math.ceil(args.n / args.concurrency) * SCRIPTED_TURNS * args.latency,
            rules=list(SCRIPTED_REPLIES),
            calls=SCRIPTED_TURNS,
        )
    return Workload(
        source=suite_yaml(args.n),
        ideal=math.ceil(args.n / args.concurrency) * TURNS * args.latency,
        scripts={f"conversation {i}": ["not yet", "still not", "done"] for i in range(args.n)},
    )


# --shape turns: a support conversation of scripted turns, each graded by the checks a suite commonly uses.
SCRIPTED_TURNS = 4
SCRIPTED_REPLIES = (
    ("order", "Sorry to hear that. What is your order number?"),
    ("12345", "Order 12345 shipped yesterday and arrives on Friday."),
    ("arrive?", "It arrives on Friday, in two days."),
    ("thanks", "You're welcome! Anything else?"),
)


def scripted_yaml(n: int) -> str:
    """N evals of 4 scripted turns with a system prompt, graded by contains, max_tokens, regex, not_match, an
    `or` and min_words: a suite of another shape than suite_yaml's trees, for the same figures."""
    lines = ["name: scripted", "model: fake/bench-model", "system: You are the support agent of a bookshop.",
             "evals:"]  # fmt: skip
    for i in range(n):
        lines += [
            f"  - id: case-{i}",
            "    turns:",
            f"      - input: 'Hello, my order {i} has not arrived'",
            "        checks:",
            "          - contains: order number",
            "          - max_tokens: 60",
            "      - input: It is 12345.",
            "        checks:",
            "          - regex: 'shipped (yesterday|today)'",
            "      - input: When will it arrive?",
            "      - input: Great, thanks!",
            "        checks:",
            "          - not_match: '*sorry*'",
            "          - or: [{contains: welcome}, {contains: pleasure}]",
            "          - min_words: 3",
        ]
    return "\n".join(lines) + "\n"


def suite_yaml(n: int, extra: tuple[str, ...] = ()) -> str:
    """N conversation trees that take exactly 3 turns when the fake answers not yet, still not, done.
    `extra`: more top-level lines for the suite."""
    lines = ["name: throughput", "model: fake/bench-model", *extra, "evals:"]
    for i in range(n):
        lines += [
            f"  - prompt: conversation {i}",
            "    checks:",
            "      - match: '*done*'",
            "        prompt: try again",
            "        checks:",
            "          - match: '*done*'",
            "            prompt: last chance",
            "            checks:",
            "              - match: '*done*'",
        ]
    return "\n".join(lines) + "\n"


def process_cpu(pid: int) -> float:
    """User + system CPU seconds of a process (all its threads)."""
    return sum(process_user_system(pid))


def process_user_system(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) / os.sysconf("SC_CLK_TCK"), int(fields[12]) / os.sysconf("SC_CLK_TCK")


def thread_cpu(pid: int) -> dict[tuple[int, str], float]:
    """CPU seconds of each thread of a process, by (thread id, the name the system has for it): a worker names
    its threads (runs/worker/threads.py), so its event loop and its pump can be told apart."""
    ticks = os.sysconf("SC_CLK_TCK")
    threads = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (task / "comm").read_text().strip()
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        threads[(int(task.name), name)] = (int(fields[11]) + int(fields[12])) / ticks
    return threads


# What each of a worker's threads does, by the name runs/worker/threads.py gives it; any other thread is
# Celery's (its consumer, its pool) or the interpreter's.
THREAD_ROLES = {
    "evalsite-loop": "event loop (model calls, the engine)",
    "evalsite-grade": "grading threads",
    "evalsite-pump": "pump (the database)",
}
OTHER_THREADS = "Celery and the rest"


def cpu_by_role(before: list[dict], after: list[dict]) -> dict[str, float]:
    """The CPU seconds worker threads spent between two looks (thread_cpu of each process), by THREAD_ROLES."""
    spent: dict[str, float] = {}
    for earlier, later in zip(before, after, strict=True):
        for (tid, name), seconds in later.items():
            role = THREAD_ROLES.get(name, OTHER_THREADS)
            spent[role] = spent.get(role, 0.0) + seconds - earlier.get((tid, name), 0.0)
    return spent


def machine_busy() -> float:
    """CPU seconds all cores have spent busy since boot: everything on the machine, not just us."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def percentiles(values: list[float]) -> list[int]:
    values = sorted(values)
    return [round(values[int(q * (len(values) - 1))]) for q in (0.5, 0.9, 1.0)]


def explain(run, concurrency: int, call_seconds: float) -> dict:
    """Where the time beyond the model calls went, from the timestamps the app stores anyway.

    Only the agent's call is subtracted: a simulated user's call shows up in its turn's overhead.
    """
    phases: dict[str, list[float]] = {}
    starts, finishes, delivery = [], [], []
    odd = []  # conversations that did not end with turns (an error, say): listed, not timed
    for conversation in run.conversations.prefetch_related("turns"):
        turns = list(conversation.turns.all())
        if not turns or conversation.started_at is None or conversation.finished_at is None:
            odd.append(
                f"{conversation.eval_id} {conversation.status}, {len(turns)} turns: {conversation.error}"
            )
            continue
        marks = [conversation.started_at, *(turn.created_at for turn in turns), conversation.finished_at]
        latencies = [turn.record["latency_ms"] for turn in turns] + [0]
        names = ["claim, load, turn 1", *(f"turn {n}" for n in range(2, len(turns) + 1)), "finish"]
        for name, start, end, latency in zip(names, marks[:-1], marks[1:], latencies, strict=True):
            phases.setdefault(name, []).append((end - start).total_seconds() * 1000 - latency)
        starts.append(conversation.started_at)
        finishes.append(conversation.finished_at)
        if conversation.dispatched_at is not None:  # None once recovery has sent it back to the queue
            delivery.append((conversation.started_at - conversation.dispatched_at).total_seconds() * 1000)
    starts.sort()
    finishes.sort()
    # A slot frees when a conversation finishes; the conversation C places later in start order takes it.
    gaps = [
        (starts[i + concurrency] - finishes[i]).total_seconds() * 1000
        for i in range(len(starts) - concurrency)
    ]
    calls = [
        turn.record["latency_ms"]
        for c in run.conversations.prefetch_related("turns")
        for turn in c.turns.all()
    ]
    first = min(
        (c for c in run.conversations.all() if c.started_at), key=lambda conversation: conversation.started_at
    )
    # Where the ratio goes: C slots x wall time = the model calls + each conversation's time beyond its calls
    # + slot time with no conversation (the ramp before the first C start, the gaps between one conversation
    # and the next in a slot, the tail after the last start). Each part / the ideal calls' time (C x ideal).
    wall = (run.finished_at - run.created_at).total_seconds()
    busy = sum((f - s).total_seconds() for s, f in zip(starts, finishes, strict=True))
    ideal_calls = len(calls) * call_seconds
    ramp = sum((s - run.created_at).total_seconds() for s in starts[:concurrency])
    tail = sum((run.finished_at - f).total_seconds() for f in finishes[-concurrency:])
    idle = concurrency * wall - busy
    budget = {
        "model calls beyond their latency": sum(calls) / 1000 - ideal_calls,
        "conversations beyond their calls": busy - sum(calls) / 1000,
        "slots before their first conversation": ramp,
        "slots after their last conversation": tail,
        "slots between conversations": idle - ramp - tail,
    }
    fixed = [first.dispatched_at - run.created_at, first.started_at - first.dispatched_at,
             run.finished_at - finishes[-1]]  # fmt: skip
    return {
        "launch to first dispatch, to its claim; last conversation to run end ms": [
            round(delta.total_seconds() * 1000) for delta in fixed
        ],
        "model call as the worker timed it, p50/p90/max ms": percentiles(calls) if calls else [],
        "overhead beyond the model call, mean ms": {
            name: round(sum(v) / len(v), 1) for name, v in phases.items()
        },
        "slot gap p50/p90/max ms": percentiles(gaps) if gaps else [],
        "first C conversations started after launch, p0/p50/p100 ms": [
            round(
                (starts[min(len(starts), concurrency) * q // 2 - (q == 2)] - run.created_at).total_seconds()
                * 1000
            )
            for q in (0, 1, 2)
        ],
        "last C conversations finished before the run's end, p100/p50/p0 ms": [
            round(
                (
                    run.finished_at - finishes[-min(len(finishes), concurrency) * q // 2 - (q == 0)]
                ).total_seconds()
                * 1000
            )
            for q in (2, 1, 0)
        ],
        "of which marked dispatched to claimed (broker and pool) p50/p90/max ms": percentiles(delivery),
        "ratio = 1 + the sum of these, each / all the calls' ideal time": {
            name: round(value / ideal_calls, 3) for name, value in budget.items()
        },
        **({f"not timed: {len(odd)} conversation(s), the first": odd[:5]} if odd else {}),
    }


def measure(args, work: Workload) -> dict:
    """One measurement, in a process whose environment already points at the backend."""
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command
    from django.db.models import Count

    from endpoints.models import Endpoint
    from runs.models import Run
    from runs.services import create_run
    from runs.worker.tasks import run_conversation
    from suites.services import create_suite
    from tests.fakeopenai import FakeOpenAI

    call_command("migrate", verbosity=0)
    fake = FakeOpenAI(latency=args.latency, api_key="sk-bench").start()
    work.prime(fake)
    Endpoint.objects.create(
        name="fake", base_url=fake.base_url, api_key_env="BENCH_FAKE_KEY", max_concurrency=1000
    )
    user = get_user_model().objects.create_user("bench", password="bench-password")
    from projects.models import Membership, Project  # the project its pages and runs are in

    Membership.objects.get_or_create(project=Project.default(), user=user, defaults={"role": "admin"})
    suite = create_suite(owner=user, source=work.source)
    command = [sys.executable, "-m", "celery", "-A", "evalsite", "worker", "--pool", args.pool,
               "--concurrency", str(args.worker_threads), "--loglevel", "WARNING", "--without-gossip",
               "--without-mingle"]  # fmt: skip
    var_dir = Path(os.environ["EVALSITE_VAR_DIR"])
    with open(var_dir / "worker.log", "wb") as log:
        workers = []
        for i in range(args.worker_procs):
            hostname, env = f"bench{i}@%h", os.environ.copy()
            if args.hosts:
                # As a separate machine would have it: a name and a var folder of its own; only the database
                # and the broker are shared (so --hosts needs the PostgreSQL + Redis backend).
                hostname = f"evalsite@bench-host-{i}"
                env["EVALSITE_VAR_DIR"] = str(var_dir / f"host-{i}")
                Path(env["EVALSITE_VAR_DIR"]).mkdir(exist_ok=True)
            workers.append(
                subprocess.Popen(
                    [*command, "--hostname", hostname], cwd=ROOT, env=env, stdout=log, stderr=log
                )
            )
        try:
            # Workers and this process's broker connection are set up before the clock starts: startup is
            # not what we measure. A task for a conversation that does not exist connects both ends (the
            # first publish in a process takes ~100 ms) and is skipped by the worker.
            run_conversation.delay(0)
            time.sleep(4)
            quiet_collector()
            threads_before = [thread_cpu(worker.pid) for worker in workers]
            worker_cpu = -sum(process_cpu(worker.pid) for worker in workers)
            worker_system = -sum(process_user_system(worker.pid)[1] for worker in workers)
            machine_cpu = -machine_busy()
            own_cpu = -time.process_time()  # this process: the fake endpoint, and the wait for the run's end
            started = time.monotonic()
            run = create_run(version=suite.latest_version, user=user, concurrency=args.concurrency)
            if run.concurrency != args.concurrency:
                raise SystemExit(
                    f"the run got concurrency {run.concurrency}, not {args.concurrency}: "
                    f"set EVALSITE_MAX_RUN_CONCURRENCY={args.concurrency}"
                )
            while Run.objects.filter(pk=run.pk, status__in=("queued", "running")).exists():
                time.sleep(0.01)
            wall = time.monotonic() - started
            worker_cpu += sum(process_cpu(worker.pid) for worker in workers)
            by_thread = cpu_by_role(threads_before, [thread_cpu(worker.pid) for worker in workers])
            worker_system += sum(process_user_system(worker.pid)[1] for worker in workers)
            machine_cpu += machine_busy()
            own_cpu += time.process_time()
            calls = len(fake.chat_requests())
        finally:
            for worker in workers:
                worker.kill()
            fake.stop()
    run.refresh_from_db()
    result = {
        "status": run.status,
        "wall": wall,
        "ideal": work.ideal,
        "turns": sum(run.conversations.values_list("turn_count", flat=True)),
        "calls": calls,
        "worker_cpu": worker_cpu,
        "worker_system": worker_system,
        "worker_threads": by_thread,  # of it, in the kernel (sockets, the database file, waking threads)
        "machine_busy": machine_cpu / wall / os.cpu_count(),
        # What the machine spent besides the workers: the fake endpoint (this process), and the rest (the
        # database server and the broker, on PostgreSQL + Redis; the machine's other jobs).
        "fake_cpu": own_cpu,
        "other_cpu": machine_cpu - worker_cpu - own_cpu,
    }
    if args.explain:
        result["explain"] = explain(run, args.concurrency, args.latency)
        # How the worker processes shared the conversations: a skewed share leaves one process's CPU short.
        shares = run.conversations.order_by().values("worker").annotate(n=Count("pk"))
        result["explain"]["conversations per worker process"] = sorted(share["n"] for share in shares)
    return result


def quiet_collector() -> None:
    """This process hosts the fake endpoint: a full garbage collection here (130-180 ms over Django's
    objects) would stall every reply in flight and be counted against the system under test. Workers
    freeze their startup objects the same way (runs.worker.tasks.freeze_startup_objects)."""
    gc.collect()
    gc.freeze()


def _serve_fake(latency: float, work: Workload, pipe) -> None:
    """The fake endpoint in a process of its own: sends its base URL, then the number of chat requests
    it has answered each time it is asked, until asked for None."""
    from tests.fakeopenai import FakeOpenAI

    with FakeOpenAI(latency=latency, api_key="sk-bench") as fake:
        work.prime(fake)
        quiet_collector()
        pipe.send(fake.base_url)
        while pipe.recv() is not None:
            pipe.send(len(fake.chat_requests()))


@contextlib.contextmanager
def fake_in_a_process(args, work: Workload):
    """_serve_fake in a process of its own, for as long as the block runs: yields its base URL and a function
    giving the number of chat requests it has answered so far."""
    import multiprocessing

    ours, theirs = multiprocessing.Pipe()
    server = multiprocessing.get_context("fork").Process(
        target=_serve_fake, args=(args.latency, work, theirs), daemon=True
    )
    server.start()

    def answered() -> int:
        ours.send("count")
        return ours.recv()

    try:
        yield ours.recv(), answered
        ours.send(None)
    finally:
        server.join(timeout=5)
        server.kill()


def http_only(args, work: Workload) -> dict:
    """The same number of model calls with nothing but an HTTP client: C coroutines on one event loop, each
    taking the next conversation and making its 3 calls one after another with aiohttp (what the workers'
    client uses), no engine, no database. What is left above 1 x ideal is the fake endpoint and this machine:
    the floor under every other row at this concurrency and latency."""
    import asyncio

    import aiohttp

    conversations = [f"conversation {i}" for i in range(args.n)]
    with fake_in_a_process(args, work) as (base_url, answered):

        async def play(session, queue: asyncio.Queue, latencies: list) -> None:
            while not queue.empty():
                first = queue.get_nowait()
                messages = [{"role": "user", "content": first}]
                for _ in range(work.calls):
                    started = time.monotonic()
                    async with session.post(f"{base_url}/chat/completions", json={"model": "bench-model", "messages": messages},
                                            headers={"Authorization": "Bearer sk-bench"}) as response:  # fmt: skip
                        reply = (await response.json())["choices"][0]["message"]["content"]
                    latencies.append(time.monotonic() - started)
                    messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "next"}]

        async def main() -> tuple[float, float, int]:
            queue: asyncio.Queue = asyncio.Queue()
            for first in conversations:
                queue.put_nowait(first)
            latencies: list[float] = []
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector) as session:
                started = time.monotonic()
                await asyncio.gather(*(play(session, queue, latencies) for _ in range(args.concurrency)))
                return time.monotonic() - started, sum(latencies), len(latencies)

        quiet_collector()
        cpu = -time.process_time()
        wall, in_calls, made = asyncio.run(main())
        cpu += time.process_time()
        calls = answered()
    return {
        "status": "passed" if made == args.n * work.calls else "failed",
        "wall": wall,
        "ideal": work.ideal,
        "turns": made,
        "calls": calls,
        "worker_cpu": cpu,
        "machine_busy": None,
        # The calls as the client timed them, beyond the fake's latency: the endpoint's own share of the ratio.
        "explain": {
            "model calls beyond their latency, x ideal": round(in_calls / (made * args.latency) - 1, 3)
        },
    }


def engine_only(args, work: Workload) -> dict:
    """The same conversations through the engine alone, in threads: no database, broker or Celery.

    The floor for this machine and fake endpoint: what is left is HTTP, the openai client and the engine.
    The fake endpoint runs in a process of its own, as it does for the other backends (there it shares a
    process with nothing but the wait for the run's end), so its work does not compete for this process's
    GIL. Every model reference ("fake/<model>") goes to the one fake endpoint.
    """
    from concurrent.futures import ThreadPoolExecutor

    from engine.clients import EndpointConfig, OpenAIClient
    from engine.conversation import Defaults, EngineContext, run_eval
    from engine.loader import load_suite

    os.environ["BENCH_FAKE_KEY"] = "sk-bench"
    spec = load_suite(work.source)
    jobs = [index for index, ev in enumerate(spec.evals) for _ in range(ev.iterations or spec.iterations)]
    with fake_in_a_process(args, work) as (base_url, answered):
        client = OpenAIClient(EndpointConfig(name="fake", base_url=base_url, api_key_env="BENCH_FAKE_KEY"))
        model = spec.model.split("/", 1)[-1]
        judge_model = (spec.judge or spec.model).split("/", 1)[-1]
        ctx = EngineContext(
            agent=client,
            model=model,
            judge=client,
            judge_model=judge_model,
            resolve=lambda ref: (client, ref.split("/", 1)[-1]),
            # The suite's own settings (its tools, say), as engine.runner passes them.
            defaults=Defaults.of(spec),
        )
        client.complete(model, [{"role": "user", "content": "warm up"}])
        warm_up_calls = answered()
        quiet_collector()
        cpu = -time.process_time()
        started = time.monotonic()
        with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
            results = list(pool.map(lambda i: run_eval(spec.evals[i], i, str(i), ctx), jobs))
        wall = time.monotonic() - started
        cpu += time.process_time()
        calls = answered() - warm_up_calls
    return {
        "status": "passed" if all(r.status == "passed" for r in results) else "failed",
        "wall": wall,
        "ideal": work.ideal,
        "turns": sum(len(r.turns) for r in results),
        "calls": calls,
        "worker_cpu": cpu,
        "machine_busy": None,
    }


def reachable(url: str) -> bool:
    address = urlsplit(url)
    try:
        port = address.port or (6379 if address.scheme.startswith("redis") else 5432)
        with socket.create_connection((address.hostname or "127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def fresh_postgres_and_redis(pg_url: str = PG_URL, redis_url: str | None = REDIS_URL) -> None:
    """Drop and create the benchmark's PostgreSQL database (through the server's `postgres` database), and
    empty its Redis database, if it names one."""
    import psycopg
    import psycopg.sql
    import redis

    admin_url = urlsplit(pg_url)._replace(scheme="postgresql", path="/postgres").geturl()
    with psycopg.connect(admin_url, autocommit=True) as conn:
        name = psycopg.sql.Identifier(urlsplit(pg_url).path.lstrip("/"))
        conn.execute(psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(psycopg.sql.SQL("CREATE DATABASE {}").format(name))
    if redis_url:
        redis.Redis.from_url(redis_url).flushdb()


def common_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every benchmark built on this module shares."""
    parser.add_argument("--latency", type=float, default=0.1)
    # As `make run` starts them (manage.py evalserve): 2 processes of 50 slots.
    parser.add_argument("--worker-procs", type=int, default=2, help="worker processes")
    parser.add_argument(
        "--worker-threads", type=int, default=50,
        help="--concurrency of each worker process: the conversations it plays at once",
    )  # fmt: skip
    parser.add_argument("--pool", default="threads", choices=["threads", "prefork"], help="Celery pool")
    parser.add_argument(
        "--hosts", action="store_true",
        help="run each worker process as a separate host would (its own hostname and var folder); postgres only",
    )  # fmt: skip
    parser.add_argument("--backends", default="engine,embedded,postgres")
    parser.add_argument("--explain", action="store_true")
    parser.add_argument(
        "--repeat", type=int, default=1, help="measure each backend K times; report the median"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)


def cli(args, work: Workload) -> dict:
    """The same conversations through `evalsite run --concurrency C`, what a CI job runs: one process,
    one event loop (engine.runner), the model under test on the default endpoint (OPENAI_BASE_URL), no
    database. Wall time is the run's own (the report's duration), without the command's start-up; CPU is
    the whole command's, start-up included. The whole process, from exec to exit with the report and the
    JSON written, is what a user waits for: it is printed beside the run's own, with the CPU per call."""
    folder = Path(tempfile.mkdtemp(prefix="evalsite-bench-cli-"))
    with fake_in_a_process(args, work) as (base_url, answered), contextlib.ExitStack() as cleanup:
        cleanup.callback(shutil.rmtree, folder, ignore_errors=True)
        suite = folder / "suite.yaml"
        suite.write_text(work.source)
        env = {
            **os.environ,
            "OPENAI_BASE_URL": base_url,
            "OPENAI_API_KEY": "sk-bench",
            "EVALSITE_DEFAULT_CONCURRENCY": str(args.concurrency),  # the default endpoint's cap
            "EVALSITE_VAR_DIR": str(folder),
            "DATABASE_URL": f"sqlite:///{folder / 'none.sqlite3'}",  # not created: the CLI needs none
        }
        model = "bench-model"  # the suite's fake/bench-model, on the default endpoint
        before = answered()
        evalsite = str(Path(sys.executable).with_name("evalsite"))
        command = [evalsite, "run", str(suite), "--model", model, "--concurrency", str(args.concurrency),
                   "--json", str(folder / "out.json")]  # fmt: skip
        usage_before = os.times()
        started = time.perf_counter()
        process = subprocess.run(command, env=env, capture_output=True, text=True, cwd=folder)
        whole = time.perf_counter() - started
        usage_after = os.times()
        if process.returncode not in (0, 1):
            raise SystemExit(f"evalsite run failed ({process.returncode}):\n{process.stderr[-2000:]}")
        report = json.loads((folder / "out.json").read_text())
        calls = answered() - before
    cpu = (usage_after.children_user - usage_before.children_user) + (
        usage_after.children_system - usage_before.children_system
    )
    return {
        "status": report["status"],
        "wall": report["totals"]["duration_s"],
        "ideal": work.ideal,
        "turns": report["totals"]["turns"],
        "calls": calls,
        "worker_cpu": cpu,
        "machine_busy": None,
        "explain": {
            "whole process": f"{whole:.2f} s, {whole / work.ideal:.3f} x ideal "
            f"({whole - report['totals']['duration_s']:.2f} s outside the run)",
            "CLI CPU per model call": f"{1000 * cpu / max(1, calls):.2f} ms, start-up included",
        },
    }


def child(args, work: Workload) -> None:
    """The child's side: measure in this process (its environment names the backend), print JSON."""
    backend = os.environ.get("BENCH_BACKEND")
    measure_ = {"http": http_only, "engine": engine_only, "cli": cli}.get(backend, measure)
    print(json.dumps(measure_(args, work)))


def table_header() -> None:
    print(f"{'backend':<22}{'status':<8}{'turns':>6}{'calls':>6}{'wall s':>8}{'ideal s':>8}{'ratio':>7}  CPU")


def run_backends(args, child_argv: list[str]) -> list[dict]:
    """One row per backend: each measurement in a fresh child process `child_argv` + --child. With
    --repeat K each backend is measured K times; the row returned is the run with the median ratio."""
    rows = []
    for backend in args.backends.split(","):
        label = BACKENDS.get(backend)
        if label is None:
            raise SystemExit(f"unknown backend {backend!r}")
        if args.hosts and backend == "embedded":
            print(f"{label:<22}skipped: --hosts shares only PostgreSQL and Redis between hosts")
            continue
        if backend == "postgres" and not (reachable(PG_URL) and reachable(REDIS_URL)):
            print(f"{label:<22}skipped: {PG_URL} or {REDIS_URL} not reachable")
            continue
        results = []
        for _ in range(args.repeat):
            result = measure_in_child(backend, child_argv)
            if result is None:
                print(f"{label:<22}failed:\n{measure_in_child.error}")
                break
            print_row(label, result)
            results.append(result)
        if not results:
            continue
        results.sort(key=lambda result: result["wall"] / result["ideal"])
        if len(results) > 1:
            ratios = [result["wall"] / result["ideal"] for result in results]
            # statistics.median: of an even count, the mean of the middle two (not the higher one)
            print(f"{'':<22}median of {len(results)}: {statistics.median(ratios):.3f} "
                  f"(range {ratios[0]:.3f} to {ratios[-1]:.3f})")  # fmt: skip
        per_call = statistics.median(cpu_per_call(result) for result in results)
        rows.append(
            {
                "backend": backend,
                **results[len(results) // 2],
                "cpu_per_call": per_call,
                "repeats": len(results),
            }
        )
    print_cpu_against_http(rows)
    return rows


def cpu_per_call(result: dict) -> float:
    """CPU seconds per model call the fake answered: every worker process's user + system time (or the
    client's, or the engine's), over the calls."""
    return result["worker_cpu"] / max(1, result["calls"])


def print_cpu_against_http(rows: list[dict]) -> None:
    """Each backend's CPU per model call beside the bare HTTP client's, measured in the same run: the floor
    a worker's CPU is held to (a ratio of 2 means twice the client's work for each call)."""
    floor = next((row["cpu_per_call"] for row in rows if row["backend"] == "http"), None)
    if not floor or len(rows) < 2:
        return
    median = " (medians)" if any(row.get("repeats", 1) > 1 for row in rows) else ""
    print(f"CPU a call{median}, against the HTTP client alone ({1000 * floor:.2f} ms):")
    for row in rows:
        if row["backend"] != "http":
            print(f"    {BACKENDS[row['backend']]:<22}{1000 * row['cpu_per_call']:.2f} ms"
                  f"  = {row['cpu_per_call'] / floor:.2f} x the client's")  # fmt: skip
            # Which threads spent it: the event loop's share is the engine and its HTTP calls, set against the
            # client's alone; the pump's is the database's.
            for role, seconds in sorted(row.get("worker_threads", {}).items(), key=lambda item: -item[1]):
                per_call = seconds / max(1, row["calls"])
                print(f"        {role:<38}{1000 * per_call:.2f} ms  = {per_call / floor:.2f} x")


BACKENDS = {
    "http": "HTTP client alone",
    "engine": "engine only (floor)",
    "cli": "evalsite run (CLI)",
    "embedded": "SQLite + filesystem",
    "postgres": "PostgreSQL + Redis",
}


def measure_in_child(backend: str, child_argv: list[str]) -> dict | None:
    """One measurement on a fresh database, in a child process whose environment names the backend.
    None when the child failed; measure_in_child.error then holds the end of its stderr."""
    var_dir = Path(tempfile.mkdtemp(prefix=f"evalsite-bench-{backend}-"))
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "evalsite.settings", "EVALSITE_DEV": "1",
           "EVALSITE_VAR_DIR": str(var_dir), "BENCH_FAKE_KEY": "sk-bench", "LOG_LEVEL": "WARNING"}  # fmt: skip
    env["BENCH_BACKEND"] = backend
    if backend in ("http", "engine", "cli"):
        pass
    elif backend == "embedded":
        env["DATABASE_URL"] = f"sqlite:///{var_dir / 'bench.sqlite3'}"
        env.pop("CELERY_BROKER_URL", None)
    else:
        fresh_postgres_and_redis()
        env["DATABASE_URL"] = PG_URL
        env["CELERY_BROKER_URL"] = REDIS_URL
    dropped = -listen_overflows()
    process = subprocess.run([sys.executable, *child_argv, "--child"], env=env, capture_output=True,
                             text=True, cwd=ROOT)  # fmt: skip
    dropped += listen_overflows()
    shutil.rmtree(var_dir, ignore_errors=True)
    if process.returncode != 0:
        measure_in_child.error = process.stderr[-3000:]
        return None
    return {**json.loads(process.stdout.strip().splitlines()[-1]), "dropped_connects": dropped}


def listen_overflows() -> int:
    """Connects this machine's kernel dropped because a server's accept queue was full, since boot. Each one
    is retried by its client after a second: a 1 s model call then takes 2 s. Counted so a run that had any
    says so (the fake endpoint's queue was once too short for a launch at concurrency 300)."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return 0
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            return int(dict(zip(names.split(), values.split(), strict=True)).get("ListenOverflows", 0))
    return 0


def print_row(label: str, result: dict) -> None:
    ratio = result["wall"] / result["ideal"]
    cpu = (
        f"{result['worker_cpu']:.1f} s ({1000 * result['worker_cpu'] / max(1, result['calls']):.1f} ms/call)"
    )
    if "worker_system" in result:
        cpu = f"{cpu[:-1]}, {result['worker_system']:.1f} s of it system)"
    if result["machine_busy"] is not None:
        cpu = f"workers {cpu}, machine {100 * result['machine_busy']:.0f}% busy"
        if "fake_cpu" in result:
            cpu += f" (fake endpoint {result['fake_cpu']:.1f} s, database, broker and rest {result['other_cpu']:.1f} s)"
    else:
        cpu = f"engine {cpu}"
    if result.get("dropped_connects"):
        cpu += (
            f"; {result['dropped_connects']} connects dropped by a full accept queue, each retried 1 s later"
        )
    print(f"{label:<22}{result['status']:<8}{result['turns']:>6}{result['calls']:>6}{result['wall']:>8.2f}"
          f"{result['ideal']:>8.2f}{ratio:>7.3f}  {cpu}")  # fmt: skip
    for name, value in result.get("explain", {}).items():
        print(f"    {name}: {value}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument(
        "--shape", default="trees", choices=["trees", "turns"],
        help="trees: conversation trees that pass on their third turn; turns: 4 scripted turns with common checks",
    )  # fmt: skip
    common_arguments(parser)
    # The bare HTTP client first: the floor the workers' wall time and CPU a call are read against.
    parser.set_defaults(backends="http,embedded,postgres")
    args = parser.parse_args()
    if args.child:
        child(args, workload(args))
        return

    turns = SCRIPTED_TURNS if args.shape == "turns" else TURNS
    print(
        f"{args.n} conversations ({args.shape}) x {turns} turns, run concurrency {args.concurrency}, fake latency "
        f"{args.latency * 1000:.0f} ms, {args.worker_procs} worker process(es) x {args.worker_threads} slots"
    )
    table_header()
    run_backends(args, [__file__, *sys.argv[1:]])


if __name__ == "__main__":
    main()
