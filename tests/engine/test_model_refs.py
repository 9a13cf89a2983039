"""engine.endpoint_checks.model_refs finds every model reference however deep the suite names it, while
visiting only the fields whose type can lead to one."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from engine.endpoint_checks import ROLES, model_refs
from engine.loader import load_suite
from evalsite.cli.common import load_suite_file

NESTED = """\
name: nested
model: fake/test-model
judge: fake/judge-model
graders:
  quality: {kind: llm_judge, rubric: "Rate {submission}", model: fake/suite-grader}
tools:
  - name: book
    description: Books a table
    parameters: {type: object}
    llm: {model: fake/suite-tool}
evals:
  - prompt: hi
    checks:
      - or:
          - llm_judge: {criteria: polite, model: fake/in-or}
          - contains: hello
      - match: "*done*"
        prompt: again
        checks:
          - or:
              - llm_judge: {criteria: kind, model: fake/in-follow-up-or}
  - id: scripted
    turns:
      - input: first
        checks:
          - llm_judge: {criteria: brief, model: fake/in-turn}
      - input: second
  - prompt: book a table
    checks:
      - contains: booked
    simulate:
      persona: A hurried diner.
      model: fake/user-model
      stop_when:
        any:
          - natural_language: {prompt: Is it booked?, model: fake/stop-judge}
          - after_turns: 4
  - input: Book it.
    graders:
      own: {kind: llm_judge, rubric: "Rate it", model: fake/eval-grader}
    tools:
      - name: pay
        description: Pays
        parameters: {type: object}
        llm: {model: fake/eval-tool}
"""


def every_field_walk(obj: object, path: tuple) -> list[tuple[tuple, str, str]]:
    """The walk over every field of every model, with no pruning: what model_refs must agree with."""
    found: list[tuple[tuple, str, str]] = []
    if isinstance(obj, BaseModel):
        role = ROLES.get(type(obj))
        if role is not None and obj.model:
            found.append(((*path, "model"), role, obj.model))
        for name, field in type(obj).model_fields.items():
            value = getattr(obj, name)
            if value is not None and not isinstance(value, str | int | float | bool):
                found += every_field_walk(value, (*path, field.alias or name))
    elif isinstance(obj, list):
        for index, item in enumerate(obj):
            found += every_field_walk(item, (*path, index))
    elif isinstance(obj, dict):
        for key, item in obj.items():
            found += every_field_walk(item, (*path, key))
    return found


def refs_of_roles(suite) -> list[tuple[tuple, str, str]]:
    return [(ref.path, ref.role, ref.ref) for ref in model_refs(suite) if ref.role in ROLES.values()]


def test_references_deep_in_or_follow_ups_turns_stop_conditions_graders_and_tools_are_all_found():
    suite = load_suite(NESTED)
    found = {(ref.role, ref.ref) for ref in model_refs(suite)}
    assert found >= {
        ("model", "fake/test-model"),
        ("judge", "fake/judge-model"),
        ("grader judge", "fake/suite-grader"),
        ("tool model", "fake/suite-tool"),
        ("check judge", "fake/in-or"),
        ("check judge", "fake/in-follow-up-or"),
        ("check judge", "fake/in-turn"),
        ("simulated user", "fake/user-model"),
        ("stop condition judge", "fake/stop-judge"),
        ("grader judge", "fake/eval-grader"),
        ("tool model", "fake/eval-tool"),
    }
    assert refs_of_roles(suite) == every_field_walk(suite.graders, ("graders",)) + every_field_walk(
        suite.tools, ("tools",)
    ) + [found for index, ev in enumerate(suite.evals) for found in every_field_walk(ev, ("evals", index))]


EXAMPLES = sorted(Path(__file__).resolve().parents[2].joinpath("examples").glob("*.yaml"))


@pytest.mark.parametrize("path", EXAMPLES, ids=[path.name for path in EXAMPLES])
def test_the_examples_references_are_those_of_a_walk_over_every_field(path: Path):
    suite, _ = load_suite_file(path)
    expected = every_field_walk(suite.graders, ("graders",)) + every_field_walk(suite.tools, ("tools",))
    for index, ev in enumerate(suite.evals):
        expected += every_field_walk(ev, ("evals", index))
    assert refs_of_roles(suite) == expected
