"""The embedded, no-server broker: kombu's filesystem transport, made safe for several processes.

kombu writes a message straight into the queue folder under its final name, so a consumer in another
process can pick the file up while it is still empty or half written, fail to decode it, and lose the
message. Here a message is written under a temporary name and renamed into place, which is atomic on one
filesystem: a consumer sees the whole message or nothing.

kombu finds new messages by listing the folder every `polling_interval` (see settings). A worker
publishes most messages itself: when a conversation ends, the next one of its run is sent. Such a message
wakes the same process's consumer at once instead of at its next poll.
"""

import logging
import os
import threading
import uuid
from queue import Empty
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

logger = logging.getLogger(__name__)

# Set by every message this process publishes.
_published = threading.Event()


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        # A consumer lists the folder for names holding ".<queue>.msg" (kombu before 5.7 as a substring, later
        # after the first dot), so the temporary name holds neither the queue nor ".msg".
        temporary = os.path.join(self.data_folder_out, f".{uuid.uuid4()}.tmp")
        try:
            with open(temporary, "wb") as handle:
                handle.write(str_to_bytes(dumps(payload)))
            os.replace(temporary, final)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc
        _published.set()

    def _get(self, queue):
        """kombu's, but a file that is not a message (left by a crash or a hand) is logged and skipped: kombu
        raises its decode error out of the worker's loop, and the worker exits. kombu has already taken the
        file out of the queue folder; a conversation whose message it was is sent again by runs.worker.recovery.resend."""
        while True:
            try:
                return super()._get(queue)
            except ValueError as exc:
                logger.error("skipped a file in the %s queue that is not a message: %s", queue, exc)


class Transport(filesystem.Transport):
    Channel = Channel

    def drain_events(self, connection, timeout=None):
        """One poll of kombu's loop (virtual.Transport.drain_events), waking on this process's own publishes.

        Unlike kombu's, it returns to Celery's loop after each poll that found nothing (as a timeout) rather
        than polling until `timeout`: Celery acknowledges a finished task of its thread pool only between two
        drains (perform_pending_operations), and until then the task counts against the prefetch limit, so
        with every thread busy no message could be taken for a whole `timeout` after threads freed up."""
        polling_interval = self.polling_interval
        if timeout and polling_interval and polling_interval > timeout:
            polling_interval = timeout
        for _ in range(2):  # a poll, and another at once if a publish of this process woke the wait
            _published.clear()  # a message published from here on is either listed below or wakes the wait
            try:
                self.cycle.get(self._deliver, timeout=timeout)
                return
            except Empty:
                if not _published.wait(polling_interval):
                    break
        raise TimeoutError()  # socket.timeout, which Celery catches
