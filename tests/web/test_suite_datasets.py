"""Saving a suite version with a dataset (suites/services.py): a bad or oversized dataset is refused whole and
nothing is saved; decode_file reads what a browser uploads."""

from __future__ import annotations

import pytest

from engine.loader import load_saved_suite
from engine.source import SuiteError
from suites.models import Suite, SuiteVersion
from suites.services import change_files, create_suite, decode_file, save_version
from tests.engine.test_datasets import ROWS, SUITE, jsonl


@pytest.mark.django_db
def test_save_version_with_a_bad_dataset_saves_nothing_and_keeps_the_last_version(user):
    suite = create_suite(owner=user, source=SUITE, files={"capitals.jsonl": jsonl(ROWS)})
    first = suite.latest_version
    with pytest.raises(SuiteError) as info:
        save_version(
            suite=suite,
            source=SUITE + "description: v2\n",
            user=user,
            files={"capitals.jsonl": jsonl(ROWS) + "{bad\n"},
        )
    assert info.value.problems[0].line == 4
    assert SuiteVersion.objects.filter(suite=suite).count() == 1
    latest = Suite.objects.get(pk=suite.pk).latest_version
    assert latest.pk == first.pk
    assert latest.source == SUITE
    assert latest.file_map() == {"capitals.jsonl": jsonl(ROWS)}
    assert len(load_saved_suite(latest.source, latest.file_map()).evals) == 3


@pytest.mark.django_db
def test_change_files_refuses_a_bad_dataset_and_removing_a_used_one(user):
    suite = create_suite(owner=user, source=SUITE, files={"capitals.jsonl": jsonl(ROWS)})
    with pytest.raises(SuiteError, match="missing `input`"):
        change_files(suite=suite, user=user, add={"capitals.jsonl": '{"ground_truth": "x"}\n'})
    with pytest.raises(SuiteError, match="file `capitals.jsonl` is not attached"):
        change_files(suite=suite, user=user, remove=["capitals.jsonl"])
    assert suite.versions.count() == 1
    grown = change_files(suite=suite, user=user, add={"capitals.jsonl": jsonl(ROWS + ROWS[1:])})
    assert grown.number == 2 and grown.note == "attached capitals.jsonl"
    assert len(load_saved_suite(grown.source, grown.file_map()).evals) == 5


@pytest.mark.django_db
def test_create_suite_with_a_bad_dataset_creates_nothing(user):
    with pytest.raises(SuiteError):
        create_suite(owner=user, source=SUITE, files={"capitals.jsonl": "not json\n"})
    assert not Suite.objects.exists()


def test_decode_file():
    assert decode_file("capitals.jsonl", "\ufeff{}".encode()) == "{}"  # a BOM is dropped
    with pytest.raises(SuiteError) as info:
        decode_file("capitals.jsonl", b'{"input": "a"}\n{"input": "\xff"}\n')
    assert str(info.value.problems[0]) == "capitals.jsonl: not UTF-8 text: byte 0xff on line 2"
    with pytest.raises(SuiteError) as info:
        decode_file("big.jsonl", b"x" * 50_000_000)
    assert info.value.problems[0].message == "larger than 20 MB"
    with pytest.raises(SuiteError, match="no folders"):
        decode_file("../etc/passwd", b"x")


@pytest.mark.django_db
def test_save_version_refuses_an_oversized_dataset(user):
    suite = create_suite(owner=user, source=SUITE, files={"capitals.jsonl": jsonl(ROWS)})
    big = '{"input": "q", "ground_truth": "a"}\n' * 600_000  # ~22 MB
    with pytest.raises(SuiteError) as info:
        save_version(suite=suite, source=SUITE, user=user, files={"capitals.jsonl": big})
    assert str(info.value.problems[0]) == "capitals.jsonl: larger than 20 MB"
    with pytest.raises(SuiteError, match="exceed 50 MB in all"):
        save_version(
            suite=suite,
            source=SUITE,
            user=user,
            files={"capitals.jsonl": big, "b.jsonl": big, "c.jsonl": big},
        )
    assert [v.number for v in suite.versions.all()] == [1]
