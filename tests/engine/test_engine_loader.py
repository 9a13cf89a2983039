"""Suite loading: valid forms load, the JSON Schema export, and the rules that span a suite.

Run without Django: ``python -m pytest tests/engine/test_engine_loader.py -q -p no:django``.
"""

from __future__ import annotations

import textwrap

import pytest

from engine.loader import load_suite
from engine.schema import CHECK_KEYS, MAX_FOLLOWUP_DEPTH, followup_depth, json_schema
from engine.source import SuiteError
from tests.engine.suite_loading import DEMO, nested_suite, only_problem, suite_text, where

# --- valid suites --------------------------------------------------------------------------------------


def test_demo_mock_example_loads():
    """examples/demo-mock.yaml loads with its three evals, mock rules and system prompt."""
    suite = load_suite(DEMO.read_bytes(), filename="demo-mock.yaml")
    assert suite.name == "demo-follow-ups"
    assert suite.model == "mock"
    assert suite.system == "You are a careful math and geography tutor."
    assert [suite.eval_id(i) for i in range(len(suite.evals))] == ["add", "multiply", "capital"]
    assert suite.mock is not None and len(suite.mock.rules) == 6
    multiply = suite.evals[1]
    assert multiply.checks[0].kind == "match"
    assert multiply.checks[0].prompt.startswith("That answer is incorrect.")
    capital = suite.evals[2]
    assert [item.kind for item in capital.checks] == ["contains", None]
    assert followup_depth(capital.checks) == 2


def test_minimal_suite_and_default_eval_ids():
    """A minimal suite loads; evals without id are eval-<n>."""
    suite = load_suite("name: s\nevals:\n  - prompt: hi\n    checks:\n      - match: '*hi*'\n")
    assert suite.eval_id(0) == "eval-1"
    assert suite.judge is None and suite.system is None


def test_vibecheck_metadata_form_fills_name_model_and_system():
    """vibecheck's metadata: {name, model, system_prompt} fills name, model and system."""
    suite = load_suite(
        suite_text(
            """
            metadata:
              name: multi-turn-example
              model: anthropic/claude-3.5-sonnet
              system_prompt: Be brief.
            evals:
              - prompt: What is 2 + 2?
                checks:
                  - match: "*4*"
            """
        )
    )
    assert (suite.name, suite.model, suite.system) == (
        "multi-turn-example",
        "anthropic/claude-3.5-sonnet",
        "Be brief.",
    )


def test_metadata_agreeing_with_top_level_is_fine():
    """metadata.name equal to name is not a conflict."""
    suite = load_suite(
        "name: same\nmetadata:\n  name: same\nevals:\n  - prompt: q\n    checks:\n      - match: a\n"
    )
    assert suite.name == "same"


def test_seed_000_math_correction_example_loads():
    """The vibecheck-style example, with a nested follow-up and an unquoted colon fixed, loads."""
    suite = load_suite(
        suite_text(
            """
            metadata:
              name: math-correction
              model: anthropic/claude-3.5-sonnet
            evals:
              - prompt: What is 15 * 7?
                checks:
                  - match: "*105*"
                  - prompt: That answer is incorrect. Please recalculate 15 multiplied by 7.
                    checks:
                      - match: "*105*"
                      - prompt: "Hint: 15 * 7 = 10*7 + 5*7. What is the answer?"
                        checks:
                          - match: "*105*"
            """
        )
    )
    assert followup_depth(suite.evals[0].checks) == 2


def test_checks_or_object_form_at_eval_level():
    """checks: {or: [...]} (vibecheck's object form) means a one-item list holding the or block."""
    suite = load_suite(
        suite_text(
            """
            name: s
            evals:
              - prompt: Capital of Australia?
                checks:
                  or:
                    - contains: Canberra
                    - match: "*canberra*"
            """
        )
    )
    checks = suite.evals[0].checks
    assert len(checks) == 1
    assert checks[0].kind == "or"
    assert [member.kind for member in checks[0].or_] == ["contains", "match"]


def test_checks_or_object_form_in_a_followup():
    """A follow-up's checks may also use the {or: [...]} object form."""
    suite = load_suite(
        suite_text(
            """
            name: s
            evals:
              - prompt: q
                checks:
                  - match: "*a*"
                    prompt: again
                    checks:
                      or:
                        - match: "*a*"
                        - match: "*b*"
            """
        )
    )
    followup = suite.evals[0].checks[0]
    assert followup.checks[0].kind == "or"


def test_every_check_type_loads():
    """Each check key of the vocabulary is accepted with its documented value shape."""
    suite = load_suite(
        suite_text(
            """
            name: s
            evals:
              - prompt: q
                checks:
                  - match: "*a*"
                  - not_match: "*b*"
                  - regex: "\\\\d+"
                  - contains: c
                  - equals: d
                  - min_tokens: 1
                  - max_tokens: 100
                  - semantic: {expected: e, threshold: 0.7}
                  - llm_judge: {criteria: f, threshold: 0.6}
                  - field_equals: {path: booking.status, value: confirmed}
                  - field_is_set: booking.id
                  - or: [{match: "*g*"}, {contains: h}]
            """
        )
    )
    kinds = [item.kind for item in suite.evals[0].checks]
    assert kinds == ["match", "not_match", "regex", "contains", "equals", "min_tokens", "max_tokens",
                     "semantic", "llm_judge", "field_equals", "field_is_set", "or"]  # fmt: skip
    assert set(kinds) <= set(CHECK_KEYS)  # every key, one by one: test_engine_checks' registry tests


def test_depth_five_loads():
    """Five follow-up levels below the first prompt are allowed."""
    suite = load_suite(nested_suite(MAX_FOLLOWUP_DEPTH))
    assert followup_depth(suite.evals[0].checks) == 5


def test_utf8_bom_and_non_ascii_text_load():
    """A UTF-8 BOM is accepted and non-ASCII text survives."""
    suite = load_suite(
        "\ufeffname: s\nevals:\n  - prompt: ¿Cómo estás?\n    checks:\n      - match: '*bien*'\n".encode()
    )
    assert suite.evals[0].prompt == "¿Cómo estás?"


# --- JSON Schema ---------------------------------------------------------------------------------------


def test_json_schema_export():
    """json_schema(): a JSON Schema dict with $schema, evals, and every check key including `or`."""
    schema = json_schema()
    assert isinstance(schema, dict)
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert "evals" in schema["properties"]
    assert "evals" in schema["properties"] and "dataset" in schema["properties"]
    check_props = schema["$defs"]["Check"]["properties"]
    for key in (*CHECK_KEYS, "prompt", "checks"):
        assert key in check_props, key
    assert "or_" not in check_props
    assert schema["$defs"]["Check"].get("additionalProperties") is False
    assert schema.get("additionalProperties") is False


def test_json_schema_takes_cache_as_a_boolean_or_the_roles():
    """`cache: true` is valid YAML for the suite, so an editor reading the JSON Schema must accept it too."""
    cache = json_schema()["properties"]["cache"]
    assert {"type": "boolean"} in cache["anyOf"] and {"$ref": "#/$defs/CacheRoles"} in cache["anyOf"]


@pytest.mark.parametrize(
    ("source", "expected", "message"),
    [
        (
            "name: s\nevals:\n  - {id: a, prompt: one, checks: [{contains: x}]}\n"
            "  - id: b\n    prompt: two\n    checks: [{contains: x}]\n"
            "  - id: a\n    prompt: three\n    checks: [{contains: x}]\n",
            (7, 9, "evals[2].id"),
            "id 'a' is taken by evals[0]; ids must be unique",
        ),
        (
            "name: s\ngrader: llm_judge\nevals:\n  - {input: one, ground_truth: x, rubric: Is it x?}\n"
            "  - input: two\n    ground_truth: y\n",
            (5, 5, "evals[1]"),
            "grades with llm_judge but has no `rubric` (nor does the suite)",
        ),
        (
            "name: s\ngrader: regex_match\nevals:\n  - input: one\n    ground_truth: '(['\n",
            (5, 19, "evals[0].ground_truth"),
            "is not a valid regular expression",
        ),
    ],
)
def test_rules_across_evals_are_reported_where_they_are_broken(source, expected, message):
    problem = only_problem(source)
    assert where(problem) == expected
    assert message in problem.message


# --- A suite that would test nothing ------------------------------------------------------------------------

ASKS_NOTHING = [
    (
        "only a system message",
        """
        name: s
        evals:
          - messages:
              - {role: system, content: You are a booking assistant.}
            checks: [{contains: booked}]
        """,
        (4, 7, "evals[0].messages"),
        "asks nothing",
    ),
    (
        "ends on the assistant's turn",
        """
        name: s
        evals:
          - messages:
              - {role: user, content: Book a room.}
              - {role: assistant, content: Booked.}
            checks: [{contains: booked}]
        """,
        (5, 16, "evals[0].messages[1].role"),
        "ends on the assistant's turn",
    ),
    (
        "ends on the assistant's turn, a system message after",
        """
        name: s
        graders:
          polite: {llm_judge: {criteria: Is it polite?}}
        evals:
          - messages:
              - {role: user, content: Book a room.}
              - {role: assistant, content: Booked.}
              - {role: system, content: Be brief.}
        """,
        (7, 16, "evals[0].messages[1].role"),
        "ends on the assistant's turn",
    ),
    (
        "a simulated user with nothing to grade it",
        """
        name: s
        evals:
          - prompt: Book a room.
            simulate:
              persona: a traveller
              max_turns: 4
        """,
        (3, 5, "evals[0]"),
        "nothing grades this conversation",
    ),
]


@pytest.mark.parametrize(("body", "at", "needle"), [case[1:] for case in ASKS_NOTHING],
                         ids=[case[0] for case in ASKS_NOTHING])  # fmt: skip
def test_a_suite_that_would_test_nothing_is_refused_where_it_goes_wrong(body, at, needle):
    problem = only_problem(suite_text(body))
    assert where(problem) == at
    assert needle in problem.message


GRADED_EVERY_WAY = {
    "a conversation tree's checks": "- prompt: Hi\n  checks: [{match: '*hello*'}]",
    "scripted input with checks": "- input: [Hi, Bye]\n  checks: [{contains: bye}]",
    "scripted input with a ground truth (exact_match by default)": "- input: Hi\n  ground_truth: hello",
    "a ground truth and its own grader": "- input: Hi\n  ground_truth: hello\n  grader: contains",
    "a judge grader with a rubric": "- input: Hi\n  ground_truth: hello\n  grader: llm_judge\n  rubric: Is {submission} {ground_truth}?",
    "turns with per-turn checks only": "- turns:\n    - {input: Hi}\n    - {input: Bye, checks: [{contains: bye}]}",
    "turns with the eval's checks": "- turns: [{input: Hi}]\n  checks: [{contains: hi}]",
    "a history ending on a user message": "- messages: [{role: system, content: S}, {role: user, content: Hi}]\n  checks: [{contains: hi}]",
    "a history ending on a tool result": "- messages: [{role: user, content: Hi}, {role: assistant, content: call}, {role: tool, content: '42'}]\n  checks: [{contains: '42'}]",
    "a history with a ground truth": "- messages: [{role: user, content: Hi}]\n  ground_truth: hello",
    "a given reply after an assistant turn": "- messages: [{role: user, content: Hi}, {role: assistant, content: Yo}]\n  reply: Bye\n  checks: [{contains: bye}]",
    "a given reply alone": "- reply: Bye\n  checks: [{contains: bye}]",
    "a history and a prompt after it": "- messages: [{role: system, content: S}]\n  prompt: Hi\n  checks: [{contains: hi}]",
    "a history and input after it": "- messages: [{role: assistant, content: Welcome}]\n  input: Hi\n  checks: [{contains: hi}]",
    "a simulated user with checks": "- prompt: Hi\n  simulate: {persona: a traveller}\n  checks: [{llm_judge: {criteria: helpful}}]",
    "a simulated user with a stop condition": "- prompt: Hi\n  simulate: {persona: a traveller, stop_when: {contains: booked}}",
    "its own named graders": "- input: Hi\n  graders:\n    polite: {llm_judge: {criteria: polite}}",
}


@pytest.mark.parametrize("evals", GRADED_EVERY_WAY.values(), ids=list(GRADED_EVERY_WAY))
def test_every_way_an_eval_grades_stays_valid(evals):
    body = textwrap.indent(evals, "  ")
    suite = load_suite(f"name: s\nmodel: mock\nevals:\n{body}\n")
    assert len(suite.evals) == 1


def test_code_checks_and_code_graders_grade_an_eval():
    files = {"graders.py": "def score(conversation):\n    return 1\n"}
    check = "name: s\nmodel: mock\nevals:\n  - input: Hi\n    checks: [{code: 'graders:score'}]\n"
    assert len(load_suite(check, files=files).evals) == 1
    grader = "name: s\nmodel: mock\ngraders:\n  own: {code: [python3, graders.py]}\nevals:\n  - input: Hi\n"
    assert len(load_suite(grader, files=files).evals) == 1


@pytest.mark.parametrize(
    "evals",
    [
        "- input: Hi",
        "- messages: [{role: user, content: Hi}]",
        "- prompt: Hi\n  simulate: {persona: a traveller}",
        "- reply: Bye",
    ],
)
def test_the_suites_named_graders_grade_an_eval_with_nothing_of_its_own(evals):
    body = textwrap.indent(evals, "  ")
    graders = "graders:\n  polite: {llm_judge: {criteria: polite}}\n"
    suite = load_suite(f"name: s\nmodel: mock\n{graders}evals:\n{body}\n")
    assert len(suite.evals) == 1
    with pytest.raises(SuiteError, match="nothing grades this conversation"):
        load_suite(f"name: s\nmodel: mock\nevals:\n{body}\n")


@pytest.mark.parametrize(
    ("evals", "at"),
    [
        ("- prompt: ''\n  checks: [{contains: x}]", (3, 13, "evals[0].prompt")),
        ("- input: '  '\n  checks: [{contains: x}]", (3, 12, "evals[0].input")),
        ("- input: [Hi, '']\n  checks: [{contains: x}]", (3, 17, "evals[0].input[1]")),
        ("- turns: [{input: '', checks: [{contains: x}]}]", (3, 21, "evals[0].turns[0].input")),
        (
            "- prompt: Hi\n  checks: [{contains: x, prompt: ' ', checks: [{contains: y}]}]",
            (4, 36, "evals[0].checks[0].prompt"),
        ),
        (
            "- prompt: Hi\n  simulate: {follow_ups: [{input: ''}], stop_when: {contains: x}}",
            (4, 37, "evals[0].simulate.follow_ups[0].input"),
        ),
    ],
)
def test_a_blank_user_message_is_refused_where_it_is(evals, at):
    """A blank prompt or input sends the model nothing to answer (and most endpoints refuse it)."""
    body = textwrap.indent(evals, "  ")
    problem = only_problem(f"name: s\nevals:\n{body}\n")
    assert where(problem) == at
    assert "blank" in problem.message
