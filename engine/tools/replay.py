"""The `replay` source: results recorded in an earlier run. `replay: recorded.json` names a results.json
(`evalsite.results/1`, as `evalsite run --json`, the run page and the API export it) attached to the suite;
the loader reads its stored calls into the tool's `recorded` (as a rubric file is read into its rubric), so
the workers, which load a suite without its attached files, replay the same calls.

A call whose tool name and arguments equal a stored call's gets that call's stored result, or its stored
error. The stored call preferred is one of the same eval at the same turn (the same user message), then one
of the same eval, then any; the same call made again in a conversation gets the next stored one of its kind,
so a tool that answered otherwise the second time is replayed in that order. A call with no stored match
passes on to the tool's next source (an `llm` or `code` fallback, say), or is the tool's error when none is
left. Calls the model got wrong (an unknown tool, bad arguments) were never the tool's and are not read."""

from __future__ import annotations

import json

from ..results import RESULTS_FORMAT
from ..schema import Tool
from ..schema.tools import RecordedCall
from .base import CallScope, Outcome


class NotRecorded(ValueError):
    """The file is no results document evalsite can replay from."""


def read_recorded(text: str) -> list[RecordedCall]:
    """The stored calls of a results document, in run order."""
    try:
        document = json.loads(text)
    except ValueError as exc:
        raise NotRecorded(f"it is not JSON ({exc})") from None
    if not isinstance(document, dict) or document.get("format") != RESULTS_FORMAT:
        raise NotRecorded(f"it is not an `{RESULTS_FORMAT}` document (a results.json of an evalsite run)")
    found: list[RecordedCall] = []
    for result in _items(document.get("evals")):
        for turn in _items(result.get("turns")):
            for round_ in _items(turn.get("tool_rounds")):
                for call in _items(round_.get("calls")):
                    if call.get("mistake") or not isinstance(call.get("arguments"), dict):
                        continue
                    error = call.get("error")
                    found.append(
                        RecordedCall(
                            eval_id=str(result.get("id", "")),
                            prompt=str(turn.get("prompt", "")),
                            name=str(call.get("name", "")),
                            arguments=call["arguments"],
                            result=str(call.get("result", "")),
                            error=None if error is None else str(error),
                        )
                    )
    return found


def _items(value) -> list[dict]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def canonical(arguments: dict) -> str:
    return json.dumps(arguments, sort_keys=True, ensure_ascii=False)


def _index(tool: Tool) -> dict[str, list[RecordedCall]]:
    """This tool's stored calls by their arguments, in run order; built once per loaded suite (a worker's
    suites are cached, so once per process)."""
    if tool._replay_index is None:
        index: dict[str, list[RecordedCall]] = {}
        for call in tool.recorded or ():
            if call.name == tool.name:
                index.setdefault(canonical(call.arguments), []).append(call)
        tool._replay_index = index
    return tool._replay_index


def from_replay(tool: Tool, arguments: dict, scope: CallScope) -> Outcome | None:
    key = canonical(arguments)
    stored = _index(tool).get(key)
    if not stored:
        return None
    prompt = _last_user_text(scope.conversation)
    ranks = [(call.eval_id != scope.eval_id, call.prompt != prompt) for call in stored]
    best = [call for call, rank in zip(stored, ranks, strict=True) if rank == min(ranks)]  # in run order
    used = scope.state.setdefault("replay", {})
    count = used.get((tool.name, key, prompt), 0)
    used[(tool.name, key, prompt)] = count + 1
    call = best[min(count, len(best) - 1)]
    if call.error is not None:
        return Outcome(error=call.error, source="replay")
    return Outcome(result=call.result, source="replay")


def _last_user_text(conversation: list[dict]) -> str:
    for message in reversed(conversation):
        if message.get("role") == "user":
            content = message.get("content")
            return content if isinstance(content, str) else ""
    return ""
