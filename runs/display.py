"""How the run pages show what the engine recorded: ✓✗ strips of scripted conversations, suite gates, given
histories with their embedded files, the system message, and a conversation as `[Role]:` text.

Plain functions over rows and records; the views choose what to query and the templates lay it out.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import ValidationError

from engine.history import INSTRUCTIONS_SUFFIX, build_history
from engine.loader import SuiteError, parse_yaml
from engine.results import TurnRecord, evaluate_gates
from engine.schema import Gate
from engine.schema import Suite as SuiteSpec
from engine.transcript import format_transcript, message_text
from suites.models import SuiteVersion

from .models import Conversation, Run, Turn

GRADED_STYLES = ("scripted", "turns")
# The conversation table shows each graded conversation's ✓✗ strip up to this many conversations (one query
# for all their turns); bigger runs show the passed/total count alone.
STRIP_MAX_CONVERSATIONS = 200
STRIP_MAX_MARKS = 24


@dataclass(frozen=True)
class Mark:
    """One graded unit of a scripted conversation, as ✓ or ✗ in its strip."""

    turn: int
    passed: bool
    title: str


def turn_marks(records: Iterable[dict]) -> list[Mark]:
    """One mark per graded turn, in order: its grade against the ground truth and its checks together, as
    the engine counts turns_passed/turns_total (engine.conversation._Scripted.units). Ungraded turns have none."""
    marks = []
    for record in records:
        grade, checks = record.get("grade"), record.get("checks") or []
        if grade is None and not checks:
            continue
        parts = [f"{grade.get('grader') or 'grade'} {grade['score']:.2f}"] if grade else []
        if checks:
            parts.append(f"{sum(check['passed'] for check in checks)}/{len(checks)} checks")
        passed = (grade is None or bool(grade["passed"])) and all(check["passed"] for check in checks)
        title = f"Turn {record['turn']} {'passed' if passed else 'failed'}: {', '.join(parts)}"
        marks.append(Mark(record["turn"], passed, title))
    return marks


def strip(conversation: Conversation, marks: list[Mark]) -> dict | None:
    """'2/3 ✓✓✗': the stored count once the conversation is over, the marks so far while it runs."""
    if conversation.style not in GRADED_STYLES:
        return None
    if conversation.turns_total is not None:
        passed, total = conversation.turns_passed or 0, conversation.turns_total
    elif marks:
        passed, total = sum(mark.passed for mark in marks), len(marks)
    else:
        return None
    return {"passed": passed, "total": total, "marks": marks}


_gates_by_hash: dict[str, list[Gate]] = {}


def suite_gates(version: SuiteVersion) -> list[Gate]:
    """A version's gates, read from its YAML once per process: gates never depend on attached files, so a
    run page never loads a dataset (which can be megabytes) to show them."""
    cached = _gates_by_hash.get(version.sha256)
    if cached is None:
        try:
            raw, _ = parse_yaml(version.source)
            cached = [Gate.model_validate(gate) for gate in raw.get("gates") or []]
        except (SuiteError, ValidationError, TypeError):  # saved under an older schema: no gates to show
            cached = []
        if len(_gates_by_hash) > 1024:
            _gates_by_hash.clear()
        _gates_by_hash[version.sha256] = cached
    return cached


def gates(run: Run, conversations: list[Conversation]) -> list[dict]:
    """The suite's gates over the run so far, from the conversations the page has already loaded (what
    runs.services.gate_results computes, without its queries)."""
    return [
        {
            "label": gate.label,
            "actual": "n/a" if gate.actual is None else f"{round(gate.actual, 3):g}",
            "passed": gate.passed,
        }
        for gate in evaluate_gates(suite_gates(run.suite_version), conversations)
    ]


def records_for_strips(run: Run, conversations: list[Conversation]) -> dict[int, list[dict]]:
    """Turn records of the run's scripted conversations, in one query, when the run is small enough."""
    if len(conversations) > STRIP_MAX_CONVERSATIONS or not any(
        conversation.style in GRADED_STYLES for conversation in conversations
    ):
        return {}
    records: dict[int, list[dict]] = defaultdict(list)
    rows = (
        Turn.objects.filter(conversation__run=run, conversation__style__in=GRADED_STYLES)
        .order_by("conversation_id", "position")
        .values_list("conversation_id", "record")
    )
    for conversation_id, record in rows:
        records[conversation_id].append(record)
    return records


STYLE_LABELS = {
    "tree": "conversation tree",
    "scripted": "scripted turns",
    "turns": "turns",
    "history": "reply to a given history",
}
# An attached file embedded in a history message: engine.history.file_block's header line.
FILE_BLOCK = re.compile(r"^=== [^\n]+ ===$", re.MULTILINE)
ROLE_CLASSES = ("system", "user", "assistant", "tool")


def system_message(run: Run, conversation: Conversation) -> dict | None:
    """The system message the model saw first: the suite's `system` and any `*.instructions.md` guidelines
    this eval's history attached. Read from the YAML alone (and the few files it names): a dataset is never
    loaded for a transcript."""
    version = run.suite_version
    try:
        raw, _ = parse_yaml(version.source)
        spec = SuiteSpec.model_validate(raw)
    except Exception:  # a version saved under an older schema still has a transcript worth showing
        return None
    # Dataset rows come after the YAML's evals and never carry a history.
    ev = spec.evals[conversation.index] if conversation.index < len(spec.evals) else None
    named = [
        part.value
        for message in ((ev.messages or []) if ev is not None else [])
        if isinstance(message.content, list)
        for part in message.content
        if part.type == "file"
    ]
    guidelines = [name for name in named if name.endswith(INSTRUCTIONS_SUFFIX)]
    text = spec.system
    if guidelines:
        files = dict(version.files.filter(name__in=named).values_list("name", "content"))
        try:
            sent, history = build_history(spec.system, ev.messages, files)
        except KeyError:  # a file missing from an old version: show what the suite itself says
            guidelines = []
        else:
            text = sent[0]["content"] if len(sent) > len(history) else None
    if not text:
        return None
    return {"segments": message_segments(text), "guidelines": guidelines}


def message_segments(text: str) -> list[dict]:
    """A given message split around embedded file blocks, so files show as code; the text is unchanged."""
    starts = [match.start() for match in FILE_BLOCK.finditer(text)]
    if not starts:
        return [{"file": False, "text": text}]
    segments = [{"file": False, "text": text[: starts[0]].rstrip("\n")}] if starts[0] else []
    for begin, end in zip(starts, [*starts[1:], len(text)], strict=True):
        segments.append({"file": True, "text": text[begin:end].rstrip("\n")})
    return [segment for segment in segments if segment["text"]]


def given_history(history: list[dict]) -> list[dict]:
    """The given history as the transcript shows it: every role, marked as not generated in this run."""
    given = []
    for message in history:
        role = str(message.get("role") or "user")
        given.append(
            {
                "role": role,
                "side": role if role in ROLE_CLASSES else "other",
                "segments": message_segments(message_text(message)),
            }
        )
    return given


def transcript_text(history: list[dict], turns: list[TurnRecord]) -> str:
    """The whole conversation in the `[Role]:` format judges read: the given history, then the live turns."""
    messages = list(history)
    for turn in turns:
        if turn.prompt:  # "" is the model replying to the given history: no user message was sent
            messages.append({"role": "user", "content": turn.prompt})
        messages.append({"role": "assistant", "content": turn.response})
    return format_transcript(messages)
