"""Problems as a suite's author reads them: in line order everywhere, one per place, in the file's words.

pydantic reports a union field once per member ("Input should be a valid string" for a field that also takes
a list) and finds problems in the schema's field order, not the file's line order; neither may reach a user.
"""

from __future__ import annotations

import textwrap

import pytest

from engine.loader import load_suite
from engine.source import SuiteError, SuiteProblem


def problems_of(source: str, files: dict[str, str] | None = None) -> list[SuiteProblem]:
    with pytest.raises(SuiteError) as caught:
        load_suite(textwrap.dedent(source), files=files)
    return caught.value.problems


# --- line order -------------------------------------------------------------------------------------------

# pydantic checks `gates` (declared before `evals`) first and extra keys last: its order is 9, 9, 4, 7, 2.
OUT_OF_ORDER = """\
name: out-of-order
mdoel: mock
evals:
  - prompt: [not, a, string]
    checks:
      - match: "*a*"
      - min_tokens: -1
gates:
  - metric: average
"""
IN_LINE_ORDER = [
    (2, 1, "mdoel"),
    (4, 13, "evals[0].prompt"),
    (7, 21, "evals[0].checks[1].min_tokens"),
    (9, 5, "gates[0].value"),
    (9, 13, "gates[0].metric"),
]


def test_problems_are_in_line_then_column_order():
    assert [(p.line, p.column, p.path) for p in problems_of(OUT_OF_ORDER)] == IN_LINE_ORDER


def test_suite_file_problems_come_before_attached_files_ones():
    source = """\
        name: s
        dataset: rows.jsonl
        evals:
          - prompt: hi
            checks: [{match: "*a*"}]
          - input: hi
            ground_truth: hi
            id: eval-1
        """
    rows = '{"input": 3, "ground_truth": "x"}\n'
    problems = problems_of(source, files={"rows.jsonl": rows})
    assert [(p.file, p.line) for p in problems][-1] == ("rows.jsonl", 1)
    # A problem at the same place keeps the order it was found in; sorting is by place only.
    assert SuiteError([SuiteProblem(3, 1, "b", "x"), SuiteProblem(3, 1, "a", "y")]).problems[0].path == "a"


# --- one problem per union, naming the shapes it accepts --------------------------------------------------

EVAL = "name: s\nevals:\n  - "


@pytest.mark.parametrize(
    ("eval_text", "path", "message"),
    [
        (
            "prompt: hi\n    checks: [{llm_judge: {criteria: 3}}]",
            "evals[0].checks[0].llm_judge.criteria",
            "expected a string, or a list of {name, criteria, weight}; found the number 3 (quote it to make it text)",
        ),
        (
            "prompt: hi\n    checks: [{llm_judge: {criteria: {name: x}}}]",
            "evals[0].checks[0].llm_judge.criteria",
            "expected a string, or a list of {name, criteria, weight}; found a mapping",
        ),
        (
            "input: {a: 1}\n    ground_truth: x",
            "evals[0].input",
            "expected a string, or a list of strings; found a mapping",
        ),
        (
            "input: hi\n    ground_truth: 2024-05-01",
            "evals[0].ground_truth",
            "expected a string, or a list of strings; found the date 2024-05-01 (quote it to make it text)",
        ),
        (
            "messages: [{role: user, content: 3}]",
            "evals[0].messages[0].content",
            "expected a string, or a list of {type, value}; found the number 3 (quote it to make it text)",
        ),
        (
            "prompt: hi\n    simulate: {persona: [a]}",
            "evals[0].simulate.persona[0]",
            "expected a mapping {until_turn, text}; found a string",
        ),
        (
            "prompt: hi\n    simulate: {persona: true}",
            "evals[0].simulate.persona",
            "expected a string, or a list of {until_turn, text}; found `true` (quote it to make it text)",
        ),
        (
            "prompt: hi\n    simulate: {follow_ups: [{input: a, turns: forever}]}",
            "evals[0].simulate.follow_ups[0].turns",
            "expected a whole number, or `inf`; found a string",
        ),
        (
            "prompt: hi\n    simulate: {stop_when: done}",
            "evals[0].simulate.stop_when",
            "expected a condition; found a string",
        ),
        (
            "prompt: hi\n    simulate: {stop_when: {any: {after_turns: 2}}}",
            "evals[0].simulate.stop_when.any",
            "expected a list of conditions; found a mapping",
        ),
        ("prompt: hi\n    checks: match", "evals[0].checks", "expected a list of checks; found a string"),
        (
            "prompt: hi\n    checks: [{or: {match: x}}]",
            "evals[0].checks[0].or",
            "expected a list of checks; found a mapping",
        ),
        (
            "prompt: hi\n    checks: [{llm_judge: polite}]",
            "evals[0].checks[0].llm_judge",
            "expected a mapping {criteria, scale, threshold, scope, model, temperature, messages}; found a string",
        ),
        (
            "input: hi\n    ground_truth: x\n    extractor: 3",
            "evals[0].extractor",
            "expected a name (last_assistant, first_assistant, all_assistant, last_turn, transcript) or a one-key mapping "
            "({pattern, group}, {after_marker}, {json}, {all_assistant: {separator}}, {tool_output}, {tool_arguments}); found the number 3",
        ),
        (
            "input: hi\n    ground_truth: x\n    extractor: {pattern: '(a)', group: [1]}",
            "evals[0].extractor.group",
            "expected a whole number, or a string; found a list",
        ),
    ],
)
def test_a_value_that_fits_no_member_gets_one_problem_naming_the_shapes(eval_text, path, message):
    problems = problems_of(EVAL + eval_text + "\n")
    assert [(p.path, p.message) for p in problems] == [(path, message)]


def test_top_level_type_errors_name_the_shape():
    problems = problems_of("name: s\nmodel: {a: b}\njudge: [x]\nevals: {prompt: hi}\n")
    assert [(p.path, p.message) for p in problems] == [
        ("model", "expected a string; found a mapping"),
        ("judge", "expected a string; found a list"),
        ("evals", "expected a list of evals; found a mapping"),
    ]


def test_a_fraction_for_a_whole_number_names_both():
    problems = problems_of("name: s\niterations: 2.5\nevals: [{input: Hi, ground_truth: hi}]\n")
    assert [(p.path, p.message) for p in problems] == [
        ("iterations", "expected a whole number; found the number 2.5")
    ]


def test_a_number_out_of_bounds_names_the_bound_and_the_number():
    problems = problems_of(
        "name: s\nmax_cost: -1\nmodel_settings: {temperature: 3, max_tokens: 0}\nevals: [{input: Hi, ground_truth: hi}]\n"
    )
    assert [(p.path, p.message) for p in problems] == [
        ("max_cost", "expected a number greater than 0; found the number -1"),
        ("model_settings.temperature", "expected a number at most 2; found the number 3"),
        ("model_settings.max_tokens", "expected a number at least 1; found the number 0"),
    ]


def test_an_extractor_mapping_without_a_known_key_says_how_extractors_are_written():
    """`kind` is filled in from the key an extractor is written with; the file never has it to point at."""
    problems = problems_of(EVAL + "input: hi\n    ground_truth: x\n    extractor: {patern: x}\n")
    assert [(p.path, p.message) for p in problems] == [
        (
            "evals[0].extractor",
            "expected a name (last_assistant, first_assistant, all_assistant, last_turn, transcript) or a one-key mapping "
            "({pattern, group}, {after_marker}, {json}, {all_assistant: {separator}}, {tool_output}, {tool_arguments})",
        ),
        ("evals[0].extractor.patern", "unknown key `patern` (did you mean `pattern`?)"),
    ]


def test_a_value_that_picked_a_member_gets_that_members_precise_problems():
    """A list for `str | list[...]` chose the list: its items' errors are the useful ones, not "a string"."""
    problems = problems_of(EVAL + "prompt: hi\n    simulate: {persona: [{txt: a}]}\n")
    assert [(p.path, p.message) for p in problems] == [
        ("evals[0].simulate.persona[0].text", "`text` is required"),
        ("evals[0].simulate.persona[0].txt", "unknown key `txt` (did you mean `text`?)"),
    ]
    problems = problems_of(EVAL + "input: [a, {b: 1}]\n    ground_truth: x\n")
    assert [(p.path, p.message) for p in problems] == [
        ("evals[0].input[1]", "expected a string; found a mapping")
    ]


def test_an_extractor_name_is_located_at_the_extractor_with_a_hint():
    """`extractor: last_asistant` is read as `{kind: ...}`; the file has no `kind` to point at."""
    problems = problems_of(EVAL + "input: hi\n    ground_truth: x\n    extractor: last_asistant\n")
    assert [p.path for p in problems] == ["evals[0].extractor"]
    assert problems[0].message.endswith("(did you mean `last_assistant`?)")
    # A partial name matches several: no guess.
    problems = problems_of(EVAL + "input: hi\n    ground_truth: x\n    extractor: last\n")
    assert "did you mean" not in problems[0].message


def test_a_dataset_row_gets_the_same_words(tmp_path):
    problems = problems_of(
        "name: s\ndataset: rows.jsonl\n", files={"rows.jsonl": '{"input": 42, "ground_truth": "42"}\n'}
    )
    assert [str(p) for p in problems] == [
        "rows.jsonl:1: input: expected a string, or a list of strings; found the number 42 (quote it to make it text)"
    ]


# --- text cut by a comma in a {...} flow mapping ----------------------------------------------------------

README_CRITERION = """\
name: s
evals:
  - prompt: I want to book a table for two.
    checks:
      - llm_judge:
          criteria:
            - {name: complete, criteria: Confirmed date, time and party size, weight: 2}
"""


def test_a_comma_in_a_flow_mapping_gets_a_quote_hint():
    problems = problems_of(README_CRITERION)
    assert [(p.line, p.column, p.path, p.message) for p in problems] == [
        (
            7,
            58,
            "evals[0].checks[0].llm_judge.criteria[0].time and party size",
            "unknown key `time and party size`; quote the text: a comma inside {...} starts a new key",
        )
    ]
    quoted = README_CRITERION.replace(
        "Confirmed date, time and party size", '"Confirmed date, time and party size"'
    )
    assert load_suite(quoted).evals[0].checks[0].llm_judge.criteria[0].weight == 2


@pytest.mark.parametrize(
    "criterion",
    [
        "{name: complete, criteria: Confirmed, weight: 2, tone}",  # one word: a plain typo, no cut text
        "{name: complete, criteria: Confirmed, party size: 2}",  # has a value: a key, not cut text
    ],
)
def test_no_quote_hint_for_a_plain_unknown_key_in_a_flow_mapping(criterion):
    problems = problems_of(README_CRITERION.replace(README_CRITERION.splitlines()[-1].strip("- "), criterion))
    assert len(problems) == 1 and "unknown key" in problems[0].message and "quote" not in problems[0].message


def test_no_quote_hint_in_a_block_mapping():
    source = README_CRITERION.replace(
        "- {name: complete, criteria: Confirmed date, time and party size, weight: 2}",
        "- name: complete\n              criteria: Confirmed date\n              time and party size:",
    )
    problems = problems_of(source)
    assert [p.message for p in problems] == ["unknown key `time and party size`"]
