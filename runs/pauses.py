"""Endpoint pauses every worker process sees: the engine's PauseBoard, backed by the database.

A call that gets a 429 pauses its endpoint here and in its own process at once. Other processes read the
endpoint's row at most once a second, so a rate limit holds back every worker within about a second of the
first 429, for the price of one small query per second per endpoint per process while calls are made.
A database that cannot be read or written only loses the sharing: the process's own pauses still hold.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import UTC, datetime

from django.db import DatabaseError, IntegrityError, transaction

from engine.retries import LOCAL_PAUSES, LocalPauseBoard

from .models import EndpointPause

log = logging.getLogger(__name__)

REFRESH_SECONDS = 1.0


class DatabasePauseBoard:
    def __init__(self, local: LocalPauseBoard = LOCAL_PAUSES, refresh: float = REFRESH_SECONDS) -> None:
        self.local = local
        self.refresh = refresh
        self._read: dict[str, tuple[float, float]] = {}  # endpoint -> (read at, monotonic; paused until)
        self._lock = threading.Lock()

    def paused_until(self, endpoint: str) -> float:
        local = self.local.paused_until(endpoint)
        read = self._read.get(endpoint)
        if read is None or time.monotonic() - read[0] >= self.refresh:
            read = (time.monotonic(), self._fetch(endpoint))
            with self._lock:
                self._read[endpoint] = read
        return max(local, read[1])

    def pause(self, endpoint: str, until: float) -> None:
        self.local.pause(endpoint, until)
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

    def _fetch(self, endpoint: str) -> float:
        try:
            until = (
                EndpointPause.objects.filter(endpoint=endpoint).values_list("paused_until", flat=True).first()
            )
        except DatabaseError:
            return 0.0
        return until.timestamp() if until is not None else 0.0


DATABASE_PAUSES = DatabasePauseBoard()
