"""A transcript as the conversation page shows it: the system message and given history with their embedded
files, why a simulated conversation ended, its spend, its `[Role]:` text and the outcomes a reviewer may
overturn. Each is read as stored, never worked out again."""

from __future__ import annotations

import re

from engine.history import INSTRUCTIONS_SUFFIX
from engine.outcomes import TerminationKind
from engine.overrides import targets as review_targets
from engine.results import TurnRecord
from engine.schema import Style
from engine.tools import exchange_messages
from engine.transcript import format_transcript, message_text

from ..models import Conversation, Status

STYLE_LABELS = {style: style.label for style in Style}
# An attached file embedded in a history message: engine.history.file_block's header line.
FILE_BLOCK = re.compile(r"^=== (?P<name>[^\n]+) ===$", re.MULTILINE)
ROLE_CLASSES = ("system", "user", "assistant", "tool")


def system_message(conversation: Conversation) -> dict | None:
    """The system message the model saw first, as stored when the run was launched: the suite's `system` and
    any `*.instructions.md` guidelines the eval's history attached, each in a file block named after it."""
    if not conversation.system:
        return None
    guidelines = [
        match["name"]
        for match in FILE_BLOCK.finditer(conversation.system)
        if match["name"].endswith(INSTRUCTIONS_SUFFIX)
    ]
    return {"segments": message_segments(conversation.system), "guidelines": guidelines}


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


def ending(conversation: Conversation, turns: list[TurnRecord]) -> str | None:
    """Why a simulated conversation ended: condition met (which), max turns, inputs exhausted. While it runs,
    the last stored turn says so before the conversation row does."""
    if conversation.style != Style.SIMULATED or conversation.status == Status.ERROR:
        return None
    if conversation.termination:
        return None if conversation.termination_kind == TerminationKind.ERROR else conversation.termination
    return turns[-1].termination if turns else None


def spend(turns: list[TurnRecord]) -> dict:
    """A conversation's cost by who spent it: the agent, its judges, the simulated user (Conversation.cost is
    their sum)."""
    return {
        "agent": sum(turn.cost for turn in turns),
        "judge": sum(turn.judge_cost for turn in turns),
        "user": sum(turn.user_cost for turn in turns),
        "user_tokens": sum(turn.user_usage.total_tokens for turn in turns),
    }


def transcript_text(history: list[dict], turns: list[TurnRecord], system: str = "") -> str:
    """The whole conversation in the `[Role]:` format judges read: the system message the model saw first
    (the suite's system prompt and any `*.instructions.md` guidelines, as stored at launch), the given
    history, then the live turns with their tool calls and results, so that a copied transcript shows what
    steered the model."""
    messages = [{"role": "system", "content": system}] if system else []
    messages += history
    for turn in turns:
        if turn.prompt:  # "" is the model replying to the given history: no user message was sent
            messages.append({"role": "user", "content": turn.prompt})
        messages += exchange_messages(turn)
    return format_transcript(messages)


def review_rows(turns: list[TurnRecord], overrides: list, can_override: bool) -> dict[int, list[dict]]:
    """Per stored turn, the outcomes a reviewer may overturn and the overrides already given (Override rows,
    whose ids withdraw them), as the transcript lists them under a turn's checks: {turn: [{target, label,
    passed (as the run gave it), override, flip_to}]}. Without the right to override, only the overridden
    outcomes are listed."""
    given = {(item.turn, item.target): item for item in overrides}
    rows: dict[int, list[dict]] = {}
    for turn in turns:
        for target in review_targets(turn):
            override = given.get((turn.turn, target.key))
            if override is None and not can_override:
                continue
            own = target.passed  # `turns` are as stored: the run's own outcomes
            rows.setdefault(turn.turn, []).append(
                {
                    "target": target.key,
                    "label": target.label,
                    "passed": own,
                    "override": override,
                    "override_id": override.pk if override is not None else None,
                    "flip_to": not own,
                    "by": override.created_by.get_username() if override is not None else "",
                }
            )
    return rows
