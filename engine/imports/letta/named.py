"""Several Letta graders at once: each a named evalsite grader (docs/suite-format.md, named graders), a
custom one run blind from a builtins file when it cannot be converted."""

from __future__ import annotations

import re

from ..common import Report, as_name, as_number, attach, safe_file_name, short
from .custom import NO_AGENT_STATE, attach_python, function_ref, is_custom, renamed
from .graders import TOOL_GRADERS, describe, find_rubric_prompt, grading_of, say_unknown_options
from .rubrics import rubric_template

ASCII_ONLY = r"\A[\x20-\x7E\r\n]*\Z"
CHECK_FUNCTIONS = {"ascii_printable_only": {"regex": ASCII_ONLY}}
GRADER_NAME_OK = re.compile(r"^[A-Za-z0-9_-]{1,60}$")


def convertible(graders: dict[str, dict], code_threshold: float = 1.0) -> dict[str, dict]:
    """The graders that have an evalsite equivalent: name -> (what grading_of says) with the Letta spec."""
    out = {}
    for key, spec in graders.items():
        function = as_name(spec.get("function"))
        if (
            spec.get("kind", "tool") == "tool"
            and function in CHECK_FUNCTIONS
            and not is_custom(spec.get("extractor"))
        ):
            grading, _ = grading_of(key, {**spec, "function": "contains"})  # for its extractor only
            if grading is not None:
                out[key] = {**grading, "grader": "check", "described": f"tool {function}"}
            continue
        grading, _ = grading_of(key, spec, code_threshold)
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
            _, why = grading_of(key, spec)
            report.lose(f"graders.{key} ({describe(spec)}): not converted — {why}")
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
        say_unknown_options(spec, key, report)
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
    """When every grader reads agent memory, the first tool grader is kept as a code check that runs Letta's
    extractor on evalsite's conversation, which holds none: it scores what Letta scores an agent that keeps
    no memory. The suite still runs, and the loss is listed."""
    for key, spec in graders.items():
        extractor = spec.get("extractor")
        function = spec.get("function")
        if spec.get("kind", "tool") != "tool" or extractor not in NO_AGENT_STATE:
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
            f"graders.{key}: extractor {extractor} reads what evalsite's conversations do not hold (agent "
            "memory); kept, as the suite's only grader, as a code check that finds none — it scores what "
            "Letta scores an agent that keeps no memory"
        )
        code = {"function": called, "dialect": "letta", "threshold": threshold, "config": config}
        return key, {"kind": "check", "check": {"code": code}}
    return None
