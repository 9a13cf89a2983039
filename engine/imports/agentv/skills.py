"""Agent Skills `evals.json` (and `*.evals.json`), which AgentV runs through its read adapter: the file becomes
the eval file the adapter builds (agentSkillsToAgentVYamlObject), read by the same reader as AgentV's eval
files of promptfoo's shape. Each eval's `prompt` is the user message, its `files` the files attached before
it, and its `expected_output`, `assertions` and `expectations` the criteria of one rubric judge, which AgentV
passes on the share met at its threshold."""

from __future__ import annotations

from .. import promptfoo
from ..common import Converted, ImportProblem, Report, as_text, short

# The keys AgentV's adapter reads from an eval; any other is not part of what it runs.
EVAL_KEYS = ("id", "name", "prompt", "expected_output", "assertions", "expectations", "files")


def skills_shape(data: object) -> bool:
    """The Agent Skills evals.json shape AgentV's adapter accepts: a non-empty `skill_name` and `evals`."""
    name = data.get("skill_name") if isinstance(data, dict) else None
    return isinstance(name, str) and bool(name.strip()) and isinstance(data.get("evals"), list)


def _texts(value: object) -> list[str]:
    """A list of texts, trimmed, blanks left out; anything but a list of texts is none, as AgentV reads it."""
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        return []
    return [item.strip() for item in value if item.strip()]


def convert(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    skill = data["skill_name"].strip()
    evals = data["evals"]
    if not evals:
        raise ImportProblem(f"{name}: `evals` is empty — an Agent Skills evals.json lists its evals there")
    report.map(
        f"{name}: an Agent Skills evals.json, read as AgentV's read adapter reads it (the eval file "
        "`agentv convert` writes)"
    )
    # AgentV names the suite after its file; one skill may have several evals files (`evals.json` beside
    # `csv-analyzer.evals.json`, or in two folders), and suite names are unique in a project, so the file's
    # path among those given goes with the skill's name.
    title = f"{skill} ({report.origin or name})"
    report.map(
        f"skill_name: {skill} → description: Evals for {skill} skill; name: {title} (the skill and its file)"
    )
    for key in data:
        if key not in ("skill_name", "evals"):
            report.skip(f"{key}: {short(data[key], 50)} — not read by AgentV's adapter either")
    tests: list[dict] = []
    for index, raw in enumerate(evals):
        where = f"evals[{index}]"
        if not isinstance(raw, dict):
            report.lose(f"{where}: not an object — AgentV refuses the file; this eval is left out")
            continue
        prompt = raw.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            report.lose(f"{where}: no `prompt` — nothing to send (AgentV refuses the file); left out")
            continue
        test: dict[str, object] = {"id": str(index + 1) if raw.get("id") is None else str(raw["id"])}
        expected = as_text(raw.get("expected_output"))
        if expected and expected.strip():
            test["criteria"] = expected.strip()
        test["input"] = prompt
        attached = _texts(raw.get("files"))
        if attached:
            test["input_files"] = attached
        # AgentV's adapter makes each criterion `required`, which marks its rubric failed, but passes the case
        # on its score, the share of criteria met: equal graders under the weighted rule say the same.
        criteria = [
            {"id": "expected-outcome", "outcome": expected.strip()} if expected and expected.strip() else None,
            *({"id": f"assertion-{n}", "outcome": text} for n, text in enumerate(_texts(raw.get("assertions")), 1)),
            *({"id": f"expectation-{n}", "outcome": text} for n, text in enumerate(_texts(raw.get("expectations")), 1)),
        ]  # fmt: skip
        criteria = [item for item in criteria if item]
        if criteria:
            test["assert"] = [{"metric": "agent-skills-criteria", "type": "llm-rubric", "value": criteria}]
        if as_text(raw.get("name")):
            report.group(
                "evals[].name: AgentV keeps it as metadata, which grades nothing; not converted", where
            )
        for key in raw:
            if key not in EVAL_KEYS:
                report.group(f"evals[].{key}: not read by AgentV's adapter either, left out", where)
        tests.append(test)
    if not tests:
        raise ImportProblem(f"{name}: no eval has a `prompt` to send — {'; '.join(report.problems())}")
    report.map(
        "evals[].prompt → the user message; files → file parts before it; expected_output, assertions and "
        "expectations → the criteria of one rubric (a judge each), passing on the share met at 0.8, as AgentV "
        "scores them; expected_output is a criterion, not a reference answer, as AgentV's adapter reads it"
    )
    suite = {"name": title, "description": f"Evals for {skill} skill", "tests": tests}
    return promptfoo.convert_agentv(name, suite, files, report)
