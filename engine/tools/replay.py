"""The `replay` source: results recorded in an earlier run. `replay: recorded.json` names a results.json
(`evalsite.results/1`, as `evalsite run --json`, the run page and the API export it) attached to the suite;
a call whose tool name and arguments equal a stored call's gets that call's stored result, or its stored
error. The stored call preferred is one of the same eval at the same turn (the same user message), then one
of the same eval, then any; the same call made again in a conversation gets the next stored one of its kind,
so a tool that answered otherwise the second time is replayed in that order. A call with no stored match
passes on to the tool's next source (an `llm` or `code` fallback, say), or is the tool's error when none is
left. Calls the model got wrong (an unknown tool, bad arguments) were never the tool's and are not replayed."""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

from ..results import RESULTS_FORMAT
from ..schema import Tool
from .base import CallScope, Outcome


class NotRecorded(ValueError):
    """The file is no results document evalsite can replay from."""


@dataclass(frozen=True)
class Recorded:
    eval_id: str
    prompt: str
    result: str
    error: str | None


def read_recorded(text: str) -> dict[tuple[str, str], list[Recorded]]:
    """The stored calls of a results document, by (tool name, arguments as canonical JSON), in run order."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise NotRecorded(f"it is not JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != RESULTS_FORMAT:
        raise NotRecorded(f"it is not an `{RESULTS_FORMAT}` document (a results.json of an evalsite run)")
    found: dict[tuple[str, str], list[Recorded]] = {}
    for result in _items(document.get("evals")):
        for turn in _items(result.get("turns")):
            for round_ in _items(turn.get("tool_rounds")):
                for call in _items(round_.get("calls")):
                    if call.get("mistake") or not isinstance(call.get("arguments"), dict):
                        continue
                    key = (str(call.get("name")), canonical(call["arguments"]))
                    found.setdefault(key, []).append(
                        Recorded(
                            str(result.get("id", "")),
                            str(turn.get("prompt", "")),
                            str(call.get("result", "")),
                            call.get("error"),
                        )
                    )
    return found


def _items(value) -> list[dict]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def canonical(arguments: dict) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


@functools.lru_cache(maxsize=16)
def _recorded(text: str) -> dict[tuple[str, str], list[Recorded]]:
    # Parsed once per file's text: every call of every conversation of a run looks it up. A string's hash is
    # kept on the string, so the lookup costs nothing once the loader's text is hashed.
    return read_recorded(text)


def from_replay(tool: Tool, arguments: dict, scope: CallScope) -> Outcome | None:
    text = scope.files.get(tool.replay)
    if (
        text is None
    ):  # the loader refuses a suite whose file is not attached; a caller without files lands here
        raise NotRecorded(f"file `{tool.replay}` is not attached")
    key = (tool.name, canonical(arguments))
    stored = _recorded(text).get(key)
    if not stored:
        return None
    prompt = _last_user_text(scope.conversation)
    ranks = [_rank(call, scope.eval_id, prompt) for call in stored]
    best = [call for call, rank in zip(stored, ranks, strict=True) if rank == min(ranks)]  # in run order
    used = scope.state.setdefault("replay", {})
    count = used.get((key, prompt), 0)
    used[(key, prompt)] = count + 1
    call = best[min(count, len(best) - 1)]
    if call.error is not None:
        return Outcome(error=call.error, source="replay")
    return Outcome(result=call.result, source="replay")


def _rank(call: Recorded, eval_id: str, prompt: str) -> tuple[bool, bool]:
    return call.eval_id != eval_id, call.prompt != prompt


def _last_user_text(conversation: list[dict]) -> str:
    for message in reversed(conversation):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""
