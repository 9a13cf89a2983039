"""The fault harness's workload and its judge: conversation trees whose every turn is known in advance,
and what the database and the fake endpoint's request log say happened to them (bench/faults.py)."""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import asdict, dataclass, field

EVIL = "a" * 2000 + "!"  # `(a+)+$` runs for seconds on it, so the 1 s regex time limit ends the match


# --- the workload -----------------------------------------------------------------------------------------


def turns_of(index: int) -> int:
    """Conversation `index` passes on this turn: trees of 1 to 5 turns, in turn."""
    return 1 + index % 5


def key(index: int) -> str:
    return f"conversation {index}"


def prompt_at(index: int, position: int) -> str:
    return key(index) if position == 1 else f"try again {position}"


def script(index: int, poisoned_from: int | None = None) -> list[str]:
    """The fake model's replies, by turn: "not yet" until the last, "done"; a poisoned conversation answers
    the catastrophic reply instead of "not yet" from turn `poisoned_from` on. Either fails its level, so the
    conversation's turns are the same."""
    turns = turns_of(index)
    return [
        EVIL if poisoned_from is not None and poisoned_from <= position < turns else "not yet"
        for position in range(1, turns)
    ] + ["done"]


def suite_yaml(name: str, conversations: int) -> str:
    lines = [f"name: {name}", "model: fake/faults-model", "evals:"]
    for index in range(conversations):
        lines += [f"  - prompt: {key(index)}", "    checks:"]
        pad = "      "
        for position in range(1, turns_of(index) + 1):
            # A level passes when the reply says done, or ends in a's (the pattern a ReDoS reply attacks).
            lines += [f"{pad}- or:", f"{pad}    - match: '*done*'", f"{pad}    - regex: '(a+)+$'"]
            if position < turns_of(index):
                lines += [f"{pad}  prompt: {prompt_at(index, position + 1)}", f"{pad}  checks:"]
                pad += "    "
    return "\n".join(lines) + "\n"


@dataclass
class Fault:
    kind: str
    at: float  # time.time() when it began
    cleared: float  # when it was over (the same moment for a signal)
    affected: dict[int, tuple[str, int]]  # conversations in flight when it began: where, turns (in_flight)
    detail: dict = field(default_factory=dict)
    # A fault that lasts: the conversations in flight when it was over (waiting out a backoff, sent while the
    # broker was down).
    affected_at_end: dict[int, tuple[str, int]] = field(default_factory=dict)
    # From `cleared` until every affected conversation stored its next turn or finished.
    recovery: float | None = None
    recovery_by_state: dict[str, float] = field(default_factory=dict)  # the same, per where they were
    first_progress: float | None = None  # from `cleared` until the first turn anywhere


def recovered(fault: Fault) -> bool:
    """Every conversation the fault found in flight has stored its next turn or finished since."""
    from runs.models import FINISHED, Conversation

    pending = [fault.affected, fault.affected_at_end]
    now = dict(
        (pk, (turns, status))
        for pk, turns, status in Conversation.objects.filter(
            pk__in=[pk for found in pending for pk in found]
        ).values_list("pk", "turn_count", "status")
    )
    return all(
        now[pk][0] > turns or now[pk][1] in FINISHED for found in pending for pk, (_, turns) in found.items()
    )


def measure(run_id, faults: list[Fault], *, finished_again: set[int], requests: list[dict]) -> dict:
    """What the database and the fake endpoint's request log say about the run (see bench/faults.py)."""
    from runs.models import Conversation, Run, Status, Turn

    run = Run.objects.get(pk=run_id)
    conversations = list(Conversation.objects.filter(run=run))
    by_pk = {c.pk: c for c in conversations}
    turns = list(
        Turn.objects.filter(conversation__run=run).values_list(
            "conversation_id", "position", "record", "created_at"
        )
    )
    poisoned = {index for fault in faults for index in fault.detail.get("poisoned", [])}
    stored: dict[int, Counter] = {c.pk: Counter() for c in conversations}
    misplaced = regex_timeouts = 0
    for conversation_id, position, record, _ in turns:
        index = by_pk[conversation_id].index
        stored[conversation_id][position] += 1
        replies = {"done"} if position == turns_of(index) else {"not yet", EVIL}
        if index not in poisoned:
            replies.discard(EVIL)
        if record["prompt"] != prompt_at(index, position) or record["response"] not in replies:
            misplaced += 1
        regex_timeouts += "regex took too long" in json.dumps(record["checks"])
    duplicated = lost = 0
    for c in conversations:
        positions = stored[c.pk]
        duplicated += sum(n - 1 for n in positions.values()) + sum(
            n for position, n in positions.items() if position > turns_of(c.index)
        )
        # A finished conversation misses none of its turns; any other has no gap before its last stored one.
        last = turns_of(c.index) if c.status in (Status.PASSED, Status.FAILED) else max(positions, default=0)
        lost += sum(1 for position in range(1, last + 1) if position not in positions)
    stuck = sum(c.status in (Status.QUEUED, Status.RUNNING, Status.CANCELLED) for c in conversations)
    errored = [c.error for c in conversations if c.status == Status.ERROR]
    finished_once = sum(
        c.status == Status.PASSED
        and c.verdict == f"passed on turn {turns_of(c.index)}"
        and c.pk not in finished_again
        for c in conversations
    )

    # Progress: every turn stored and every conversation finished, from the launch to the run's end.
    progress = sorted(
        [created.timestamp() for *_, created in turns]
        + [c.finished_at.timestamp() for c in conversations if c.finished_at]
    )
    marks = [run.created_at.timestamp(), *progress]
    stall = max((b - a for a, b in zip(marks, marks[1:], strict=False)), default=0.0)
    # A conversation in flight resumed when it stored the turn after those it had then, or finished.
    # (Compared by turns, not times: a turn's time is taken before its commit, which a snapshot may miss.)
    turn_at = {
        (conversation_id, position): created.timestamp() for conversation_id, position, _, created in turns
    }

    def resumed(pk: int, turns_then: int) -> float | None:
        finished = by_pk[pk].finished_at
        moments = [turn_at.get((pk, turns_then + 1)), finished.timestamp() if finished else None]
        return min((t for t in moments if t is not None), default=None)

    for fault in faults:
        resumed_at = [(state, resumed(pk, count)) for pk, (state, count) in fault.affected.items()]
        resumed_at += [
            (f"{state} at end", resumed(pk, count)) for pk, (state, count) in fault.affected_at_end.items()
        ]
        if resumed_at and all(t is not None for _, t in resumed_at):
            fault.recovery = round(max(0.0, max(t for _, t in resumed_at) - fault.cleared), 2)
            for state, t in resumed_at:
                delay = round(max(0.0, t - fault.cleared), 2)
                fault.recovery_by_state[state] = max(delay, fault.recovery_by_state.get(state, 0.0))
        after = [t for t in progress if t > fault.cleared]
        fault.first_progress = round(after[0] - fault.cleared, 2) if after else None

    # Model calls: each stored turn is one answered call; a turn answered more than once was asked again.
    answered: Counter = Counter()
    statuses: Counter = Counter()
    for entry in requests:
        body = entry["body"]
        if entry["path"] != "/v1/chat/completions" or not isinstance(body, dict):
            continue
        statuses[str(entry["status"])] += 1
        if entry.get("fault"):  # a 200 that was no reply (bench/faults_play.py's malformed answers)
            statuses["200 no reply"] += 1
        elif entry["status"] == 200:
            messages = body["messages"]
            answered[(messages[0]["content"], sum(m["role"] == "assistant" for m in messages))] += 1
    start = run.created_at.timestamp()
    return {
        "conversations": len(conversations),
        "expected_turns": sum(turns_of(c.index) for c in conversations),
        "stored_turns": len(turns),
        "finished_once": finished_once,
        "finished_again": len(finished_again),
        "duplicated": duplicated,
        "lost": lost,
        "misplaced": misplaced,
        "stuck": stuck,
        "errored": len(errored),
        "errors": errored[:5],
        "longest_stall": round(stall, 2),
        "wall": round((run.finished_at.timestamp() if run.finished_at else time.time()) - start, 2),
        "faults": [
            {
                **asdict(fault),
                "at": round(fault.at - start, 2),
                "cleared": round(fault.cleared - start, 2),
                "affected": dict(Counter(state for state, _ in fault.affected.values())),
                "affected_at_end": dict(Counter(state for state, _ in fault.affected_at_end.values())),
            }
            for fault in faults
        ],
        "progress": [round(t - start, 2) for t in progress],
        "calls": dict(statuses),
        "calls_repeated": sum(n - 1 for n in answered.values()),
        "regex_timeouts": regex_timeouts,
    }


def broken(result: dict, planned_faults: int) -> list[str]:
    """The invariants this scenario broke, in words."""
    problems = [
        f"{result[name]} {words}"
        for name, words in (
            ("duplicated", "duplicated turns"),
            ("lost", "lost turns"),
            ("misplaced", "turns with the wrong prompt or reply"),
            ("stuck", "stuck conversations"),
            ("errored", "errored conversations"),
            ("finished_again", "conversations finished more than once"),
            ("worker_deaths_unplanned", "worker processes died unkilled"),
        )
        if result[name]
    ]
    if result["finished_once"] != result["conversations"]:
        problems.append(f"{result['finished_once']} of {result['conversations']} finished exactly once")
    if len(result["faults"]) < planned_faults:
        problems.append(f"{len(result['faults'])} of {planned_faults} faults injected before the run ended")
    return problems
