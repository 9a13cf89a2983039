"""A well-formed suite file is read once, at libyaml's speed and without positions (engine.source's quick
read); anything the full read would refuse or must locate is still said by the full read, in its words and
at its place. These tests hold the two reads to the same answers."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from engine.bounds import MAX_NESTING
from engine.loader import load_suite
from engine.source import LocatedLater, SuiteError, TreeBuilder, _CLoader, parse_yaml, scan_yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))


def full_read(text: str) -> object:
    """The data as the full read builds it: scan_yaml's checks, then a TreeBuilder over the composed tree."""
    assert scan_yaml(text) == []
    builder = TreeBuilder()
    data = builder.build(yaml.compose(text, Loader=_CLoader))
    assert builder.problems == []
    return data


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda path: path.name)
def test_the_examples_read_quickly_give_the_full_reads_data(path):
    text = path.read_text(encoding="utf-8")
    data, builder = parse_yaml(text)
    assert isinstance(builder, LocatedLater)  # the quick read took it
    assert data == full_read(text)


VALID = {
    "globs and products are no aliases": "name: s\nevals:\n  - prompt: 'is 3 * 4 = 12?'\n    checks:\n"
    "      - match: '*12*'\n",
    "scalars of every kind": 'name: s\nn: 3\nx: 1.5\nok: true\nnone: ~\nwhen: 2024-01-02\nq: "tab\\there"\n'
    "evals:\n  - prompt: hi\n",
    "flow collections": "name: s\nevals: [{prompt: hi, checks: [{match: '*a*'}]}]\n",
    "block scalars": "name: s\nsystem: |\n  line one\n  line two\nevals:\n  - prompt: >\n      folded\n",
}


@pytest.mark.parametrize("text", VALID.values(), ids=VALID.keys())
def test_well_formed_yaml_reads_the_same_both_ways(text):
    data, builder = parse_yaml(text)
    assert isinstance(builder, LocatedLater)
    assert data == full_read(text)


def deep(levels: int) -> str:
    return "name: s\nx: " + "[" * levels + "1" + "]" * levels + "\n"


REFUSED = {
    "an anchor and an alias": ("name: s\na: &x 1\nb: *x\n", "anchor &x is not allowed"),
    "a duplicate key": ("name: s\nname: t\n", "duplicate key `name`"),
    "a merge key": ("name: s\nm: {a: 1}\nn:\n  <<: {a: 2}\n", "merge keys (<<) are not supported"),
    "a list as a key": ("name: s\n? [a, b]\n: 1\n", "keys must be plain strings"),
    "an escaped NUL": ('name: "a\\0b"\n', "U+0000 (NUL)"),
    "a date that does not exist": ("name: s\nwhen: 2024-02-30\n", "is not a valid date"),
    "nesting too deep": (deep(MAX_NESTING + 1), "nested more than"),
    "not YAML": ("name: s\n  bad: [\n", "invalid YAML"),
    "a list, not a mapping": ("- a\n- b\n", "a suite is a mapping"),
}


@pytest.mark.parametrize(("text", "said"), REFUSED.values(), ids=REFUSED.keys())
def test_what_the_full_read_refuses_is_refused_in_its_words_at_its_place(text, said):
    with pytest.raises(SuiteError) as caught:
        parse_yaml(text)
    problem = caught.value.problems[0]
    assert said in problem.message
    assert problem.line >= 1


def test_nesting_at_the_bound_is_read_quickly():
    data, builder = parse_yaml(deep(MAX_NESTING - 1))
    assert isinstance(builder, LocatedLater)
    assert data == full_read(deep(MAX_NESTING - 1))


def test_a_schema_error_in_a_quickly_read_suite_is_located_where_it_is_written():
    text = "name: s\nevals:\n  - prompt: hi\n  - prompt: there\n    checks:\n      - match: 12\n        bogus: 1\n"
    with pytest.raises(SuiteError) as caught:
        load_suite(text)
    lines = {(problem.line, problem.path) for problem in caught.value.problems}
    assert (7, "evals[1].checks[0].bogus") in lines, caught.value.problems
