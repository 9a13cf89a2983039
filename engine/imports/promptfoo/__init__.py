"""promptfoo configuration (promptfooconfig.yaml) and today's AgentV eval files, which share its shape
(`prompts`, `providers`, `tests` of `vars` + `assert`, `defaultTest`), → evalsite. One reader serves both;
`convert_agentv` chooses AgentV's meanings where the two differ.

- Each test, for each prompt, is one eval: the prompt rendered with the test's variables (a chat prompt, or
  AgentV's `{{ input }}` holding messages, gives the history; its last user message is sent live).
- Its assertions are named graders of the eval (asserts.py, judges.py, code.py). promptfoo passes a test
  when every assertion passes, or, with a `threshold`, when their weighted mean reaches it; AgentV when the
  weighted mean reaches its threshold (AgentV's default unless told) and no `required` item failed. Both become
  the eval's `pass_rule`.
- promptfoo's multi-turn tests (a prompt using `_conversation`; one conversation per
  `metadata.conversationId`) and AgentV's `mode: conversation` become `turns`: every scripted user message is
  sent, each graded by its own checks.
- `evaluateOptions.repeat`, AgentV's `repeat` / `trials` → `iterations` with the pass rate the tool's
  strategy means (pass_any: any one of the k runs).
- Providers are noted: evalsite tests the suite's `model`.

Plain Python: no Django here.
"""

from __future__ import annotations

from ..common import Converted, Report
from .reader import Reader
from .render import only_variable


def convert(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    return Reader(name, data, files, report, agentv=False).run()


def convert_agentv(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    return Reader(name, data, files, report, agentv=True).run()


# --- recognising the shape ---------------------------------------------------------------------------------

SHAPE_KEYS = ("prompts", "providers", "defaultTest", "default_test", "evaluateOptions", "evaluate_options")
AGENTV_KEYS = ("default_test", "evaluate_options", "execution", "target", "targets", "workspace", "environment", "assert",
               "governance")  # fmt: skip
AGENTV_TEST_KEYS = (
    "id",
    "mode",
    "turns",
    "criteria",
    "input",
    "expected_output",
    "execution",
    "conversation_id",
)
AGENTV_TYPES = ("llm-grader", "code-grader", "script", "tool-trajectory", "trajectory", "composite", "field-accuracy",
                "execution-metrics", "rubrics", "skill-trigger", "skill-used", "token-usage")  # fmt: skip


def shared_shape(data: object) -> bool:
    """Whether `data` has promptfoo's shape (today's AgentV has it too): `tests` of `vars` / `assert` items or
    in files, beside `prompts`, `providers` or `defaultTest`."""
    if not isinstance(data, dict) or "evalcases" in data:
        return False
    tests = data.get("tests")
    items = tests if isinstance(tests, list) else []
    if any(isinstance(t, dict) and ("assertions" in t or "input_messages" in t) for t in items):
        return False  # AgentV's earlier generations
    if not (items or isinstance(tests, str) or isinstance(data.get("scenarios"), list)):
        return False
    if any(key in data for key in SHAPE_KEYS):
        return True
    return any(
        (isinstance(t, dict) and ("vars" in t or "assert" in t)) or (isinstance(t, str) and _is_test_file(t))
        for t in items
    ) or (isinstance(tests, str) and _is_test_file(tests))


def agentv_flavour(data: dict) -> bool:
    """Whether a file of the shared shape is AgentV's: its own keys, test keys, assertion types, plain-string
    assertions, or its one `{{ input }}` prompt."""
    schema = data.get("$schema")
    if isinstance(schema, str) and "agentv" in schema.lower():
        return True
    if any(key in data for key in AGENTV_KEYS):
        return True
    prompts = data.get("prompts")
    if isinstance(prompts, list) and len(prompts) == 1 and only_variable(str(prompts[0])) == "input":
        return True
    tests = data.get("tests") if isinstance(data.get("tests"), list) else []
    for test in tests:
        if not isinstance(test, dict):
            continue
        if any(key in test for key in AGENTV_TEST_KEYS):
            return True
        for item in test.get("assert") or [] if isinstance(test.get("assert"), list) else []:
            if isinstance(item, str) or (isinstance(item, dict) and item.get("type") in AGENTV_TYPES):
                return True
    return False


def _is_test_file(text: str) -> bool:
    return text.strip().lower().endswith((".csv", ".yaml", ".yml", ".json", ".jsonl")) or text.startswith(
        "file://"
    )
