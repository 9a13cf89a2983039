"""Which tool's suite format a parsed file has: the shapes Import recognises (docs/imports.md's table)."""

from __future__ import annotations

from .agentv import earlier_shape, skills_shape
from .boltfoundry import sample_shape
from .promptfoo import agentv_flavour, shared_shape

AGENTV_TEST_KEYS = {"input", "input_messages", "criteria", "expected_output", "assertions", "turns"}


def looks_like(data: object) -> str | None:
    """The tool whose suite format `data` (a parsed YAML or TOML file, or JSONL rows) has, or None."""
    if sample_shape(data):  # calibrate's samples (TOML tables or JSONL rows) or a deck's contexts
        return "calibrate"
    if not isinstance(data, dict):
        return None
    if skills_shape(data):  # Agent Skills evals.json: `evals` of `prompt`, which vibecheck's shape has too
        return "agentv"
    if _agtlantis(data):
        return "agtlantis"
    schema = data.get("$schema")
    if (
        (isinstance(schema, str) and schema.startswith("agentv-eval"))
        or isinstance(data.get("evalcases"), list)
        or isinstance(data.get("testcases"), list)  # AgentV's first format
    ):
        return "agentv"
    if earlier_shape(data):  # AgentV before it took promptfoo's shape: no prompts, no providers, no vars
        return "agentv"
    if shared_shape(data):  # promptfoo's shape, which today's AgentV shares
        return "agentv" if agentv_flavour(data) else "promptfoo"
    tests = data.get("tests")  # AgentV: `tests` of input / criteria / expected_output / assertions
    if (
        isinstance(tests, list)
        and tests
        and "evals" not in data
        and "prompts" not in data  # promptfoo's shape, which today's AgentV shares
        and "providers" not in data
        and all(
            (isinstance(t, dict) and (AGENTV_TEST_KEYS & set(t)))
            or (isinstance(t, str) and t.startswith("file://"))
            for t in tests
        )
    ):
        return "agentv"
    letta_keys = ("graders", "grader", "gate", "target", "reward")
    if isinstance(data.get("dataset"), str) and any(isinstance(data.get(key), dict) for key in letta_keys):
        return "letta"
    evals = data.get("evals")
    if isinstance(data.get("metadata"), dict) and ("evals" in data):
        return "vibecheck"
    if (
        isinstance(evals, list)
        and evals
        and all(isinstance(ev, dict) and ("prompt" in ev or "conditionals" in ev) for ev in evals)
    ):
        return "vibecheck"
    return None


def _agtlantis(data: dict) -> bool:
    """@agtlantis/eval's eval file: `agent` (a name in its config) and `cases`, each with an `input` object."""
    cases = data.get("cases")
    if not isinstance(cases, list) or "evals" in data or "tests" in data:
        return False
    if isinstance(data.get("agent"), str):
        return True
    return bool(cases) and all(
        isinstance(case, dict) and isinstance(case.get("input"), dict) for case in cases
    )
