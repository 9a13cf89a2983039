"""What one child process of the fault harness does (bench/faults.py): start an environment (a fresh
database, a broker, the fake endpoint, two worker processes under evalserve's Supervisor), play each scenario
in it (launch a run, inject its faults at random moments while it progresses) and measure it
(bench/faults_measure.py)."""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from faults_measure import Fault, broken, key, measure, recovered, script, suite_yaml, turns_of
from throughput import quiet_collector

from tests.live_services import PostgresServer, RedisServer

FAKE_KEY_ENV, FAKE_KEY = "FAULTS_FAKE_KEY", "sk-faults"
STUCK_AFTER = 120.0  # seconds after the last fault: a conversation not finished by then is stuck


@dataclass(frozen=True)
class Profile:
    conversations: int
    concurrency: int
    latency: float
    kills: int
    sigterms: int
    redis_restarts: int
    redis_down: float
    outage: float
    storm: float
    redos: int
    malformed: float  # seconds of 200s that are no chat completion
    pg_down: float = 0.0


FULL = Profile(conversations=100, concurrency=10, latency=0.5, kills=3, sigterms=2, redis_restarts=2,
               redis_down=3.0, outage=10.0, storm=10.0, redos=6, malformed=10.0, pg_down=60.0)  # fmt: skip
QUICK = Profile(conversations=20, concurrency=8, latency=0.2, kills=1, sigterms=1, redis_restarts=1,
                redis_down=2.0, outage=3.0, storm=3.0, redos=3, malformed=3.0, pg_down=5.0)  # fmt: skip


def label(scenario: str, p: Profile) -> str:
    return {
        "baseline": "no fault",
        "kill": f"kill -9 a worker x{p.kills}",
        "sigterm": f"SIGTERM a worker x{p.sigterms}",
        "redis": f"Redis restart x{p.redis_restarts}, {p.redis_down:g} s down",
        "pgrestart": f"PostgreSQL crash + restart, {p.pg_down:g} s down",
        "outage": f"model server down {p.outage:g} s",
        "storm": f"30% 429 + 10% 500 for {p.storm:g} s",
        "redos": f"ReDoS replies in {p.redos} conversations",
        "garbage": f"200s of JSON cut short for {p.malformed:g} s",
        "html": f"200s of an HTML page for {p.malformed:g} s",
        "empty": f"200s with empty choices for {p.malformed:g} s",
    }[scenario]


def planned(scenario: str, p: Profile) -> int:
    return {"baseline": 0, "kill": p.kills, "sigterm": p.sigterms, "redis": p.redis_restarts}.get(scenario, 1)


# --- one environment: database, broker, fake endpoint, two supervised workers ----------------------------


class Environment:
    def __init__(self, backend: str, profile: Profile, var_dir: Path, *, own_postgres: bool = False) -> None:
        self.backend, self.profile, self.var_dir = backend, profile, var_dir
        self.redis: RedisServer | None = None
        # A PostgreSQL server of the harness's own, which it may stop: never the machine's.
        self.postgres = PostgresServer(var_dir / "postgres") if own_postgres else None
        self.fake = None
        self.supervisor = None
        self.user = None
        self.signalled: set[int] = set()  # worker pids the harness killed or stopped

    def start(self) -> None:
        if self.backend == "postgres" and shutil.which("redis-server"):
            self.redis = RedisServer()
            self.redis.start()
            os.environ["CELERY_BROKER_URL"] = self.redis.url
        if self.postgres is not None:
            self.postgres.start()
            os.environ["DATABASE_URL"] = self.postgres.url
        import django

        django.setup()
        from django.contrib.auth import get_user_model
        from django.core.management import call_command

        from endpoints.models import Endpoint
        from runs.management.commands.evalserve import WORKER, Supervisor
        from runs.worker.tasks import run_conversation
        from tests.fakeopenai import FakeOpenAI

        call_command("migrate", verbosity=0)
        self.fake = FakeOpenAI(latency=self.profile.latency, api_key=FAKE_KEY).start()
        Endpoint.objects.create(
            name="fake", base_url=self.fake.base_url, api_key_env=FAKE_KEY_ENV, max_concurrency=1000
        )
        self.user = get_user_model().objects.create_user("faults", password="faults-password")
        from projects.models import Membership, Project  # the project its pages and runs are in

        Membership.objects.get_or_create(
            project=Project.default(), user=self.user, defaults={"role": "admin"}
        )
        # As `make run` runs them (manage.py evalserve): two processes of 10 threads, restarted when they die.
        self.supervisor = Supervisor(
            [[*WORKER, "--concurrency", "10", "--hostname", f"faults{n}@%h"] for n in (1, 2)]
        )
        self.supervisor.start()
        self.wait_workers()
        run_conversation.delay(0)  # connects this process to the broker; the workers skip it
        quiet_collector()

    def stop(self) -> None:
        if self.supervisor is not None:
            self.supervisor.stop(timeout=10)
        if self.fake is not None:
            self.fake.stop()
        if self.redis is not None:
            self.redis.kill()
        if self.postgres is not None:
            self.postgres.remove()

    def workers(self) -> list:
        return list(self.supervisor.processes)

    def wait_workers(self, timeout: float = 60) -> None:
        """Until both worker processes are alive and beating (a restarted one takes a few seconds)."""
        from django.db import close_old_connections

        from runs.models import Worker

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            names = list(Worker.objects.values_list("name", flat=True))
            close_old_connections()
            processes = self.workers()
            if all(p.poll() is None and any(f":{p.pid}:" in name for name in names) for p in processes):
                return
            time.sleep(0.1)
        raise RuntimeError("the workers did not come up")


# --- watching a run ---------------------------------------------------------------------------------------


class Watch(threading.Thread):
    """Polls the run every 100 ms: its progress, whether it has ended, conversations that finish twice (a
    finished one seen running again, or finishing at another time), and every worker process it ran on."""

    def __init__(self, run_id, env: Environment) -> None:
        super().__init__(name="faults-watch", daemon=True)
        self.run_id, self.env = run_id, env
        self.turns = 0
        self.active = True
        self.finished_at: dict[int, object] = {}
        self.finished_again: set[int] = set()
        self.processes: dict[int, object] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        from django.db import DatabaseError, connection

        from runs.outage import drop_connection

        try:
            while not self._halt.wait(0.1):
                try:
                    self._look()
                except DatabaseError:  # the database is restarting (pgrestart): look again
                    drop_connection()
        finally:
            connection.close()

    def _look(self) -> None:
        from runs.models import ACTIVE, FINISHED, Conversation, Run

        for process in self.env.workers():
            self.processes.setdefault(process.pid, process)
        rows = Conversation.objects.filter(run_id=self.run_id).values_list(
            "pk", "status", "finished_at", "turn_count"
        )
        turns = 0
        for pk, status, finished_at, turn_count in rows:
            turns += turn_count
            first = self.finished_at.get(pk)
            if status in FINISHED and first is None:
                self.finished_at[pk] = finished_at
            elif first is not None and (status not in FINISHED or finished_at != first):
                self.finished_again.add(pk)
        self.turns = turns
        self.active = Run.objects.filter(pk=self.run_id, status__in=ACTIVE).exists()

    def stop(self) -> None:
        self._halt.set()
        self.join()

    def wait(self, condition, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True


# --- faults -----------------------------------------------------------------------------------------------


def in_flight(run_id, victim: int | None = None) -> dict[int, tuple[str, int]]:
    """The run's conversations in flight, each with where it is, "sent" (its message is in the broker or a
    worker's hands, not claimed yet), "running", or "held" by the worker process `victim`, and its turns."""
    from django.db.models import Q

    from runs.models import Conversation, Status

    rows = (
        Conversation.objects.filter(run_id=run_id)
        .filter(Q(status=Status.RUNNING) | Q(status=Status.QUEUED, dispatched_at__isnull=False))
        .values_list("pk", "status", "worker", "turn_count")
    )
    return {
        pk: ("sent" if status == Status.QUEUED else "held" if f":{victim}:" in worker else "running", turns)
        for pk, status, worker, turns in rows
    }


def pick_worker(env: Environment, run_id, rng: random.Random):
    """A live worker process, one that holds some of the run when any does."""
    from runs.models import Conversation, Status

    names = Conversation.objects.filter(run_id=run_id, status=Status.RUNNING).values_list("worker", flat=True)
    live = [p for p in env.workers() if p.poll() is None]
    holding = {p.pid: sum(f":{p.pid}:" in name for name in names) for p in live}
    candidates = [p for p in live if holding[p.pid]] or live
    victim = rng.choice(candidates)
    return victim, holding[victim.pid]


def signal_worker(env: Environment, run_id, rng: random.Random, signum: int) -> Fault:
    env.wait_workers()  # one fault at a time: both workers up, as independent failures would find them
    victim, held = pick_worker(env, run_id, rng)
    affected = in_flight(run_id, victim.pid)
    env.signalled.add(victim.pid)
    at = time.time()
    victim.send_signal(signum)
    detail = {"pid": victim.pid, "held": held}
    if signum == signal.SIGTERM:
        victim.wait(timeout=60)
        detail["exited_after"] = round(time.time() - at, 2)
    return Fault("kill" if signum == signal.SIGKILL else "sigterm", at, at, affected, detail)


def restart_redis(env: Environment, run_id, rng: random.Random) -> Fault:
    affected = in_flight(run_id)
    at = time.time()
    env.redis.kill()
    time.sleep(env.profile.redis_down)
    env.redis.start()
    return Fault("redis", at, time.time(), affected, affected_at_end=in_flight(run_id))


def restart_postgres(env: Environment, run_id, rng: random.Random) -> Fault:
    """The harness's own PostgreSQL quits as in a crash (every connection dropped, the last unflushed commits
    of sessions that do not wait for the flush forgotten), stays down, and starts again."""
    from django.db import connection

    from runs.outage import patiently

    affected = in_flight(run_id)
    at = time.time()
    env.postgres.stop("immediate")
    time.sleep(env.profile.pg_down)
    env.postgres.start()
    cleared = time.time()
    connection.close()
    affected_at_end = patiently(lambda: in_flight(run_id), what="the harness")
    return Fault("pgrestart", at, cleared, affected, affected_at_end=affected_at_end)


def model_outage(env: Environment, run_id, rng: random.Random) -> Fault:
    affected = in_flight(run_id)
    at = time.time()
    env.fake.stop()  # connections refused; requests in flight dropped unanswered
    time.sleep(env.profile.outage)
    env.fake.start()  # the same address
    return Fault("outage", at, time.time(), affected, affected_at_end=in_flight(run_id))


def rate_limit_storm(env: Environment, run_id, rng: random.Random) -> Fault:
    affected = in_flight(run_id)
    at = time.time()
    env.fake.storm(rate_429=0.3, rate_500=0.1, retry_after=1, seed=rng.randrange(2**32))
    time.sleep(env.profile.storm)
    env.fake.storm()
    return Fault("storm", at, time.time(), affected, affected_at_end=in_flight(run_id))


def redos_replies(env: Environment, run_id, rng: random.Random) -> Fault:
    """Some conversations with a turn still to fail get the catastrophic reply from their next turn on."""
    from runs.models import ACTIVE, Conversation

    rows = Conversation.objects.filter(run_id=run_id, status__in=ACTIVE).values_list("index", "turn_count")
    eligible = [(index, count) for index, count in rows if count + 1 < turns_of(index)]
    chosen = rng.sample(eligible, min(env.profile.redos, len(eligible)))
    affected = in_flight(run_id)
    at = time.time()
    for index, count in chosen:
        env.fake.script(key(index), script(index, poisoned_from=count + 1))
    return Fault("redos", at, at, affected, {"poisoned": sorted(index for index, _ in chosen)})


def malformed_replies(scenario: str):
    """For seconds, every model call is answered 200 with something that is no chat completion, as a gateway
    answers while it has no model behind it."""
    from tests.fakeopenai import Reply

    answer = {
        "garbage": Reply(raw='{"choices": [ not json'),
        "html": Reply(raw="<html><body><h1>502 Bad Gateway</h1></body></html>", content_type="text/html"),
        "empty": Reply(choices=[]),
    }[scenario]

    def inject(env: Environment, run_id, rng: random.Random) -> Fault:
        affected = in_flight(run_id)
        at = time.time()
        env.fake.misbehave(answer)
        time.sleep(env.profile.malformed)
        env.fake.misbehave()
        return Fault(scenario, at, time.time(), affected, affected_at_end=in_flight(run_id))

    return inject


INJECT = {
    "kill": lambda env, run_id, rng: signal_worker(env, run_id, rng, signal.SIGKILL),
    "sigterm": lambda env, run_id, rng: signal_worker(env, run_id, rng, signal.SIGTERM),
    "redis": restart_redis,
    "pgrestart": restart_postgres,
    "outage": model_outage,
    "storm": rate_limit_storm,
    "redos": redos_replies,
    **{scenario: malformed_replies(scenario) for scenario in ("garbage", "html", "empty")},
}


def triggers(count: int, rng: random.Random) -> list[float]:
    """Moments of the run (fractions of its turns stored) at which to inject: one in each of `count` equal
    slices of its first 70%, at a random place within the slice."""
    return [0.7 * (n + rng.uniform(0.15, 0.85)) / count for n in range(count)]


# --- one scenario -----------------------------------------------------------------------------------------


def play(env: Environment, scenario: str, seed: int) -> dict:
    from django.db import close_old_connections

    from runs.models import Run
    from runs.services import cancel, create_run
    from suites.services import create_suite

    profile = env.profile
    rng = random.Random(f"{seed}:{env.backend}:{scenario}")
    env.fake.reset()
    for index in range(profile.conversations):
        env.fake.script(key(index), script(index))
    suite = create_suite(owner=env.user, source=suite_yaml(f"faults-{scenario}", profile.conversations))
    env.wait_workers()
    expected_turns = sum(turns_of(index) for index in range(profile.conversations))
    pids_before = {p.pid for p in env.workers()}
    run = create_run(version=suite.latest_version, user=env.user, concurrency=profile.concurrency)
    watch = Watch(run.pk, env)
    watch.start()
    faults: list[Fault] = []
    skipped = 0
    for fraction in triggers(planned(scenario, profile), rng):
        # One fault at a time: the next once the run has recovered from the last, so each recovery is its
        # own. (A second worker killed before the first one's death was noticed, ~4 s after it, delayed the
        # first one's conversations to ~11 s: the worker started in its place watches a beat for 5 s itself.)
        watch.wait(lambda f=fraction: watch.turns >= f * expected_turns or not watch.active, 300)
        if faults:
            watch.wait(lambda: recovered(faults[-1]) or not watch.active, 300)
            close_old_connections()
        if not watch.active:
            skipped += 1
            continue
        faults.append(INJECT[scenario](env, run.pk, rng))
        close_old_connections()
    last = max((fault.cleared for fault in faults), default=time.time())
    ended = watch.wait(lambda: not watch.active, max(1.0, last + STUCK_AFTER - time.time()))
    watch.stop()
    if not ended:
        cancel(Run.objects.get(pk=run.pk))
    env.wait_workers()  # the supervisor has started again the workers the harness killed or stopped
    result = measure(run.pk, faults, finished_again=watch.finished_again, requests=env.fake.requests)
    processes = {**watch.processes, **{p.pid: p for p in env.workers()}}
    result.update(
        worker_deaths_unplanned=sum(
            p.poll() is not None and pid not in env.signalled for pid, p in processes.items()
        ),
        workers_alive=sum(p.poll() is None for p in env.workers()),
        workers_started=len(set(processes) - pids_before),
    )
    result.update(scenario=scenario, label=label(scenario, profile), skipped_faults=skipped)
    result["broken"] = broken(result, planned(scenario, profile))
    return result


def child(args) -> None:
    """Measure `args.scenarios` on one backend, in one environment; write the results as JSON."""
    var_dir = Path(os.environ["EVALSITE_VAR_DIR"])
    # The workers inherit this process's output: everything goes to a log the parent shows on failure.
    log = os.open(var_dir / "workers.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    scenarios = args.scenarios.split(",")
    env = Environment(
        args.backend, QUICK if args.quick else FULL, var_dir, own_postgres="pgrestart" in scenarios
    )
    results = []
    try:
        env.start()
        for scenario in scenarios:
            results.append({"backend": args.backend, **play(env, scenario, args.seed)})
            Path(args.result).write_text(json.dumps(results))
    finally:
        env.stop()
