"""A row of the run's conversation table: its grader cells, and the digest its rendered HTML is cached under."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from engine.clients.settings import briefly
from engine.outcomes import NOT_STARTED
from engine.text import against

from ..models import Conversation, Status

# A row's ✓✗ strip shows this many marks, then an ellipsis.
STRIP_MAX_MARKS = 24


@dataclass(frozen=True)
class Column:
    """A column of the run's conversation table: its header and its rows' cells both iterate the one list
    `table_columns` gives, so a row cannot have a cell the header lacks. `graders` stands for one column per
    named grader."""

    key: str
    label: str = ""
    title: str = ""
    num: bool = False


def table_columns(*, iterations: bool, judge: bool, user: bool) -> list[Column]:
    """The conversation table's columns, in order: the optional ones only where the run has something to show."""
    optional = {
        "iteration": iterations,
        "judge": judge,
        "user": user,
    }
    every = [
        Column("index", "#", num=True),
        Column("iteration", "Iter.", "Which repetition of the eval", num=True),
        Column("eval", "Eval"),
        Column("prompt", "First prompt"),
        Column("status", "Status"),
        Column("verdict", "Verdict"),
        Column("graders"),
        Column("turn_count", "Turns", num=True),
        Column("tokens", "Tokens", "The model under test: prompt + completion tokens", num=True),
        Column("judge", "Judge", "Tokens spent by judges (llm_judge, semantic, conditions)", num=True),
        Column("user", "Sim. user", "Tokens spent by the simulated user writing user turns", num=True),
        Column("cost", "Cost", "Agent, judge and simulated user together", num=True),
    ]
    return [column for column in every if optional.get(column.key, True)]


def columns_signature(columns: list[Column], grader_names: list[str]) -> str:
    """A short digest of the table's columns: the page's poll sends it back, and a table whose columns have
    changed since is sent whole, header and rows together."""
    state = "|".join([*(column.key for column in columns), *grader_names])
    return hashlib.blake2s(state.encode(), digest_size=6).hexdigest()


def row_key(conversation: Conversation, columns: tuple) -> str:
    """Everything a row of the run's table is drawn from, as the digest its HTML is cached under (the `rows`
    cache): every loaded field and every value the view attached, not the fields the template reads, so a new
    column cannot be served stale. `columns`: which columns the table has."""
    # In the order the fields were loaded and the values attached, the same on every request; sorting them
    # would cost as much as the digest.
    state = [(name, value) for name, value in vars(conversation).items() if not name.startswith("_")]
    return hashlib.blake2b(repr((state, columns)).encode(), digest_size=16).hexdigest()


def row_verdict(conversation: Conversation, stop_reason: str, refused: bool) -> str:
    """A row's verdict where its run's header says why the run stopped (`stop_reason`): a conversation it never
    started reads "not started", and when a refused setting stopped it (`refused`: the notice under the header
    gives the endpoint's words), the refusal is named without them. The transcript keeps the whole verdict."""
    verdict = conversation.verdict
    if not stop_reason:
        return verdict
    if conversation.status == Status.CANCELLED and verdict.startswith(NOT_STARTED):
        return NOT_STARTED
    return briefly(verdict) if refused else verdict


def grader_cells(conversation, names: list[str]) -> list[dict | None]:
    """One cell per grader column: its score and whether it passed; None when it did not grade this eval."""
    found = {item["name"]: item for item in conversation.graders or ()}
    cells = []
    for name in names:
        item = found.get(name)
        if item is None or item.get("score") is None:
            cells.append(None)
        else:
            cells.append({"score": f"{item['score']:.2f}", "passed": item.get("passed"),
                          "title": against(item["score"], item.get("threshold", 1), name)})  # fmt: skip
    return cells
