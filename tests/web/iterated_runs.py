"""Runs of repeated evals and simulated users built from rows (no worker): Run, Conversation and Turn with
`record` = a TurnRecord, and the readers of the pages that show them. The suite says `iterations: 5`, so
runs.selectors.iterated_for and the page find the same repeated evals."""

from __future__ import annotations

import html
import re
from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from engine.outcomes import TerminationKind
from engine.results import CheckResult, TurnRecord, Usage
from runs.models import Conversation, Run, Status
from tests.factories import mock_run, store_turns

SUITE = """\
name: concierge
model: mock
judge: mock
iterations: 5
evals:
  - id: booking
    prompt: I need a table for two tonight.
    pass_rate_threshold: 0.7
    simulate:
      persona: A hurried diner who wants a table at 8pm.
      max_turns: 10
      stop_when:
        field_equals: {path: booking.status, value: confirmed}
    checks:
      - llm_judge:
          criteria:
            - {name: polite, criteria: The agent is polite., weight: 1}
            - {name: accurate, criteria: The booking matches the request., weight: 3}
  - id: greeting
    prompt: Hello!
    checks:
      - match: "*hello*"
  - id: refund
    prompt: Refund my order.
    checks:
      - contains: refunded
"""


CONDITION = 'condition met: field_equals booking.status = "confirmed"'


# booking, iteration by iteration: (status, score, turns, termination)
BOOKING = [
    ("passed", 1.0, 3, CONDITION),
    ("failed", 0.0, 10, "max turns (10)"),
    ("passed", 1.0, 4, CONDITION),
    ("passed", 1.0, 2, CONDITION),
    ("error", None, 1, "error"),
]


def criteria_check(polite: float, accurate: float) -> CheckResult:
    weighted = (polite + 3 * accurate) / 4
    return CheckResult(
        type="llm_judge",
        label="llm_judge (2 weighted criteria)",
        passed=weighted >= 0.5,
        score=weighted,
        reason=f"weighted score {weighted:.2f} (threshold 0.50 of 1) over 2 criteria",
        children=[
            CheckResult(type="criterion", label="polite (weight 1)", passed=polite >= 0.5, score=polite,
                        reason=f"score {polite:.2f}: <b>curt</b> but fine", raw='{"score": 0.4, "reason": "<b>"}'),
            CheckResult(type="criterion", label="accurate (weight 3)", passed=accurate >= 0.5, score=accurate,
                        reason=f"score {accurate:.2f}: table for two at 8pm"),
        ],
    )  # fmt: skip


def booking_turns(turns: int, termination: str) -> list[TurnRecord]:
    """Turn 1 is the eval's prompt; every later user message is the simulated user's (it spent tokens)."""
    records = []
    for n in range(1, turns + 1):
        simulated = n > 1
        last = n == turns
        records.append(
            TurnRecord(
                turn=n,
                node="evals[0].simulate" if simulated else "evals[0]",
                prompt=f"<i>at 8pm</i>, turn {n}" if simulated else "I need a table for two tonight.",
                response='{"booking": {"status": "confirmed"}}' if last else f"<script>alert({n})</script>",
                usage=Usage(prompt_tokens=100, completion_tokens=20),
                cost=0.001,
                user_usage=Usage(prompt_tokens=30, completion_tokens=12) if simulated else Usage(),
                user_cost=0.0005 if simulated else 0.0,
                judge_usage=Usage(prompt_tokens=200, completion_tokens=40) if last else Usage(),
                judge_cost=0.002 if last else 0.0,
                checks=[criteria_check(0.4, 0.8)] if last else [],
                passed=True if last else None,
                termination=termination if last else None,
            )
        )
    return records


def add(run: Run, index: int, iteration: int, eval_id: str, status: str, score, records, **fields):
    conversation = Conversation.objects.create(
        run=run, index=index, iteration=iteration, eval_id=eval_id, status=status, score=score,
        prompt=records[0].prompt if records else "", kind="multi-turn" if len(records) > 1 else "single-turn",
        verdict=fields.pop("verdict", status),
        finished_at=None if status in ("queued", "running") else timezone.now(),
        **fields,
    )  # fmt: skip
    return store_turns(conversation, records)


def one_turn(prompt: str, reply: str, passed: bool) -> list[TurnRecord]:
    return [TurnRecord(turn=1, prompt=prompt, response=reply, usage=Usage(prompt_tokens=8, completion_tokens=4),
                       passed=passed)]  # fmt: skip


def make_run(version, user, *, status: str = Status.FAILED, booking=BOOKING) -> Run:
    # Failed by default, as finalize would have it: `refund` passes 0 of 5 against a 50% threshold.
    run = mock_run(version, user, status=status, elapsed=timedelta(seconds=9))
    for iteration, (state, score, turns, termination) in enumerate(booking):
        if state in ("queued", "running"):
            add(run, 0, iteration, "booking", state, None, [], style="simulated")
        elif state == "error":  # the agent replied once; the simulated user's endpoint failed
            first = TurnRecord(
                turn=1,
                node="evals[0]",
                prompt="I need a table for two tonight.",
                response="For when?",
                usage=Usage(prompt_tokens=100, completion_tokens=20),
                cost=0.001,
            )
            add(run, 0, iteration, "booking", state, None, [first], style="simulated", termination="error",
                termination_kind="error", error="endpoint said 500", verdict="error on turn 2: endpoint said 500",
                reason="error on turn 2: endpoint said 500")  # fmt: skip
        else:  # stored as the engine gives it: the verdict in words, and the reason without the ending
            add(run, 0, iteration, "booking", state, score, booking_turns(turns, termination), style="simulated",
                termination=termination, termination_kind=TerminationKind.read(termination),
                verdict=f"{state} after {turns} turns: {termination}", reason=f"{state} after {turns} turns")  # fmt: skip
    for iteration in range(5):
        add(run, 1, iteration, "greeting", "passed", 1.0, one_turn("Hello!", "Hello there.", True))
        add(run, 2, iteration, "refund", "failed", 0.0, one_turn("Refund my order.", "No.", False))
    return run


def run_url(name: str, run: Run, *args) -> str:
    return reverse(f"runs:{name}", args=[run.pk, *args])


def text(fragment: str) -> str:
    """What a reader sees: tags removed, entities decoded, whitespace collapsed."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))).strip()


def element(page: str, element_id: str, tag: str = "section") -> str:
    return page.split(f'id="{element_id}"', 1)[1].split(f"</{tag}>", 1)[0]


def turn(page: str, number: int) -> str:
    """One turn of a transcript, nested check lists included."""
    return (
        page.split(f'<li class="turn" id="turn-{number}">', 1)[1]
        .split('<li class="turn"', 1)[0]
        .split("</ol>\n\n<details", 1)[0]
    )


def iteration_rows(page: str) -> dict[str, str]:
    """The Iterations section's rows as HTML, by eval id."""
    body = element(page, "iterations").split("<tbody>")[1]
    rows = [row for row in body.split("</tr>") if "<td" in row]
    return {text(row).split()[0]: row for row in rows}


def table_rows(page: str) -> list[str]:
    body = element(page, "conversations").split("<tbody>")[1]
    return [text(row) for row in body.split("</tr>") if "<td" in row]
