"""A Letta judge's rubric: its style (placeholders of its own, or written for the earlier Letta's judge
prompt), the rubric text with rubric_vars filled in, and the suite keys that send it as Letta does."""

from __future__ import annotations

import string

from ..common import Report, Section

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
