"""Datasets (Letta's row format): JSONL and CSV rows become evals; a bad file is refused whole, each problem
named by its line; through the engine (load_suite, preview) and through saving a suite version.
"""

from __future__ import annotations

import json
import time

import pytest

from engine.datasets import MAX_REPORTED, preview, rows_to_evals
from engine.loader import load_saved_suite, load_suite
from engine.source import SuiteError

SUITE = "name: capitals\ngrader: contains\ndataset: capitals.jsonl\n"
ROWS = [
    {"id": "europe", "input": ["France?", "Germany?"], "ground_truth": ["Paris", "Berlin"], "tags": ["eu"]},
    {"input": "Japan?", "ground_truth": "Tokyo"},
    {"input": "Spain?", "ground_truth": "Madrid", "rubric": "Is {submission} {ground_truth}?"},
]


def jsonl(rows) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def problems_of(name: str, text: str, **kwargs) -> list[tuple[int, str]]:
    evals, problems = rows_to_evals(name, text, **kwargs)
    assert evals == [], "a dataset with problems loads nothing"
    return [(problem.line, problem.message) for problem in problems]


def load_problems(text: str, name: str = "capitals.jsonl", suite: str = SUITE) -> list:
    with pytest.raises(SuiteError) as info:
        load_suite(suite.replace("capitals.jsonl", name), files={name: text})
    return info.value.problems


# --- rows become evals ------------------------------------------------------------------------------------


def test_jsonl_rows_become_evals():
    evals, problems = rows_to_evals("capitals.jsonl", jsonl(ROWS))
    assert problems == []
    assert [ev.model_dump(exclude_none=True, exclude_defaults=True) for ev in evals] == ROWS
    assert [ev.style for ev in evals] == ["scripted"] * 3


def test_csv_rows_become_evals():
    text = (
        "id,input,ground_truth,tags,rubric\n"
        'europe,"[""France?"", ""Germany?""]","[""Paris"", ""Berlin""]",eu,\n'
        'japan,Japan?,Tokyo,"asia, island",\n'
        '"comma, id","Hello, world?","Hi, there",,Say {submission}\n'
    )
    evals, problems = rows_to_evals("capitals.csv", text)
    assert problems == []
    assert [(ev.id, ev.input, ev.ground_truth, ev.tags, ev.rubric) for ev in evals] == [
        ("europe", ["France?", "Germany?"], ["Paris", "Berlin"], ["eu"], None),
        ("japan", "Japan?", "Tokyo", ["asia", "island"], None),
        ("comma, id", "Hello, world?", "Hi, there", [], "Say {submission}"),
    ]


def test_rows_may_carry_a_history_before_their_input():
    """A row's `messages` (e.g. the facts its conversation starts from, as a system message) come before its
    input, in JSONL and, as JSON, in a CSV cell."""
    facts = [{"role": "system", "content": "Nora plays the violin."}]
    row = {"input": "Who plays the violin?", "ground_truth": "Nora", "messages": facts}
    evals, problems = rows_to_evals("facts.jsonl", jsonl([row]))
    assert problems == [] and [m.model_dump(exclude_none=True) for m in evals[0].messages] == facts
    cell = json.dumps(facts).replace('"', '""')
    evals, problems = rows_to_evals("facts.csv", f'input,ground_truth,messages\nWho?,Nora,"{cell}"\n')
    assert problems == [] and evals[0].messages[0].content == "Nora plays the violin."


def test_csv_text_that_only_looks_like_a_list_stays_text():
    evals, _ = rows_to_evals("d.csv", 'input,ground_truth\n"[citation needed] who?",[x\n')
    assert (evals[0].input, evals[0].ground_truth) == ("[citation needed] who?", "[x")


def test_dataset_rows_are_appended_after_the_suite_evals_with_ids():
    source = SUITE + "evals:\n  - id: own\n    input: Italy?\n    ground_truth: Rome\n"
    suite = load_suite(source, files={"capitals.jsonl": jsonl(ROWS)})
    assert [suite.eval_id(i) for i in range(len(suite.evals))] == ["own", "europe", "row-2", "row-3"]
    assert suite.files_used() == ["capitals.jsonl"]
    saved = load_saved_suite(source, {"capitals.jsonl": jsonl(ROWS)})
    assert [ev.model_dump() for ev in saved.evals] == [ev.model_dump() for ev in suite.evals]


def test_ten_thousand_rows_load_quickly():
    text = jsonl({"input": [f"q{i}", f"r{i}"], "ground_truth": [f"a{i}", f"b{i}"]} for i in range(10_000))
    started = time.monotonic()
    suite = load_suite(SUITE, files={"capitals.jsonl": text})
    elapsed = time.monotonic() - started
    assert len(suite.evals) == 10_000
    assert suite.eval_id(9_999) == "row-10000"
    assert elapsed < 5, f"10,000 rows took {elapsed:.2f}s"


def test_preview_gives_the_row_count_and_the_first_rows():
    result = preview("capitals.jsonl", jsonl(ROWS * 4), limit=2)
    assert result["rows"] == 12
    assert result["first"] == [ROWS[0], ROWS[1]]
    assert result["problems"] == []
    bad = preview("capitals.jsonl", jsonl(ROWS) + "{oops\n")
    assert (bad["rows"], bad["first"]) == (0, [])
    assert bad["problems"][0][0] == 4 and "not valid JSON" in bad["problems"][0][1]


# --- bad files: every problem named by its line, nothing loaded -------------------------------------------


def test_bad_json_line_names_its_line_and_loads_nothing():
    text = jsonl(ROWS[:1]) + "\n" + '{"input": "x", "ground_truth": \n' + jsonl(ROWS[1:])
    assert [line for line, _ in problems_of("d.jsonl", text)] == [3]
    (problem,) = load_problems(text)
    assert (problem.file, problem.line, problem.path) == ("capitals.jsonl", 3, "dataset")
    assert str(problem).startswith("capitals.jsonl:3: not valid JSON")


def test_every_bad_row_is_reported():
    text = "\n".join(
        [
            '{"input": "ok", "ground_truth": "ok"}',
            '{"ground_truth": "x"}',  # 2: no input
            '{"input": ["a", "b"], "ground_truth": ["x"]}',  # 3: lengths differ
            '{"input": "a", "ground_truth": "b", "expected": "c"}',  # 4: unknown column
            "[1, 2]",  # 5: not an object
            '{"input": "a", "ground_truth": "b", "rubric": "{answer}"}',  # 6: bad rubric
            '{"input": 7, "ground_truth": "b"}',  # 7: input not text
        ]
    )
    found = problems_of("d.jsonl", text)
    assert [line for line, _ in found] == [2, 3, 4, 5, 6, 7]
    messages = dict(found)
    assert messages[2] == "missing `input`"
    assert "`ground_truth` has 1 item but `input` has 2" in messages[3]
    assert messages[4].startswith("unknown column `expected`")
    assert messages[5] == "a row is a JSON object with `input` and `ground_truth`"
    assert "unknown placeholder {answer}" in messages[6]
    assert messages[7].startswith("input")


def test_problems_stop_after_a_limit():
    found = problems_of("d.jsonl", "{bad\n" * 500)
    assert len(found) == MAX_REPORTED + 1
    assert found[-1][1] == f"stopped after {MAX_REPORTED} problems"


def test_csv_problems_name_their_lines():
    assert problems_of("d.csv", "question,ground_truth\nq,a\n") == [
        (1, "the header has no `input` column (columns: question, ground_truth)")
    ]
    assert problems_of("d.csv", 'input,ground_truth\n"multi\nline",a\n,b\nq,a,extra\n') == [
        (4, "missing `input`"),
        (5, "more cells than header columns"),
    ]
    assert problems_of("d.csv", 'input,ground_truth\n"[""a"", ""b""]","[""x""]"\n')[0][0] == 2


def test_csv_unknown_column_is_refused_even_when_empty():
    """A misspelt column (here `grund_truth`) must not be dropped silently just because its cells are empty."""
    assert problems_of("d.csv", "input,ground_truth,grund_truth\nq,a,\nr,b,\n") == [
        (1, "unknown column `grund_truth` (expected input, ground_truth, id, tags, rubric, messages)")
    ]


def test_jsonl_strings_may_hold_unicode_line_separators():
    """U+2028, U+0085 and form feeds are legal unescaped inside JSON strings; only newlines end a row."""
    text = (
        "".join(
            json.dumps({"input": f"a{sep}b", "ground_truth": "x"}, ensure_ascii=False) + "\n"
            for sep in ("\u2028", "\u0085", "\x0c")
        )
        + '{"broken\n'
    )
    assert problems_of("d.jsonl", text) == [(4, problems_of("d.jsonl", '{"broken')[0][1])]
    evals, problems = rows_to_evals("d.jsonl", text.rsplit("{", 1)[0])
    assert problems == [] and [ev.input for ev in evals] == ["a\u2028b", "a\u0085b", "a\x0cb"]


def test_windows_line_endings():
    evals, problems = rows_to_evals("d.jsonl", jsonl(ROWS).replace("\n", "\r\n"))
    assert (len(evals), problems) == (3, [])
    evals, problems = rows_to_evals("d.csv", "input,ground_truth\r\nq,a\r\n")
    assert (evals[0].input, evals[0].ground_truth, problems) == ("q", "a", [])


def test_a_50_mb_dataset_is_refused_without_parsing():
    big = '{"input": "q", "ground_truth": "a"}\n' * 1_450_000  # ~52 MB
    started = time.monotonic()
    assert problems_of("d.jsonl", big) == [(0, "larger than 20 MB")]
    assert time.monotonic() - started < 2
    (problem,) = load_problems(big)
    assert str(problem) == "capitals.jsonl: larger than 20 MB"


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("d.json", "[]", "a dataset is a .jsonl or .csv file"),
        ("d.jsonl", "", "the dataset has no rows"),
        ("d.jsonl", "\n\n  \n", "the dataset has no rows"),
        ("d.csv", "input,ground_truth\n", "the dataset has no rows"),
    ],
)
def test_not_a_dataset(name, text, message):
    assert problems_of(name, text) == [(0, message)]


def test_dataset_must_be_attached():
    with pytest.raises(SuiteError) as info:
        load_suite(SUITE, files={"other.jsonl": jsonl(ROWS)})
    (problem,) = info.value.problems
    assert (problem.line, problem.column, problem.path) == (3, 10, "dataset")
    assert problem.message == "file `capitals.jsonl` is not attached (attached: other.jsonl)"


def test_row_ids_must_be_unique_across_the_suite():
    twice = jsonl([{"id": "x", "input": "a", "ground_truth": "b"}] * 2)
    assert "id 'x' is used twice" in load_problems(twice)[0].message
    clash = SUITE + "evals:\n  - id: x\n    input: a\n    ground_truth: b\n"
    assert (
        "id 'x' is used twice"
        in load_problems(jsonl(ROWS[1:2] + [{"id": "x", "input": "a", "ground_truth": "b"}]), suite=clash)[
            0
        ].message
    )


def test_row_id_cannot_take_a_suite_evals_default_id():
    """The suite's first eval without an id runs as eval-1; a row with that id would be a second eval-1."""
    own = SUITE + "evals:\n  - input: a\n    ground_truth: b\n"
    (problem,) = load_problems(jsonl([{"id": "eval-1", "input": "q", "ground_truth": "a"}]), suite=own)
    assert "id 'eval-1' is used twice" in problem.message


def test_llm_judge_rows_need_a_rubric():
    """Rows graded by the suite's llm_judge need a rubric (their own or the suite's), as YAML evals do."""
    judged = "name: capitals\ngrader: llm_judge\ndataset: capitals.jsonl\n"
    text = jsonl(
        [
            {"input": "a", "ground_truth": "b", "rubric": "Is {submission} {ground_truth}?"},
            {"input": "c", "ground_truth": "d"},
        ]
    )
    (problem,) = load_problems(text, suite=judged)
    assert (problem.line, problem.file) == (2, "capitals.jsonl")
    assert "llm_judge" in problem.message and "rubric" in problem.message
    suite = load_suite(
        judged + "rubric: 'Does {submission} say {ground_truth}?'\n", files={"capitals.jsonl": text}
    )
    assert len(suite.evals) == 2


def test_regex_match_rows_need_valid_patterns():
    regex = "name: capitals\ngrader: regex_match\ndataset: capitals.jsonl\n"
    (problem,) = load_problems(
        jsonl([{"input": "a", "ground_truth": "^ok$"}, {"input": "c", "ground_truth": "(oops"}]), suite=regex
    )
    assert problem.line == 2 and "not a valid regular expression" in problem.message


# --- through saving a suite version ---------------------------------------------------------------------
