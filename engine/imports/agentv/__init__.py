"""AgentV eval files → evalsite. Today's format has promptfoo's shape and is read by the promptfoo reader;
the earlier generations (`tests` with `input` / `criteria` / `assertions`, v2 `evalcases`, v1 `testcases`)
are read here: `reader` the file, `cases` each case, `messages` its messages, `graders` and `checks` its
assertions. docs/imports.md has the whole table.

A case becomes a `messages` eval the model replies to, or, in `mode: conversation`, a `turns` eval whose
every user turn is sent live and graded by its own assertions. AgentV passes a case on the weighted mean of
its assertions' scores, so assertions become named graders under a weighted pass rule at AgentV's
threshold. A tool-trajectory grader becomes tool checks (engine/imports/toolcalls.py), the tools it names
declared; what grades an agent's timings or costs is a listed loss.
"""

from __future__ import annotations

import re

from .. import promptfoo
from ..common import Converted, Report, is_glob
from . import skills
from .reader import convert_file, folder_like
from .skills import skills_shape

# AgentV's evals written in TypeScript (`*.eval.ts`, `*.eval.mts`), which its `agentv eval` discovers beside
# the YAML ones: their cases exist only once the module runs.
TYPESCRIPT_EVAL = re.compile(r"\.eval\.m?ts$", re.IGNORECASE)


def typescript_eval(path: str) -> str | None:
    """Why an AgentV eval written in TypeScript is not imported; None for any other file."""
    if not TYPESCRIPT_EVAL.search(path):
        return None
    return (
        f"{path}: an AgentV eval written in TypeScript — AgentV runs the module to build its cases, and "
        "Import reads eval files, not code; not imported (write it as an EVAL.yaml to import it)"
    )


def earlier_shape(data: object) -> bool:
    """AgentV's generations before promptfoo's shape: `tests` (a list, or a file of them) with no `prompts`,
    no `providers` and no test `vars` — read here rather than by the promptfoo reader."""
    if not isinstance(data, dict) or {"prompts", "providers"} & set(data):
        return False
    tests = data.get("tests")
    if isinstance(
        tests, str
    ):  # a file of cases, a glob of them, or a folder (`./cases/`, a case.yaml in each)
        return (
            tests.startswith("file://")
            or tests.lower().endswith((".jsonl", ".yaml", ".yml", ".json"))
            or is_glob(tests)
            or folder_like(tests)
        )
    if not isinstance(tests, list) or not tests or "evals" in data:
        return False
    cases = [t for t in tests if isinstance(t, dict)]
    return (
        len(cases) == len(tests)
        and not any("vars" in t for t in cases)
        and all(
            {"input", "input_messages", "criteria", "expected_output", "assertions"} & set(t) for t in cases
        )
    )


def convert(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    if skills_shape(data):  # Agent Skills evals.json, which AgentV runs through its read adapter
        return skills.convert(name, data, files, report)
    if promptfoo.shared_shape(data) and not earlier_shape(data):  # today's format, promptfoo's shape
        return promptfoo.convert_agentv(name, data, files, report)
    return convert_file(name, data, files, report)
