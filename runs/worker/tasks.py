"""The Celery task that offers a conversation to this worker's pump, and the worker process's life around it:
the pump, the heartbeat's name, the sweeper thread, and the hand-back when it stops.

Importing this module registers the task as the way runs.worker.scheduling sends conversations.
"""

import contextlib
import gc
import logging
import threading
import time

from celery import bootsteps, shared_task
from celery.signals import task_postrun, task_prerun, worker_init, worker_ready, worker_shutting_down
from django.conf import settings
from django.db import close_old_connections, connections

from engine import suitevars
from engine.clients import warm_up
from engine.collector import collect_seldom
from engine.tools import mcp
from runs import endpoints, outage
from suites import parsed

from . import loop, pump, recovery, scheduling
from .claims import heartbeat
from .threads import started

log = logging.getLogger(__name__)


# The registered name is the task's address in every message queued: it stays the same wherever the task lives.
@shared_task(name="runs.tasks.run_conversation", acks_late=True, ignore_result=True)
def run_conversation(conversation_id: int) -> str:
    # Offers the conversation to this worker's pump, which claims and plays it: the task ends at once. No
    # autoretry: model errors are retried inside the engine's client, and a crash is recovered by the sweeper
    # from the database, so this task never needs the broker to run it twice.
    return pump.deliver(conversation_id)


def _publish(conversation_id: int) -> None:
    run_conversation.delay(conversation_id)


scheduling.publish_with(_publish)


@task_prerun.connect
@task_postrun.connect
def check_connections(**kwargs) -> None:
    """What Django does at the start and end of a request: drop connections past CONN_MAX_AGE or broken by
    an error. With the pool (CONN_MAX_AGE 0) that hands the thread's connection back at the end of every
    task, so an idle thread holds none. Celery's own closing is mostly off (CELERY_DB_REUSE_MAX)."""
    close_old_connections()


_stop = threading.Event()


@worker_init.connect
def start_the_pump(sender=None, **kwargs) -> None:
    # The worker holds as many conversations at once as its --concurrency, all played by one pump. Each may be
    # grading with a judge at the same moment: as many grading threads (loop.grading_threads). A worker takes no
    # more than that, so a run's conversations spread over every worker process rather than crowd one.
    concurrency = getattr(sender, "concurrency", None) or 1
    loop.grading_threads = max(loop.grading_threads, concurrency)
    heartbeat.slots = concurrency
    pump.current = pump.Pump(capacity=concurrency)


@worker_init.connect
def refuse_mcp_programs(**kwargs) -> None:
    # A run launched where code graders were allowed may reach a worker where they are not: it starts no
    # MCP server program either (its conversations end in error saying so), as its code checks run none.
    if not settings.EVALSITE_CODE_GRADERS:
        mcp.commands_refused = mcp.COMMANDS_OFF


@worker_init.connect
def lend_only_the_listed_secrets(**kwargs) -> None:
    # A suite's `{{secret:NAME}}` is filled from this worker's environment, which holds the server's own keys:
    # only the names an admin lends to suites are filled (a run launched before the list changed included).
    suitevars.lend_only(settings.EVALSITE_SUITE_SECRETS)


@worker_init.connect
def name_the_worker(sender=None, **kwargs) -> None:
    # The worker (WorkController) carries its --hostname: conversations then say which host played them.
    node = getattr(sender, "hostname", None)
    if node:
        heartbeat.named_for(node)


@worker_init.connect
def configure_worker_connections(**kwargs) -> None:
    # A worker commits every claim, turn, finish and dispatch on its own, and waiting for each flush is a
    # visible share of a conversation's time (sql.durable flushes what must not be forgotten). The setting
    # goes in the connection's startup options, so every session the worker opens (each one its pool adds,
    # too) has it from the start, at no extra round trip; the web's sessions keep the default.
    db = connections["default"]
    if db.vendor == "postgresql":
        options = db.settings_dict["OPTIONS"]
        relax = f"-c synchronous_commit={settings.EVALSITE_WORKER_SYNCHRONOUS_COMMIT}"
        if relax not in options.get("options", ""):
            options["options"] = f"{options.get('options', '')} {relax}".strip()
        db.close()
        db.close_pool()  # a pool opened before this point would keep handing out sessions without it
    # Each conversation reads the endpoints when it starts and again when its slot is handed on; a copy a
    # moment old is fresh enough for an admin edit, and saves two queries per conversation.
    endpoints.reuse_for = settings.EVALSITE_ENDPOINTS_REUSE_SECONDS


def _sweep_forever() -> None:
    """Watch the other workers' beats every beat, and sweep up lapsed leases every EVALSITE_SWEEP_SECONDS."""
    watch = recovery.WorkerWatch(heartbeat.name)
    next_sweep = time.monotonic() + settings.EVALSITE_SWEEP_SECONDS
    while not _stop.wait(settings.EVALSITE_WORKER_BEAT_SECONDS):
        try:
            stats = watch.take_over()
            if any(stats.values()):
                log.warning("took over from dead workers: %s", stats)
            if time.monotonic() >= next_sweep:
                next_sweep = time.monotonic() + settings.EVALSITE_SWEEP_SECONDS
                stats = recovery.sweep()
                if any(stats.values()):
                    log.info("sweep: %s", stats)
        except Exception as exc:
            if not outage.unavailable(exc):
                log.exception("sweep failed")
                continue
            # The database is away: the other workers can neither beat nor renew their leases meanwhile. Once
            # it is back, give them time to (a beat, and the renewal that follows an outage) before counting
            # any of them dead or any lease lapsed.
            outage.drop_connection()
            watch.forget()
            next_sweep = max(next_sweep, time.monotonic() + settings.EVALSITE_WORKER_DEAD_SECONDS)
        finally:
            close_old_connections()


class ResendOnConnect(bootsteps.StartStopStep):
    """Each time the worker's consumer (re)connects to the broker, conversations that were sent but never
    claimed are sent again: their messages may have been lost while the broker was down or restarting."""

    requires = ("celery.worker.consumer.tasks:Tasks",)

    def start(self, consumer) -> None:
        # In a thread: the consumer must not wait on the database (or on a broker that may be flapping).
        started(_resend_unclaimed, "evalsite-resend")


@contextlib.contextmanager
def _logged(failure: str):
    """A step of the worker's life that must not stop it: what fails is logged, and the thread's connection
    is checked either way."""
    try:
        yield
    except Exception:
        log.exception(failure)
    finally:
        close_old_connections()


def _resend_unclaimed() -> None:
    with _logged("resending unclaimed conversations failed"):
        heartbeat.start()
        resent = recovery.resend()
        if resent:
            log.warning("sent again %d conversation(s) sent but never claimed", resent)


def freeze_startup_objects() -> None:
    """Exempt everything loaded at startup (Django, Celery, openai, pydantic) from garbage collection. A full
    collection walks every tracked object while holding the GIL and stalls every conversation the worker is
    playing; frozen objects are never scanned, so later collections only walk what conversations allocate,
    and seldom (engine.collector)."""
    gc.collect()
    gc.freeze()
    collect_seldom()


@worker_ready.connect
def start_sweeper(**kwargs) -> None:
    warm_up()
    # The digest the stored parses are read under: computed here, not while a run's first conversations wait.
    parsed.schema_digest()
    # Every worker sweeps; the conditional updates make concurrent sweeps harmless.
    with _logged("startup sweep failed"):
        heartbeat.start()
        recovery.sweep()
    freeze_startup_objects()
    if pump.current is not None:
        pump.current.start()
    started(_sweep_forever, "evalsite-sweep")


@worker_shutting_down.connect
def stop_sweeper(**kwargs) -> None:
    _stop.set()
    # A graceful stop (SIGTERM) hands this worker's conversations to the others at once.
    with _logged("handing conversations back failed; their leases will lapse"):
        handed = heartbeat.hand_back()
        if handed:
            log.warning("handed %d conversation(s) back to the other workers", handed)
    if pump.current is not None:
        pump.current.stop()  # its conversations are the others' now: their ends write nothing
