"""How the run pages show what the engine recorded. Nothing here works out again what is stored: a turn's pass,
a conversation's verdict, its system message and history are read as stored. Plain functions over rows and
records, and over what runs.selectors works out from them; the views choose what to query and the templates
lay it out."""

from .iterations import (
    ITERATION_MARKS_MAX,
    IteratedRow,
    IterationMark,
    iterated_rows,
    iteration_groups,
    iteration_mark,
    iteration_switcher,
    repeated_status,
)
from .marks import STATUS_SYMBOLS, Mark, strip, symbol, turn_marks
from .rows import STRIP_MAX_MARKS, Column, columns_signature, grader_cells, row_key, table_columns
from .state import GATE_OPS, calling, gates, in_flight, progress_summary, run_state, status_words, waiting
from .tools import CallView, TurnTools, check_anchor, pretty_json, tools_by_turn, turn_tools
from .transcript import (
    FILE_BLOCK,
    ROLE_CLASSES,
    STYLE_LABELS,
    ending,
    given_history,
    message_segments,
    review_rows,
    spend,
    system_message,
    transcript_text,
)

__all__ = [
    "CallView",
    "TurnTools",
    "check_anchor",
    "pretty_json",
    "tools_by_turn",
    "turn_tools",
    "FILE_BLOCK",
    "GATE_OPS",
    "ITERATION_MARKS_MAX",
    "ROLE_CLASSES",
    "STATUS_SYMBOLS",
    "STRIP_MAX_MARKS",
    "STYLE_LABELS",
    "Column",
    "IteratedRow",
    "IterationMark",
    "Mark",
    "calling",
    "columns_signature",
    "ending",
    "gates",
    "given_history",
    "grader_cells",
    "in_flight",
    "iterated_rows",
    "iteration_groups",
    "iteration_mark",
    "iteration_switcher",
    "message_segments",
    "progress_summary",
    "repeated_status",
    "review_rows",
    "row_key",
    "run_state",
    "status_words",
    "spend",
    "strip",
    "symbol",
    "system_message",
    "table_columns",
    "transcript_text",
    "turn_marks",
    "waiting",
]
