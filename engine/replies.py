"""Replies that are no ordinary reply: cut off at the token limit, stopped by a content filter, ended in an
error, refused, or empty. The conversation loop (engine.conversation) records them for what they are and
treats them by the eval's `incomplete_reply` rule: an error (the default), a failed turn, or graded as
given. Such a reply is never graded as if the model had finished it, and under `error` or `fail` no
follow-up is sent after it."""

from __future__ import annotations

from typing import Literal

from .clients import Completion
from .drivers import Verdict
from .outcomes import Status
from .results import TurnRecord

IncompleteRule = Literal["error", "fail", "grade"]
DEFAULT_RULE: IncompleteRule = "error"
QUOTED = 80  # characters of a refusal quoted in a verdict


def incomplete(completion: Completion, *, tools_offered: bool) -> str | None:
    """Why the reply is no finished one, in words ("reply cut off at the token limit (finish_reason:
    length)"); None for an ordinary reply. Tool calls are no answer when no tools were offered: nothing
    carries them out."""
    why = unfinished(completion)
    if why is not None:
        return why
    if completion.text.strip():
        return None
    if completion.calls and not tools_offered:
        names = called(completion.calls)
        return f"tool calls instead of an answer, and no tools were offered (the model called {names})"
    if not completion.calls:
        # Whitespace is no answer either: checks that look for what is absent (`not_match`) would pass it.
        what = "only whitespace" if completion.text else "no content"
        return f"empty reply ({what} and no tool calls)"
    return None


def unfinished(completion: Completion) -> str | None:
    """Why the model call did not finish, whatever it holds (text, tool calls): refused, cut off, filtered,
    or ended in an error; None when it finished. A refusal says so first: it may come with any
    finish_reason."""
    if completion.refusal:
        refusal = " ".join(completion.refusal.split())
        quoted = refusal if len(refusal) <= QUOTED else refusal[: QUOTED - 1] + "…"
        return f"the model refused: “{quoted}”"
    if completion.finish_reason == "length":
        return "reply cut off at the token limit (finish_reason: length)"
    if completion.finish_reason == "content_filter":
        return "reply stopped by the content filter (finish_reason: content_filter)"
    if completion.finish_reason == "error":  # a gateway's (OpenRouter's) word for a generation that failed
        return "reply ended in an error (finish_reason: error)"
    return None


def called(calls) -> str:
    """The tools these calls name, each once, in words: "get_weather, search"."""
    names = dict.fromkeys(call["name"] or "a function without a name" for call in calls)
    return ", ".join(names)


def graded_text(completion: Completion) -> str:
    """The text `incomplete_reply: grade` grades: the content, else the refusal (what a safety suite that
    expects a refusal checks)."""
    return completion.text or completion.refusal or ""


def incomplete_verdict(turn: TurnRecord, rule: IncompleteRule) -> tuple[Verdict, str | None]:
    """How a conversation ends at a turn that did not finish, under `error` or `fail`: (verdict, error)."""
    why = turn.incomplete or "reply did not finish"
    if rule == "fail":
        return Verdict(Status.FAILED, 0.0, f"failed on turn {turn.turn}: {why}"), None
    return (
        Verdict(Status.ERROR, None, f"error on turn {turn.turn}: {why}"),
        f"{why}; not graded (incomplete_reply: error)",
    )
