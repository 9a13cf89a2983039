"""Endpoint pauses every worker process sees: the engine's PauseBoard, backed by the database.

A call that gets a 429 pauses its endpoint here and in its own process at once. Other processes read the
endpoint's row at most every REFRESH_SECONDS, so a rate limit soon holds back every worker, for the price of
one small query per endpoint per process in that time while calls are made. A database that cannot be read or
written only loses the sharing: the process's own pauses still hold.

The row also says when the endpoint last answered after failing, so that calls backing off from an outage in
every process retry soon after its return; each process writes that at most every REFRESH_SECONDS.

The endpoint registry (runs.endpoints) hands this board to every client it builds, in pages, the CLI and the
workers alike, so it lives beside the registry rather than in the worker runtime.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

from django.db import DatabaseError, IntegrityError, close_old_connections, transaction

from engine.retries import LOCAL_PAUSES, LocalPauseBoard

from .models import EndpointPause

log = logging.getLogger(__name__)

REFRESH_SECONDS = 1.0


class DatabasePauseBoard:
    def __init__(self, local: LocalPauseBoard = LOCAL_PAUSES, refresh: float = REFRESH_SECONDS) -> None:
        self.local = local
        self.refresh = refresh
        # endpoint -> (read at, monotonic; paused until; recovered at)
        self._read: dict[str, tuple[float, float, float]] = {}
        self._told: dict[str, float] = {}  # endpoint -> when this process last wrote a recovery (monotonic)
        self._lock = threading.Lock()
        self._refreshing: set[str] = set()
        self._aside: ThreadPoolExecutor | None = None

    def _row(self, endpoint: str) -> tuple[float, float, float]:
        read = self._read.get(endpoint)
        if read is None or time.monotonic() - read[0] >= self.refresh:
            if _on_event_loop():
                self._aside_once(endpoint)
                return read if read is not None else (0.0, 0.0, 0.0)
            read = (time.monotonic(), *self._fetch(endpoint))
            with self._lock:
                self._read[endpoint] = read
        return read

    # A worker's model calls run on an event loop (runs.worker.loop), where Django refuses queries and a query
    # would hold every conversation of the process: there the board is read and written by a thread of its
    # own, and the loop goes on with what was last read.

    def _in_thread(self, fn, *args) -> None:
        with self._lock:
            if self._aside is None:
                self._aside = ThreadPoolExecutor(max_workers=1, thread_name_prefix="evalsite-pauses")
        self._aside.submit(self._closing, fn, *args)

    @staticmethod
    def _closing(fn, *args) -> None:
        try:
            fn(*args)
        finally:
            close_old_connections()

    def _aside_once(self, endpoint: str) -> None:
        with self._lock:
            if endpoint in self._refreshing:
                return
            self._refreshing.add(endpoint)
        self._in_thread(self._refresh, endpoint)

    def _refresh(self, endpoint: str) -> None:
        try:
            read = (time.monotonic(), *self._fetch(endpoint))
            with self._lock:
                self._read[endpoint] = read
        finally:
            with self._lock:
                self._refreshing.discard(endpoint)

    def paused_until(self, endpoint: str) -> float:
        return max(self.local.paused_until(endpoint), self._row(endpoint)[1])

    def recovered_at(self, endpoint: str) -> float:
        return max(self.local.recovered_at(endpoint), self._row(endpoint)[2])

    def recovered(self, endpoint: str, at: float) -> None:
        self.local.recovered(endpoint, at)
        told = self._told.get(endpoint)
        if told is not None and time.monotonic() - told < self.refresh:
            return  # the others read the row every `refresh`: one write in that time is news enough
        self._told[endpoint] = time.monotonic()
        if _on_event_loop():
            self._in_thread(self._share_recovery, endpoint, at)
        else:
            self._share_recovery(endpoint, at)

    def _share_recovery(self, endpoint: str, at: float) -> None:
        when = datetime.fromtimestamp(at, tz=UTC)
        try:
            if not EndpointPause.objects.filter(endpoint=endpoint).update(recovered_at=when):
                EndpointPause.objects.create(
                    endpoint=endpoint, paused_until=datetime.fromtimestamp(0, tz=UTC), recovered_at=when
                )
        except IntegrityError:
            EndpointPause.objects.filter(endpoint=endpoint).update(recovered_at=when)
        except DatabaseError:
            log.warning("could not share the recovery of endpoint %s; it holds in this process", endpoint)

    def pause(self, endpoint: str, until: float) -> None:
        self.local.pause(endpoint, until)
        if _on_event_loop():
            self._in_thread(self._share_pause, endpoint, until)
        else:
            self._share_pause(endpoint, until)

    def _share_pause(self, endpoint: str, until: float) -> None:
        when = datetime.fromtimestamp(until, tz=UTC)
        try:
            with transaction.atomic():
                if (
                    not EndpointPause.objects.filter(endpoint=endpoint, paused_until__lt=when).update(
                        paused_until=when
                    )
                    and not EndpointPause.objects.filter(endpoint=endpoint).exists()
                ):
                    EndpointPause.objects.create(endpoint=endpoint, paused_until=when)
        except IntegrityError:
            # Another process created the row first; extend it if ours ends later.
            self._extend(endpoint, when)
        except DatabaseError:
            log.warning("could not share the pause of endpoint %s; it holds in this process", endpoint)

    def _extend(self, endpoint: str, when: datetime) -> None:
        try:
            EndpointPause.objects.filter(endpoint=endpoint, paused_until__lt=when).update(paused_until=when)
        except DatabaseError:
            log.warning("could not share the pause of endpoint %s; it holds in this process", endpoint)

    def _fetch(self, endpoint: str) -> tuple[float, float]:
        """(paused until, recovered at) from the endpoint's row, in epoch seconds; 0 for none."""
        try:
            row = (
                EndpointPause.objects.filter(endpoint=endpoint)
                .values_list("paused_until", "recovered_at")
                .first()
            )
        except DatabaseError:
            return 0.0, 0.0
        if row is None:
            return 0.0, 0.0
        until, recovered = row
        return until.timestamp(), (recovered.timestamp() if recovered is not None else 0.0)


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


DATABASE_PAUSES = DatabasePauseBoard()
