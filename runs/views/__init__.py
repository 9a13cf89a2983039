"""Run pages, one module per page: the runs list, a run, a conversation, a calibration's figures, labels.

`runs.access.Access` says who is looking (the owner, or a share-link visitor) and builds the links, so the
owner's pages and the share-link pages are the same views and templates.
"""

from .calibration import calibration, shared_calibration
from .compare import compare_eval, compare_runs, pin, regrade
from .conversation import conversation, conversation_poll, shared_conversation, shared_conversation_poll
from .delete import delete_run
from .exports import results_export, shared_export
from .labels import add_to_set, label
from .overrides import override, remove_override
from .review import assign, review, unassign
from .run import (
    cancel,
    detail,
    progress,
    results_json,
    retry_errored,
    revoke,
    share,
    shared_json,
    shared_progress,
    shared_run,
)
from .runs_list import run_list

__all__ = [
    "add_to_set",
    "assign",
    "calibration",
    "cancel",
    "delete_run",
    "compare_eval",
    "compare_runs",
    "conversation",
    "conversation_poll",
    "detail",
    "label",
    "override",
    "pin",
    "regrade",
    "remove_override",
    "progress",
    "results_export",
    "results_json",
    "retry_errored",
    "review",
    "revoke",
    "run_list",
    "share",
    "shared_calibration",
    "shared_conversation",
    "shared_conversation_poll",
    "shared_export",
    "shared_json",
    "shared_progress",
    "shared_run",
    "unassign",
]
