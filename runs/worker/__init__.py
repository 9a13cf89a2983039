"""The worker runtime: how a run's conversations are sent, claimed, played and stored by Celery workers.

- scheduling: which conversations are sent and when (dispatch), the queued ones a stopped run never sends
  (cancel_queued), and when a run is over (finalize);
- recovery: what dead or stopped workers left behind, requeued and sent again by every worker's sweeper;
- tasks: the Celery task that offers a conversation to its worker, and the worker process's life around it;
- pump: every conversation a worker process plays, their database work done by one thread in batches;
- messages: what the pump's thread is handed (offers, turns to store, calls, ends);
- playing: one conversation as the pump plays it; loop: the process's event loop its model calls await on;
- claims: the claim (the fencing token), the heartbeat that keeps the leases, the hand-back on stop;
- writes: the turns, notes and ends a worker writes, each conditional on its claim;
- sql: the hot path's statements, written out;
- threads: the process's threads, named for the operating system too.

The rest of the site (runs.services) uses only the names below. Importing the package imports the tasks,
which register how dispatch sends conversations to the workers.
"""

from . import tasks
from .scheduling import cancel_queued, dispatch, dispatch_endpoint, final_status
from .sql import insert_conversations

__all__ = ("cancel_queued", "dispatch", "dispatch_endpoint", "final_status", "insert_conversations", "tasks")
