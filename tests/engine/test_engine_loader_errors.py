"""Suite loading: every bad input is a SuiteError located by line, column and path.

Run without Django: ``python -m pytest tests/engine/test_engine_loader_errors.py -q -p no:django``.
"""

from __future__ import annotations

import pytest

from engine.loader import load_suite
from engine.source import MAX_SUITE_BYTES, SuiteError, format_path
from tests.engine.suite_loading import nested_suite, only_problem, problems_of, suite_text, where

# --- located errors ------------------------------------------------------------------------------------


def test_invalid_yaml_unclosed_bracket():
    """An unclosed flow sequence is invalid YAML at the point the parser noticed, 1-based."""
    problem = only_problem(
        suite_text(
            """
            name: s
            evals:
              - prompt: hi
                checks: [{match: a}
              - prompt: b
            """
        )
    )
    assert where(problem) == (5, 3, "")
    assert problem.message.startswith("invalid YAML:")
    assert "flow sequence" in problem.message


def test_invalid_yaml_unclosed_bracket_at_end_of_file():
    """An unclosed bracket running to the end of the file is reported at the end, still 1-based."""
    problem = only_problem("name: s\nevals: [\n  {prompt: a, checks: [{match: b}]\n")
    assert where(problem) == (4, 1, "")
    assert "invalid YAML" in problem.message


def test_wrong_type_prompt_list():
    """prompt: [1, 2] is a type error at the value, with the path evals[0].prompt."""
    problem = only_problem("name: s\nevals:\n  - prompt: [1, 2]\n    checks:\n      - match: a\n")
    assert where(problem) == (3, 13, "evals[0].prompt")
    assert problem.message == "expected a string; found a list"


def test_wrong_type_min_tokens():
    """min_tokens: "many" is a type error located at the value."""
    problem = only_problem(
        suite_text(
            """
            name: s
            evals:
              - prompt: hi
                checks:
                  - match: a
                  - min_tokens: many
            """
        )
    )
    assert where(problem) == (6, 21, "evals[0].checks[1].min_tokens")
    assert problem.message == "expected a whole number; found a string"


CACHE_ACCEPTS = "expected true, false, or a mapping {model, judge, simulated_user, repeats}"


@pytest.mark.parametrize(
    ("value", "found"), [("maybe", "a string"), ("[model]", "a list"), ("1", "the number 1")]
)
def test_a_cache_of_another_kind_says_it_takes_a_boolean_or_the_roles(value, found):
    """`cache` takes a boolean as well as the mapping: the message names both, not the mapping alone."""
    problem = only_problem(f"name: s\ncache: {value}\nevals:\n  - prompt: hi\n    checks: [{{match: a}}]\n")
    assert where(problem) == (2, 8, "cache")
    assert problem.message == f"{CACHE_ACCEPTS}; found {found}"


def test_generation_settings_of_another_kind_are_named_as_such_at_suite_and_eval_level():
    """`model_settings` (and the judge's and the user's) name what they take in the suite's words, never the
    class behind them ("a modelsettings")."""
    problems = problems_of(
        suite_text(
            """
            name: s
            model_settings: hot
            judge_settings: [0.2]
            evals:
              - prompt: hi
                model_settings: 3
                checks: [{match: a}]
            """
        )
    )
    assert [where(problem) for problem in problems] == [
        (2, 17, "model_settings"),
        (3, 17, "judge_settings"),
        (6, 21, "evals[0].model_settings"),
    ]
    for problem, found in zip(problems, ("a string", "a list", "the number 3"), strict=True):
        assert problem.message == (
            "expected a mapping of generation settings (temperature, max_tokens, top_p, seed, stop, "
            f"response_format, …); found {found}"
        )


def test_negative_min_tokens_rejected():
    """min_tokens below zero is rejected at its path."""
    problem = only_problem("name: s\nevals:\n  - prompt: hi\n    checks:\n      - min_tokens: -1\n")
    assert problem.path == "evals[0].checks[0].min_tokens"


def test_invalid_regex_rejected_at_load():
    """A regex that does not compile is a load error, not a run-time crash."""
    problem = only_problem("name: s\nevals:\n  - prompt: hi\n    checks:\n      - regex: '('\n")
    assert where(problem) == (5, 16, "evals[0].checks[0].regex")
    assert problem.message.startswith("invalid regular expression")


def test_unknown_key_with_did_you_mean():
    """A near-miss key (promt) is an unknown key at the key's position, with a "did you mean" hint."""
    problems = problems_of("name: s\nevals:\n  - promt: hi\n    checks:\n      - match: a\n")
    unknown = [p for p in problems if p.path == "evals[0].promt"]
    assert len(unknown) == 1
    assert (unknown[0].line, unknown[0].column) == (3, 5)
    assert unknown[0].message == "unknown key `promt` (did you mean `prompt`?)"
    assert len(problems) == 1  # promt is the only problem reported; the eval is not also "missing" a prompt


def test_unknown_key_without_a_close_match_has_no_hint():
    """A key far from any known key is unknown, with no hint."""
    problem = only_problem(
        "name: s\nflavour: vanilla\nevals:\n  - prompt: q\n    checks:\n      - match: a\n"
    )
    assert where(problem) == (2, 1, "flavour")
    assert problem.message == "unknown key `flavour`"


def test_unknown_key_inside_a_check_and_an_or_list():
    """Unknown keys deep inside checks and or-lists are located with their full path."""
    problem = only_problem(
        suite_text(
            """
            name: s
            evals:
              - prompt: q
                checks:
                  - or:
                      - match: a
                      - mach: b
            """
        )
    )
    assert where(problem) == (7, 13, "evals[0].checks[0].or[1].mach")
    assert "did you mean `match`" in problem.message


def test_error_inside_or_object_form_is_reported():
    """An error inside checks: {or: [...]} is reported with a path through the or-list."""
    problem = only_problem(
        "name: s\nevals:\n  - prompt: q\n    checks:\n      or:\n        - match: a\n        - mach: b\n"
    )
    assert problem.path.endswith("or[1].mach")
    assert "did you mean `match`" in problem.message


def test_error_inside_or_object_form_is_located_at_the_item():
    """With the object form, the unknown key `mach` on line 7 column 11 is located there."""
    problem = only_problem(
        "name: s\nevals:\n  - prompt: q\n    checks:\n      or:\n        - match: a\n        - mach: b\n"
    )
    assert (problem.line, problem.column) == (7, 11)


def test_unknown_key_in_llm_judge_spec():
    """A typo inside an llm_judge mapping is located inside it."""
    problem = only_problem(
        "name: s\nevals:\n  - prompt: q\n    checks:\n      - llm_judge: {criteria: c, treshold: 0.5}\n"
    )
    assert problem.path == "evals[0].checks[0].llm_judge.treshold"
    assert problem.line == 5
    assert "did you mean `threshold`" in problem.message


def test_depth_six_is_rejected_at_the_level_six_prompt():
    """A sixth follow-up level is an error naming the level-6 prompt's path, line and column."""
    problem = only_problem(nested_suite(6))
    assert problem.path == "evals[0]" + ".checks[0]" * 6 + ".prompt"
    assert problem.path == "evals[0].checks[0].checks[0].checks[0].checks[0].checks[0].checks[0].prompt"
    # level 6's item starts on line 20; its prompt key is on line 21, indented 6 + 4*5 + 2 spaces
    assert (problem.line, problem.column) == (21, 29)
    assert "at most 5 levels" in problem.message
    assert "level 6" in problem.message


def test_depth_counts_followups_inside_or_lists():
    """Follow-ups inside an or-list count toward the depth like any other follow-up."""
    lines = nested_suite(5).splitlines()
    # Wrap the deepest check list in a follow-up carried by an or member: level 6.
    last = lines[-1]
    indent = last[: len(last) - len(last.lstrip())]
    lines[-1:] = [
        f"{indent}- or:",
        f"{indent}    - match: '*a*'",
        f"{indent}      prompt: p6",
        f"{indent}      checks:",
        f"{indent}        - match: '*a*'",
    ]
    text = "\n".join(lines) + "\n"
    problem = only_problem(text)
    assert problem.path == "evals[0]" + ".checks[0]" * 5 + ".checks[0].or[0].prompt"
    assert "level 6" in problem.message


def test_anchor_and_alias_rejected():
    """Anchors (&a) and aliases (*a) are errors located at each."""
    problems = problems_of("name: s\nevals:\n  - prompt: &a hi\n    checks:\n      - match: *a\n")
    assert [(p.line, p.column) for p in problems] == [(3, 13), (5, 16)]
    assert "anchor &a" in problems[0].message
    assert "alias *a" in problems[1].message


def test_merge_key_rejected():
    """A merge key (<<) is rejected (anchors with it)."""
    problems = problems_of("name: s\nbase: &b {prompt: q}\nevals:\n  - <<: *b\n    checks: [{match: a}]\n")
    assert any("anchor &b" in p.message for p in problems)


def test_file_over_one_megabyte_bytes():
    """More than 1 MB of bytes is refused before parsing, as a whole-file problem."""
    data = b"name: s\n# " + b"a" * MAX_SUITE_BYTES + b"\n"
    problem = only_problem(data)
    assert (problem.line, problem.column, problem.path) == (0, 0, "")
    assert "larger than 1 MB" in problem.message
    assert str(problem).startswith("file (top level):")


def test_file_over_one_megabyte_str_counts_utf8_bytes():
    """A str is measured in UTF-8 bytes: 500,001 two-byte characters are over 1 MB."""
    text = "name: s\n# " + "é" * 500_001 + "\n"
    assert len(text) < MAX_SUITE_BYTES
    problem = only_problem(text)
    assert "larger than 1 MB" in problem.message


def test_file_at_exactly_one_megabyte_is_parsed():
    """Exactly MAX_SUITE_BYTES is not too big (the next problem is the missing evals)."""
    head = b"name: s\nevals:\n  - prompt: q\n    checks:\n      - match: a\n# "
    data = head + b"a" * (MAX_SUITE_BYTES - len(head))
    assert len(data) == MAX_SUITE_BYTES
    assert load_suite(data).name == "s"


def test_non_utf8_bytes_located():
    """Bytes that are not UTF-8 are refused with the line and column of the bad byte."""
    problem = only_problem(b"name: s\nevals:\n  - prompt: h\xffi\n    checks:\n      - match: a\n")
    assert (problem.line, problem.column) == (3, 14)
    assert "not UTF-8" in problem.message
    assert "0xff" in problem.message


def test_non_utf8_byte_on_first_line():
    """A bad byte on line 1 column 1 is located there."""
    problem = only_problem(b"\xfename: s\n")
    assert (problem.line, problem.column) == (1, 1)


def test_duplicate_key_top_level():
    """A duplicate key is an error at the second occurrence."""
    problem = only_problem("name: a\nname: b\nevals:\n  - prompt: q\n    checks:\n      - match: a\n")
    assert where(problem) == (2, 1, "name")
    assert problem.message == "duplicate key `name`"


def test_duplicate_key_nested():
    """A duplicate key inside a check item is located with its full path."""
    problem = only_problem(
        "name: s\nevals:\n  - prompt: q\n    checks:\n      - match: a\n        match: b\n"
    )
    assert where(problem) == (6, 9, "evals[0].checks[0].match")


@pytest.mark.parametrize("text", ["", "   \n", "# only a comment\n", b""])
def test_empty_file(text):
    """An empty (or comment-only) file is one clear error."""
    problem = only_problem(text)
    assert (problem.line, problem.column) == (1, 1)
    assert "empty" in problem.message


def test_top_level_list():
    """A top-level list is not a suite."""
    problem = only_problem("- prompt: q\n  checks:\n    - match: a\n")
    assert (problem.line, problem.column) == (1, 1)
    assert "mapping" in problem.message


def test_top_level_scalar():
    """A top-level string is not a suite."""
    assert "mapping" in only_problem("just words\n").message


def test_two_check_keys_in_one_item():
    """Two check keys in one item is an error naming both, at the item."""
    problem = only_problem(
        suite_text(
            """
            name: s
            evals:
              - prompt: q
                checks:
                  - match: a
                    contains: b
            """
        )
    )
    assert where(problem) == (5, 9, "evals[0].checks[0]")
    assert "match and contains" in problem.message
    assert "one check per item" in problem.message


def test_followup_prompt_without_checks():
    """A check item with a prompt but no checks is an error: a follow-up needs both."""
    problem = only_problem(
        "name: s\nevals:\n  - prompt: q\n    checks:\n      - match: a\n        prompt: again\n"
    )
    assert where(problem) == (5, 9, "evals[0].checks[0]")
    assert "needs both `prompt` and `checks`" in problem.message


def test_followup_checks_without_prompt():
    """A check item with checks but no prompt is also an error."""
    problem = only_problem(
        "name: s\nevals:\n  - prompt: q\n    checks:\n      - match: a\n        checks: [{match: b}]\n"
    )
    assert "needs both `prompt` and `checks`" in problem.message


def test_eval_prompt_without_checks():
    """An eval with a prompt and no checks is an error at the eval."""
    problem = only_problem("name: s\nevals:\n  - prompt: q\n")
    assert where(problem) == (3, 5, "evals[0]")
    assert problem.message == "a `prompt` conversation needs `checks`"


def test_eval_level_with_only_followups():
    """An eval whose checks are only follow-ups (no check to fail) is an error."""
    problem = only_problem(
        suite_text(
            """
            name: s
            evals:
              - prompt: q
                checks:
                  - prompt: again
                    checks:
                      - match: a
            """
        )
    )
    assert where(problem) == (3, 5, "evals[0]")
    assert "at least one check" in problem.message


def test_followup_level_with_only_followups():
    """A follow-up whose checks hold only another follow-up is an error at that follow-up."""
    problem = only_problem(
        suite_text(
            """
            name: s
            evals:
              - prompt: q
                checks:
                  - match: z
                  - prompt: again
                    checks:
                      - prompt: more
                        checks:
                          - match: a
            """
        )
    )
    assert where(problem) == (6, 9, "evals[0].checks[1]")
    assert "at least one check" in problem.message


def test_empty_check_item():
    """An empty mapping in checks is an error listing the check keys."""
    problem = only_problem("name: s\nevals:\n  - prompt: q\n    checks:\n      - {}\n")
    assert problem.path == "evals[0].checks[0]"
    assert "empty check" in problem.message


def test_metadata_name_conflicting_with_name():
    """name and metadata.name that disagree are one error naming both keys."""
    problem = only_problem(
        "name: x\nmetadata:\n  name: y\nevals:\n  - prompt: q\n    checks:\n      - match: a\n"
    )
    assert "`name` and `metadata.name` disagree" in problem.message
    assert problem.line >= 1 and problem.column >= 1


def test_metadata_conflict_is_located_at_the_metadata_key():
    """The conflict error points at the conflicting metadata key (line 3, column 3, path metadata.name)."""
    problem = only_problem(
        "name: x\nmetadata:\n  name: y\nevals:\n  - prompt: q\n    checks:\n      - match: a\n"
    )
    assert where(problem) == (3, 3, "metadata.name")


def test_missing_name():
    """A suite without name or metadata.name is refused."""
    problem = only_problem("evals:\n  - prompt: q\n    checks:\n      - match: a\n")
    assert (problem.line, problem.column) == (1, 1)
    assert "needs a `name`" in problem.message


def test_missing_evals_and_empty_evals():
    """A suite without evals (and no dataset), or with an empty list, is refused."""
    for text in ("name: s\n", "name: s\nevals: []\n"):
        problem = only_problem(text)
        assert where(problem) == (1, 1, "")
        assert problem.message == "a suite needs `evals` or a `dataset`"


def test_every_problem_is_reported_at_once():
    """Several independent errors are all listed, each with its own location."""
    problems = problems_of(
        suite_text(
            """
            name: s
            evals:
              - prompt: q
                checks:
                  - min_tokens: lots
              - prompt: [x]
                checks:
                  - match: a
            """
        )
    )
    assert {p.path for p in problems} == {"evals[0].checks[0].min_tokens", "evals[1].prompt"}


def test_suite_error_str_has_filename_line_column_and_path():
    """str(SuiteError) reads filename:line:column path: message, one problem a line."""
    with pytest.raises(SuiteError) as info:
        load_suite("name: s\nevals:\n  - prompt: [1]\n    checks:\n      - match: a\n", filename="my.yaml")
    assert info.value.filename == "my.yaml"
    assert str(info.value) == "my.yaml:3:13 evals[0].prompt: expected a string; found a list"


def test_suite_error_filename_attribute_for_yaml_errors():
    """Parse-level errors (empty, invalid YAML, not UTF-8, too big) carry the filename attribute."""
    for data in ("", "a: [", b"\xff", b"#" * (MAX_SUITE_BYTES + 1)):
        with pytest.raises(SuiteError) as info:
            load_suite(data, filename="bad.yaml")
        assert info.value.filename == "bad.yaml"


def test_suite_error_str_uses_filename_for_yaml_errors():
    """Parse-level errors print the given filename, like validation errors do."""
    with pytest.raises(SuiteError) as info:
        load_suite("", filename="empty.yaml")
    assert str(info.value).startswith("empty.yaml:1:1 (top level): ")


def test_problem_as_dict():
    """SuiteProblem.as_dict gives the API/editor shape."""
    problem = only_problem("name: a\nname: b\nevals: []\n")
    assert problem.as_dict() == {
        "line": 2, "column": 1, "path": "name", "message": "duplicate key `name`", "file": ""
    }  # fmt: skip


def test_format_path():
    """format_path joins keys with dots and indexes with brackets."""
    assert format_path(("evals", 2, "checks", 1, "prompt")) == "evals[2].checks[1].prompt"
    assert format_path(()) == ""
    assert format_path(("name",)) == "name"
