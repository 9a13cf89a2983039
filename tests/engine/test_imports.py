"""Import: detecting a file's format, bad input, and what every importer shares."""

from __future__ import annotations

import pytest

from engine.imports import ImportError_, ImportProblem, convert, detect
from engine.loader import load_suite
from tests.engine.import_fixtures import CALIBRATE_TOML, folder, has, one

# --- detection and bad input ---------------------------------------------------------------------------------

# "Billion laughs": ten aliases of ten aliases of ... a list of ten.
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{new}: &{new} [{', '.join([f'*{old}'] * 10)}]\n"
    for old, new in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize(
    ("files", "message"),
    [
        ({}, "no files"),
        ({"suite.yaml": "name: [unclosed\n"}, r"suite.yaml is not valid YAML \(line 2"),
        ({"suite.yaml": "- just\n- a list\n"}, "this is not a format Import knows"),
        ({"notes.yaml": "title: Meeting notes\nattendees: 3\n"}, "this is not a format Import knows"),
        (
            {"data.jsonl": '{"input": "a"}\n', "rows.csv": "input\na\n"},
            "no suite file among data.jsonl, rows.csv",
        ),
        ({"suite.yaml": "name: mine\nmodel: mock\ndataset: rows.jsonl\n"}, "already an evalsite suite"),
        (
            {"a.yaml": "evals:\n  - prompt: hi\n    checks: [{match: '*'}]\n", "b.yaml": "evalcases: []\n"},
            "several suite files",
        ),
        ({"bomb.yaml": BOMB}, "too large once its aliases are expanded"),
    ],
)
def test_detect_rejects_junk_with_a_clear_message(files, message):
    with pytest.raises(ImportProblem, match=message):
        detect(files)
    with pytest.raises(ImportError_, match=message):
        convert(files)


def test_a_forced_kind_must_match_the_file():
    with pytest.raises(ImportProblem, match="multi-turn.yaml is a vibecheck file, not a Letta Evals one"):
        convert(one("vibecheck/multi-turn.yaml"), kind="letta")
    with pytest.raises(ImportProblem, match="unknown kind"):
        convert(one("vibecheck/multi-turn.yaml"), kind="deepeval")
    assert convert(one("vibecheck/multi-turn.yaml"), kind="vibecheck").kind == "vibecheck"


def test_uploaded_files_the_suite_does_not_use_are_reported():
    files = {**folder("letta-per-turn"), "README.md": "# notes"}
    assert has(convert(files).unmapped, "README.md: uploaded, but the suite does not refer to it")


def test_a_calibrate_toml_becomes_a_calibration_set_with_its_old_form_converted():
    from engine.calibration import CalibrationSuite
    from engine.loader import load_suite

    result = convert({"politeness.toml": CALIBRATE_TOML})
    assert result.kind == "calibrate" and result.complete
    suite = load_suite(result.source, files=result.files)
    assert isinstance(suite, CalibrationSuite)
    first, legacy = suite.calibration.samples
    assert first.tags == ("math",) and first.expected_score == 3.0
    assert legacy.messages == [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Go away"}]
    assert any("userMessage / assistantResponse" in line and "1 sample" in line for line in result.mapped)
    assert suite.calibration.spec.scale == "-3..3"
    assert any("the grader" in line for line in result.unmapped)  # the judge's criteria are left to write


@pytest.mark.parametrize(
    "files",
    [{"x.toml": "title = 'notes'\n"}, {"x.toml": "[[samples]\n"}, {"notes.yaml": "title: Meeting notes\n"}],
)
def test_a_file_import_does_not_know_says_which_formats_it_reads(files):
    with pytest.raises(ImportProblem) as caught:
        convert(files)
    message = str(caught.value)
    assert "calibrate TOML" in message or "not valid TOML" in message


def test_refusals_name_the_tool_with_its_article():
    with pytest.raises(ImportProblem) as shape:
        convert({"x.yaml": "foo: 1\n"}, "agtlantis")
    assert str(shape.value).startswith("x.yaml is not an agtlantis suite: expected `agent` and `cases`")
    agentv = "tests:\n  - id: a\n    input: hi\n    criteria: says hi\n"
    with pytest.raises(ImportProblem) as other:
        convert({"e.yaml": agentv}, "vibecheck")
    assert str(other.value) == "e.yaml is an AgentV file, not a vibecheck one: choose “auto-detect”"


def test_promptfoo_python_assertions_of_one_name_in_two_folders_import_as_two_modules():
    from engine.imports import convert_all

    config = (
        "prompts: ['{{q}}']\nproviders: [openai:gpt-4o]\ntests:\n  - vars: {q: hi}\n    assert:\n"
        "      - {type: python, value: 'file://a/check.py'}\n      - {type: python, value: 'file://b/check.py'}\n"
    )
    passes, fails = "def get_assert(o, c):\n    return True\n", "def get_assert(o, c):\n    return False\n"
    result = convert_all({"promptfooconfig.yaml": config, "a/check.py": passes, "b/check.py": fails}).results[
        0
    ]
    assert result.files == {"check.py": passes, "check_2.py": fails}
    graders = load_suite(result.source, files=result.files).evals[0].graders
    assert sorted(grader.check.code.function for grader in graders.values()) == [
        "check:get_assert",
        "check_2:get_assert",
    ]
