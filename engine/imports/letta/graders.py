"""A Letta suite's graders: which one evalsite keeps (the one the gate or reward names, else the first),
what it becomes (a tool grader by name, a judge as `grader: llm_judge` with a rubric), and its extractor."""

from __future__ import annotations

import re
import string

from pydantic import ValidationError

from engine.schema import Extractor

from ..common import (
    ImportProblem,
    Report,
    as_name,
    as_number,
    attach,
    basename,
    find_file,
    safe_file_name,
    short,
)
from .custom import (
    NO_AGENT_STATE,
    NO_TOOL_CALLS,
    attach_python,
    code_check,
    function_ref,
    is_custom,
    renamed,
)

TOOL_GRADERS = ("exact_match", "contains", "regex_match")
JUDGE_KINDS = ("model_judge", "rubric", "letta_judge")


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
        f"graders.{key}: {_grading(key, spec)[1] or 'not converted'}" for key, spec in graders.items()
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


def _grading(key: str, spec: dict, code_threshold: float = 1.0) -> tuple[dict | None, str]:
    """How evalsite grades like this Letta grader, or (None, why not). Its notes: what it keeps differently
    (`notes`) or drops although it grades (`lost`)."""
    kind = spec.get("kind", "tool")
    problems: list[str] = []
    lost: list[str] = []
    extractor_name = spec.get("extractor", "last_assistant")
    if not isinstance(extractor_name, str):
        return None, f"extractor {short(extractor_name)}: not an extractor name"
    if extractor_name in NO_TOOL_CALLS:
        return None, (
            f"extractor {extractor_name} reads the agent's tool calls, which evalsite's conversations do not "
            "hold yet"
        )
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
    else:
        what = {
            "tool_arguments": "tool-call arguments",
            "tool_output": "tool results",
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
        grading, why = _grading(key, spec)
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
    if preferred and preferred != primary and preferred in graders:
        report.lose(
            f"graders.{preferred}: the {named_by}'s grader — {reasons.get(preferred, 'not converted')}"
        )
    for key in graders:
        if key in (primary, preferred):
            continue
        why = reasons.get(key) or "not converted"
        report.lose(f"graders.{key} ({_describe(graders[key])}): not converted — {why}")
    return primary, spec, grading


def _describe(spec: dict) -> str:
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


RESERVED = ("input", "ground_truth", "submission")

# Letta's judge before it sent rubrics as written: this system message, and the rubric inside its own prompt.
WRAPPED_SYSTEM = """You are an evaluation judge. You will be given:
1. A rubric describing evaluation criteria
2. An input/question
3. A submission to evaluate

Evaluate the submission according to the rubric and return a JSON response with:
{
    "score": (REQUIRED: a decimal number between 0.0 and 1.0 inclusive),
    "rationale": "explanation of your grading decision"
}

IMPORTANT:
- The score MUST be a number between 0.0 and 1.0 (inclusive)
- 0.0 means complete failure, 1.0 means perfect
- Use decimal values for partial credit (e.g., 0.25, 0.5, 0.75)
- Be objective and follow the rubric strictly"""


def rubric_style(prompt: str) -> str:
    """`as_written` for a rubric that places {input}, {submission} or {ground_truth} itself (Letta fills it
    with str.format and sends it alone); `wrapped` for one written for the earlier Letta, which put the rubric
    in its own judge prompt after the question, ground truth and submission."""
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(prompt) if name}
    except ValueError:
        return "wrapped"
    return "as_written" if fields & set(RESERVED) else "wrapped"


def _escaped(text: str) -> str:
    return text.replace("{", "{{").replace("}", "}}")


def _filled(prompt: str, variables: dict, missing: set[str]) -> str:
    """Letta's str.format of the rubric with only the row's variables filled: {input}, {ground_truth} and
    {submission} are left for evalsite to fill, `{{` stays `{{` (evalsite's format makes it `{` as Letta's
    does), and a variable the row lacks is kept as written (`missing` names it)."""
    formatter = string.Formatter()
    out = []
    for literal, name, spec, conversion in formatter.parse(prompt):
        out.append(_escaped(literal))
        if name is None:
            continue
        if name in RESERVED:
            out.append("{" + name + "}")
        elif name in variables:
            value = variables[name]
            value = formatter.convert_field(str(value), conversion)
            out.append(_escaped(formatter.format_field(value, spec or "")))
        else:
            missing.add(name)
            written = name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "")
            out.append(_escaped("{" + written + "}"))
    return "".join(out)


def rubric_template(
    prompt: str, variables: dict | None, *, with_truth: bool, missing: set[str] | None = None
) -> str:
    """A Letta rubric as an evalsite rubric that sends the judge what Letta sends. Written for today's Letta
    (`as_written`): the row's rubric_vars filled in, the rest as written. Written for the earlier Letta
    (`wrapped`): its judge prompt, holding the rubric (rubric_vars replaced, braces literal), the question,
    the ground truth when the row has one, and the submission."""
    variables = variables or {}
    missing = set() if missing is None else missing
    if rubric_style(prompt) == "as_written":
        return _filled(prompt, variables, missing)
    text = prompt
    for name, value in variables.items():
        text = text.replace("{" + str(name) + "}", str(value))
    parts = [
        "You are an evaluation judge. An agent was given a task and returned a submission for that task.",
        "Your job is to evaluate the quality of that submission according to the rubric below.",
        "",
        "IMPORTANT: Do NOT answer the original question yourself. You are ONLY evaluating someone else's answer.",
        "",
        "---",
        "",
        "## Evaluation Rubric",
        _escaped(text),
        "",
        "---",
        "",
        "## Original Question Given to the Agent",
        "{input}",
    ]
    if with_truth:
        parts += ["", "## Expected Answer (Ground Truth)", "{ground_truth}"]
    parts += [
        "",
        "---",
        "",
        "## The Agent's Submission (What You Are Evaluating)",
        "{submission}",
        "",
        "---",
        "",
        "## Your Instructions",
        "",
        "1. Review the evaluation rubric carefully",
        "2. Compare the agent's submission against the original question and rubric criteria",
        "3. Determine a score between 0.0 (complete failure) and 1.0 (perfect)",
        "4. Return your evaluation as JSON with:",
        "   - score: a float between 0.0 and 1.0",
        "   - rationale: your reasoning for the score",
    ]
    return "\n".join(parts)


def judge_sections(prompt: str | None, spec: dict, key: str, report: Report) -> list:
    """The suite keys that make evalsite's judge send the rubric as Letta does: as written, with the
    grader's own system_prompt if any; or, for a rubric written for the earlier Letta, inside its judge
    prompt under its judge system message."""
    from ..common import Section

    if prompt is None:
        return []
    if rubric_style(prompt) == "as_written":
        sections = [Section("rubric_prompt", "as_written", comments=[
            "Letta fills {input}, {submission}, {ground_truth} and rubric_vars in the rubric and sends it alone"
        ])]  # fmt: skip
        report.map(
            f"graders.{key}: a rubric with its own placeholders → rubric_prompt: as_written (sent as Letta sends it)"
        )
        system = spec.get("system_prompt")
        if isinstance(system, str) and system:
            sections.append(Section("judge_system", system))
            report.map(f"graders.{key}.system_prompt → judge_system")
        return sections
    report.map(
        f"graders.{key}: a rubric without {{input}} / {{submission}} (written for the earlier Letta) → sent inside "
        "that Letta's judge prompt (rubric, question, ground truth, submission) under its judge system message"
    )
    return [
        Section("rubric_prompt", "as_written", comments=["the earlier Letta's judge prompt, as it sent it"]),
        Section("judge_system", WRAPPED_SYSTEM),
    ]


# --- several graders: each a named evalsite grader (docs/suite-format.md, named graders) ---------------------

# Letta's built-in `ascii_printable_only`: every character but \n and \r is printable ASCII (32-126).
ASCII_ONLY = r"\A[\x20-\x7E\r\n]*\Z"
CHECK_FUNCTIONS = {"ascii_printable_only": {"regex": ASCII_ONLY}}
GRADER_NAME_OK = re.compile(r"^[A-Za-z0-9_-]{1,60}$")


def convertible(graders: dict[str, dict], code_threshold: float = 1.0) -> dict[str, dict]:
    """The graders that have an evalsite equivalent: name -> (what _grading says) with the Letta spec."""
    out = {}
    for key, spec in graders.items():
        function = as_name(spec.get("function"))
        if (
            spec.get("kind", "tool") == "tool"
            and function in CHECK_FUNCTIONS
            and not is_custom(spec.get("extractor"))
        ):
            grading, _ = _grading(key, {**spec, "function": "contains"})  # for its extractor only
            if grading is not None:
                out[key] = {**grading, "grader": "check", "described": f"tool {function}"}
            continue
        grading, _ = _grading(key, spec, code_threshold)
        if grading is not None:
            out[key] = grading
    return out


def named_graders(
    graders: dict[str, dict], files: dict[str, str], report: Report, code_threshold: float = 1.0
) -> tuple[dict[str, dict], dict[str, str], dict[str, str]]:
    """Every Letta grader that converts, as a named grader (name kept); the rubric and Python files to
    attach; the judges' prompts as Letta wrote them (rows with rubric_vars fill them in)."""
    converted = convertible(graders, code_threshold)
    out: dict[str, dict] = {}
    attached: dict[str, str] = {}
    prompts: dict[str, str] = {}
    kept = None if converted else _blind_grader(graders, files, attached, report, code_threshold)
    if kept is not None:
        out[kept[0]] = kept[1]
    for key, spec in graders.items():
        if kept is not None and key == kept[0]:
            continue
        if key not in converted:
            _, why = _grading(key, spec)
            report.lose(f"graders.{key} ({_describe(spec)}): not converted — {why}")
            continue
        if not GRADER_NAME_OK.match(key):
            report.lose(
                f"graders.{key}: not a grader name evalsite accepts (letters, digits, _ and -, 60 at most)"
            )
            continue
        grading = converted[key]
        kind = grading["grader"]
        named: dict[str, object] = {"kind": kind}
        if kind == "code":
            named = {"kind": "check", "check": grading["check"]}
            for reference in grading["references"]:
                called = attach_python(reference, f"graders.{key}", files, attached, report)
                named = renamed(named, function_ref(reference), called)
            report.map(
                f"graders.{key} ({grading['described']}) → graders.{key}: a code check in the letta dialect "
                "(Letta's extractor, then the @grader on Sample and submission)"
            )
        elif kind == "check":
            named["check"] = dict(CHECK_FUNCTIONS[spec["function"]])
            report.map(
                f"graders.{key} (tool {spec['function']}) → graders.{key}: a regex check "
                "(printable ASCII 32-126; line breaks allowed, as Letta's function allows them)"
            )
        elif kind == "llm_judge":
            prompt = find_rubric_prompt(key, spec, files, report)
            if prompt is None and isinstance(spec.get("prompt_path"), str):
                # listed as needed: the suite says which file it expects
                named["rubric_file"] = safe_file_name(spec["prompt_path"])
            elif prompt is None:
                report.lose(f"graders.{key}: a judge with no prompt — left out")
                continue
            elif isinstance(spec.get("prompt_path"), str):
                prompts[key] = prompt
                name = safe_file_name(spec["prompt_path"])
                name = attach(attached, name, rubric_template(prompt, None, with_truth=True))
                named["rubric_file"] = name
            else:
                prompts[key] = prompt
                named["rubric"] = rubric_template(prompt, None, with_truth=True)
            if isinstance(spec.get("model"), str):
                named["model"] = spec["model"]
                report.map(f"graders.{key}.model → graders.{key}.model: {spec['model']}")
            temperature = spec.get("temperature")
            if as_number(temperature) is not None and 0 <= temperature <= 2:
                named["temperature"] = temperature
                report.map(f"graders.{key}.temperature → graders.{key}.temperature: {temperature:g}")
            report.map(f"graders.{key} ({grading['described']}) → graders.{key}: an llm_judge grader")
        else:
            report.map(f"graders.{key} ({grading['described']}) → graders.{key}: {kind}")
        if grading.get("extractor") is not None:
            named["extractor"] = grading["extractor"]
            report.map(f"graders.{key}.extractor → graders.{key}.extractor: {short(grading['extractor'])}")
        for note in grading.get("notes", []):
            report.skip(f"graders.{key}: {note}")
        for note in grading.get("lost", []):
            report.lose(f"graders.{key}: {note}")
        for option in ("provider", "max_retries", "timeout", "agent_file", "agent_id", "judge_tool_name"):
            if option in spec:
                report.skip(
                    f"graders.{key}.{option}: {short(spec[option], 40)} — evalsite's endpoint settings apply"
                )
        out[key] = named
    return out, attached, prompts


BUILTINS_FILE = "letta_builtin.py"


def _blind_grader(
    graders: dict[str, dict],
    files: dict[str, str],
    attached: dict[str, str],
    report: Report,
    threshold: float,
) -> tuple[str, dict] | None:
    """When every grader reads tool calls or agent memory, the first tool grader is kept as a code check that
    runs Letta's extractor on evalsite's conversation, which holds neither: it scores what Letta scores an
    agent that calls no tool and keeps no memory. The suite still runs, and the loss is listed."""
    for key, spec in graders.items():
        extractor = spec.get("extractor")
        function = spec.get("function")
        if spec.get("kind", "tool") != "tool" or extractor not in (*NO_TOOL_CALLS, *NO_AGENT_STATE):
            continue
        if not isinstance(function, str) or not GRADER_NAME_OK.match(key):
            continue
        config: dict = {"extractor": extractor}
        if isinstance(spec.get("extractor_config"), dict):
            config["extractor_config"] = spec["extractor_config"]
        if is_custom(function):
            called = attach_python(function, f"graders.{key}", files, attached, report)
        elif function in (*TOOL_GRADERS, *CHECK_FUNCTIONS):
            called = f"{BUILTINS_FILE.removesuffix('.py')}:{function}"
            attached[BUILTINS_FILE] = (
                "# Letta's built-in graders, for the code check that stands in for one (evalsite's letta dialect).\n"
                "from letta_evals.graders.builtin import ascii_printable_only, contains, exact_match, regex_match\n"
                '\n__all__ = ["ascii_printable_only", "contains", "exact_match", "regex_match"]\n'
            )
        else:
            continue
        report.lose(
            f"graders.{key}: extractor {extractor} reads what evalsite's conversations do not hold (tool calls, "
            "agent memory); kept, as the suite's only grader, as a code check that finds none — it scores what "
            "Letta scores an agent that calls no tool and keeps no memory"
        )
        code = {"function": called, "dialect": "letta", "threshold": threshold, "config": config}
        return key, {"kind": "check", "check": {"code": code}}
    return None
