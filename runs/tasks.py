"""Celery tasks: thin shells that take primary keys and call the services."""

import logging
import threading

from celery import shared_task
from celery.signals import worker_ready, worker_shutting_down
from django.conf import settings
from django.db import close_old_connections

from engine.clients import warm_up

from . import execution

log = logging.getLogger(__name__)


@shared_task(acks_late=True, ignore_result=True)
def run_conversation(conversation_id: int) -> str:
    # No autoretry: model errors are retried inside the engine's client, and a crash is recovered by the
    # sweeper from the database, so this task never needs the broker to run it twice.
    return execution.execute(conversation_id)


_stop = threading.Event()


def _sweep_forever() -> None:
    while not _stop.wait(settings.EVALSITE_SWEEP_SECONDS):
        try:
            stats = execution.sweep()
            if any(stats.values()):
                log.info("sweep: %s", stats)
        except Exception:
            log.exception("sweep failed")
        finally:
            close_old_connections()


@worker_ready.connect
def start_sweeper(**kwargs) -> None:
    warm_up()
    # Every worker sweeps; the conditional updates make concurrent sweeps harmless.
    try:
        execution.sweep()
    except Exception:
        log.exception("startup sweep failed")
    finally:
        close_old_connections()
    threading.Thread(target=_sweep_forever, name="evalsite-sweeper", daemon=True).start()


@worker_shutting_down.connect
def stop_sweeper(**kwargs) -> None:
    _stop.set()
