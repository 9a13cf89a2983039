"""Loading a suite from a test's text, and reading the problems it reports."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from engine.loader import load_suite
from engine.source import SuiteError, SuiteProblem

ROOT = Path(__file__).resolve().parents[2]


DEMO = ROOT / "examples" / "demo-mock.yaml"


def suite_text(body: str) -> str:
    return textwrap.dedent(body).lstrip("\n")


def problems_of(data) -> list[SuiteProblem]:
    with pytest.raises(SuiteError) as info:
        load_suite(data)
    problems = info.value.problems
    assert problems, "a SuiteError must list at least one problem"
    return problems


def only_problem(data) -> SuiteProblem:
    problems = problems_of(data)
    assert len(problems) == 1, problems
    return problems[0]


def where(problem: SuiteProblem) -> tuple[int, int, str]:
    return problem.line, problem.column, problem.path


def nested_suite(depth: int) -> str:
    lines = ["name: deep", "evals:", "  - prompt: p0", "    checks:"]
    indent = "      "
    for level in range(1, depth + 1):
        lines += [f"{indent}- match: '*a*'", f"{indent}  prompt: p{level}", f"{indent}  checks:"]
        indent += "    "
    lines.append(f"{indent}- match: '*a*'")
    return "\n".join(lines) + "\n"
