"""A Letta suite's graders: which one evalsite keeps (the one the gate or reward names, else the first),
what it becomes (a tool grader by name, a judge as `grader: llm_judge` with a rubric), and its extractor."""

from __future__ import annotations

from pydantic import ValidationError

from engine.schema import Extractor
from engine.schema.tools import TOOL_NAME

from ..common import ImportProblem, Report, as_number, basename, find_file, short
from .custom import NO_AGENT_STATE, TOOL_EXTRACTORS, code_check, is_custom

TOOL_GRADERS = ("exact_match", "contains", "regex_match")
JUDGE_KINDS = ("model_judge", "rubric", "letta_judge")


# Every key a Letta grader may have (its tool and model-judge specs forbid others), including those of
# earlier Letta versions this importer still reads.
_GRADER_OPTIONS = {
    "kind", "display_name", "extractor", "extractor_config", "function", "prompt", "prompt_path", "model",
    "temperature", "provider", "max_retries", "timeout", "system_prompt", "agent_file", "agent_id",
    "judge_tool_name", "rubric_vars", "threshold", "code", "check",
}  # fmt: skip


def read_graders(data: dict, report: Report) -> dict[str, dict]:
    graders = data.get("graders")
    if isinstance(graders, dict) and graders:
        out = {str(key): spec for key, spec in graders.items() if isinstance(spec, dict)}
        for key, spec in graders.items():
            if not isinstance(spec, dict):
                report.lose(f"graders.{key}: not a mapping, left out")
        if out:
            return out
    legacy = data.get("grader")
    if isinstance(legacy, dict):
        return {"grader": legacy}
    raise ImportProblem("the suite has no `graders`: evalsite needs to know how rows are graded")


def none_converts(graders: dict[str, dict]) -> ImportProblem:
    """The problem of a suite none of whose graders evalsite can carry, each with why not."""
    listed = "; ".join(
        f"graders.{key}: {grading_of(key, spec)[1] or 'not converted'}" for key, spec in graders.items()
    )
    return ImportProblem(f"no grader of this suite has an evalsite equivalent — {listed}")


def gate_metric(gate: object) -> str | None:
    if not isinstance(gate, dict):
        return None
    if isinstance(gate.get("metric_key"), str):
        return gate["metric_key"]
    weights = gate.get("weights")
    if isinstance(weights, dict) and weights:
        return str(max(weights, key=lambda key: as_number(weights[key]) or 0))
    conditions = gate.get("conditions")
    for condition in conditions if isinstance(conditions, list) else []:
        found = gate_metric(condition)
        if found:
            return found
    return None


def reward_metric(reward: object) -> str | None:
    if isinstance(reward, dict) and isinstance(reward.get("metric_key"), str):
        return reward["metric_key"]
    return None


def grading_of(key: str, spec: dict, code_threshold: float = 1.0) -> tuple[dict | None, str]:
    """How evalsite grades like this Letta grader, or (None, why not). Its notes: what it keeps differently
    (`notes`) or drops although it grades (`lost`)."""
    kind = spec.get("kind", "tool")
    problems: list[str] = []
    lost: list[str] = []
    extractor_name = spec.get("extractor", "last_assistant")
    if not isinstance(extractor_name, str):
        return None, f"extractor {short(extractor_name)}: not an extractor name"
    if extractor_name in NO_AGENT_STATE:
        return None, (
            f"extractor {extractor_name} reads the Letta agent's memory after the conversation; the model "
            "evalsite tests has no memory of its own to update"
        )
    if kind == "tool":
        function = spec.get("function")
        if isinstance(function, str) and (is_custom(function) or is_custom(extractor_name)):
            built = code_check(spec, threshold=code_threshold)
            if built is not None:
                check, references = built
                described = f"tool {function} with extractor {extractor_name}, Python run as a code check"
                return {"grader": "code", "check": check, "references": references, "extractor": None,
                        "described": described, "notes": [], "lost": []}, ""  # fmt: skip
        if function not in TOOL_GRADERS:
            return None, (
                f"tool function {short(function)} is neither a Letta built-in nor a file.py:function reference "
                "evalsite can run"
            )
        grader, described = function, f"tool {function}"
    elif kind in JUDGE_KINDS:
        grader, described = "llm_judge", f"{kind} (LLM judge with a rubric)"
        if is_custom(extractor_name):
            lost.append(
                f"extractor {extractor_name}: custom Python ahead of a judge — the judge reads the last reply "
                "instead of what that extractor returned"
            )
            spec = {key: value for key, value in spec.items() if key not in ("extractor", "extractor_config")}
    else:
        return None, f"kind {short(kind)} has no evalsite equivalent"
    extractor, note = _extractor(spec, problems)
    if extractor is _UNSUPPORTED:
        return None, problems[0]
    result = {"grader": grader, "extractor": extractor, "described": f"{described}, extractor {note}"}
    if grader == "llm_judge" and isinstance(spec.get("model"), str):
        result["judge"] = spec["model"]
    # An extractor option evalsite does not have changes what is graded, except last_turn's separator (an
    # evalsite turn has one reply, so there is nothing to join).
    result["notes"] = [
        note for note in problems if note.startswith("extractor_config.separator of last_turn")
    ]
    result["lost"] = lost + [note for note in problems if note not in result["notes"]]
    return result, ""


_UNSUPPORTED = object()


def _extractor(spec: dict, notes: list[str]) -> tuple[object, str]:
    name = spec.get("extractor", "last_assistant")
    if not isinstance(name, str):
        notes.append(f"extractor {short(name)}: not an extractor name")
        return _UNSUPPORTED, short(name)
    config = spec.get("extractor_config") or {}
    if not isinstance(config, dict):
        config = {}
    value: object
    if name in ("last_assistant", "first_assistant"):
        value = name
    elif name == "all_assistant":
        separator = config.get("separator")
        value = (
            {"all_assistant": {"separator": separator}}
            if isinstance(separator, str) and separator != "\n"
            else name
        )
    elif name == "last_turn":
        value = name
        if "separator" in config:
            notes.append(
                "extractor_config.separator of last_turn: an evalsite turn has one reply, nothing to join"
            )
    elif name == "pattern":
        value = {"pattern": config.get("pattern"), "group": config.get("group", 0)}
        if config.get("search_all"):
            notes.append(
                "extractor_config.search_all: evalsite takes the first match in the reply, not all matches"
            )
    elif name == "after_marker":
        value = {"after_marker": config.get("marker")}
        if config.get("include_marker"):
            notes.append(
                "extractor_config.include_marker: evalsite returns the text after the marker, without it"
            )
    elif name in TOOL_EXTRACTORS:
        tool = config.get("tool_name")
        if not isinstance(tool, str) or not TOOL_NAME.fullmatch(tool):
            notes.append(f"extractor {name} with {short(config)}: needs `tool_name`, the name of a tool")
            return _UNSUPPORTED, name
        for key in config:
            if key != "tool_name":
                notes.append(f"extractor_config.{key}: not an option evalsite has")
        # The first call of that tool in the conversation: its arguments (JSON text) or its result.
        return {name: tool}, f"{name} {short(config, 60)}"
    else:
        what = {
            "memory_block": "the agent's memory blocks",
            "last_compaction": "the agent's compaction messages",
        }.get(name, "custom Python")
        notes.append(f"extractor {short(name)} reads {what}, which evalsite does not have")
        return _UNSUPPORTED, str(name)
    try:
        Extractor.model_validate(value)
    except ValidationError as exc:
        message = exc.errors()[0]["msg"].removeprefix("Value error, ")
        notes.insert(0, f"extractor {name} with {short(config)}: {message}")
        return _UNSUPPORTED, str(name)
    for key in config:
        if key not in ("separator", "pattern", "group", "search_all", "marker", "include_marker"):
            notes.append(f"extractor_config.{key}: not an option evalsite has")
    described = name if not config else f"{name} {short(config, 60)}"
    return (None if value == "last_assistant" else value), described


def choose_grader(
    graders: dict[str, dict], preferred: str | None, named_by: str, report: Report
) -> tuple[str, dict, dict]:
    """The one grader evalsite keeps: the gate's, else the first that converts."""
    converted: dict[str, dict] = {}
    reasons: dict[str, str] = {}
    for key, spec in graders.items():
        grading, why = grading_of(key, spec)
        if grading is None:
            reasons[key] = why
        else:
            converted[key] = grading
    if not converted:
        listed = "; ".join(f"graders.{key}: {why}" for key, why in reasons.items())
        raise ImportProblem(f"no grader of this suite has an evalsite equivalent — {listed}")
    primary = preferred if preferred in converted else next(iter(converted))
    grading = converted[primary]
    why_this = f" (the one the {named_by} uses)" if primary == preferred else ""
    report.map(f"graders.{primary} ({grading['described']}) → grader: {grading['grader']}{why_this}")
    if grading.get("extractor") is not None:
        report.map(f"graders.{primary}.extractor → extractor: {short(grading['extractor'])}")
    if grading.get("judge"):
        report.map(
            f"graders.{primary}.model → judge: {grading['judge']} (a model reference on evalsite's endpoints)"
        )
    for note in grading["notes"]:
        report.skip(f"graders.{primary}: {note}")
    for note in grading["lost"]:
        report.lose(f"graders.{primary}: {note}")
    spec = graders[primary]
    for option in ("temperature", "provider", "max_retries", "timeout", "system_prompt", "agent_file", "agent_id",
                   "judge_tool_name"):  # fmt: skip
        if option in ("temperature", "system_prompt") and grading["grader"] == "llm_judge":
            continue  # → judge_temperature, judge_system (letta/__init__.py)
        if option in spec:
            report.skip(
                f"graders.{primary}.{option}: {short(spec[option], 40)} — evalsite's judge settings apply"
            )
    say_unknown_options(spec, primary, report)
    if preferred and preferred != primary and preferred in graders:
        report.lose(
            f"graders.{preferred}: the {named_by}'s grader — {reasons.get(preferred, 'not converted')}"
        )
    for key in graders:
        if key in (primary, preferred):
            continue
        why = reasons.get(key) or "not converted"
        report.lose(f"graders.{key} ({describe(graders[key])}): not converted — {why}")
    return primary, spec, grading


def say_unknown_options(spec: dict, key: str, report) -> None:
    """A key no Letta grader has is said to be left out, not dropped without a word."""
    for option in spec:
        if option not in _GRADER_OPTIONS:
            report.skip(
                f"graders.{key}.{option}: {short(spec[option], 40)} — not an option of Letta's graders "
                "(Letta refuses it); left out"
            )


def describe(spec: dict) -> str:
    kind = spec.get("kind", "tool")
    return f"tool {spec.get('function')}" if kind == "tool" else str(kind)


def find_rubric_prompt(key: str, spec: dict, files: dict[str, str], report: Report) -> str | None:
    if isinstance(spec.get("prompt"), str):
        report.map(f"graders.{key}.prompt → rubric")
        return spec["prompt"]
    path = spec.get("prompt_path")
    if isinstance(path, str):
        found = find_file(files, path)
        if found is None:
            report.need(basename(path))
            report.skip(
                f"graders.{key}.prompt_path: {path} was not uploaded — upload it with the suite to build the rubric"
            )
            return None
        report.map(f"graders.{key}.prompt_path ({found[0]}) → rubric")
        return found[1]
    report.skip(f"graders.{key}: no `prompt` or `prompt_path`; rows need their own `rubric`")
    return None
