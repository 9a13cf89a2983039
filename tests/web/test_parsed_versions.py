"""A suite version's parse is kept (suites.models.ParsedVersion) and read back by other processes instead of
its YAML (runs.specs), only under the schema that wrote it, and equal to what the YAML gives."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.loader import load_saved_suite, load_suite
from engine.schema import Suite
from runs import specs
from suites import services
from suites.models import ParsedVersion, SuiteVersion
from suites.services import create_suite, save_version
from tests.factories import launch

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "imports"

SUITE = """\
name: kept
model: mock
system: Be brief.
iterations: 3
evals:
  - id: tree
    prompt: hello
    checks:
      - match: '*hi*'
        prompt: again
        checks: [{contains: hi}]
  - id: scripted
    turns:
      - {input: one, checks: [{regex: '^o'}]}
      - {input: two, checks: [{not_match: '*x*'}]}
    iterations: 2
"""


def _suites():
    for path in sorted(EXAMPLES.glob("*.yaml")):
        files = {p.name: p.read_text() for p in EXAMPLES.iterdir() if p.is_file() and p != path}
        suite = load_suite(path.read_text(), files=files)
        if type(suite) is Suite:  # a calibration set is never kept (runs.specs._keep)
            yield path.name, suite
    yield "inline", load_suite(SUITE)


@pytest.mark.parametrize(
    ("name", "suite"), list(_suites()), ids=lambda value: value if isinstance(value, str) else ""
)
def test_a_kept_parse_reads_back_equal_to_the_yamls(name, suite):
    kept = suite.model_dump_json(exclude_defaults=True)
    assert Suite.model_validate_json(kept) == suite


@pytest.fixture
def fresh_cache():
    specs._suites.clear()
    yield
    specs._suites.clear()


@pytest.mark.django_db
def test_a_launch_keeps_the_parse_and_a_worker_reads_it_without_the_yaml(user, fresh_cache):
    run = launch(user, SUITE)
    version = run.suite_version
    kept = ParsedVersion.objects.get(version=version)
    assert kept.schema == specs.schema_digest()

    # Another process (an empty cache) reads the kept parse: the YAML, broken here behind its back, is not read.
    SuiteVersion.objects.filter(pk=version.pk).update(source="evals: [")
    specs._suites.clear()
    assert specs.suite(version) == load_suite(SUITE)


@pytest.mark.django_db
def test_a_parse_kept_under_another_schema_or_unreadable_is_parsed_again_from_the_yaml(user, fresh_cache):
    run = launch(user, SUITE)
    version = SuiteVersion.objects.get(pk=run.suite_version_id)
    for stale in ({"schema": "an older schema"}, {"suite": '{"evals": "not a list"}'}):
        ParsedVersion.objects.filter(version=version).update(**stale)
        specs._suites.clear()

        assert specs.suite(version) == load_suite(SUITE)
        kept = ParsedVersion.objects.get(version=version)  # and kept again, under this schema
        assert kept.schema == specs.schema_digest()
        assert Suite.model_validate_json(kept.suite) == load_suite(SUITE)


def _example_sources():
    for path in sorted(EXAMPLES.glob("*.yaml")):
        files = {p.name: p.read_text() for p in EXAMPLES.iterdir() if p.is_file() and p.suffix != ".yaml"}
        yield path.name, path.read_text(), files


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "source", "files"),
    list(_example_sources()),
    ids=lambda v: v if isinstance(v, str) and v.endswith(".yaml") else "",
)
def test_a_save_keeps_what_a_worker_would_parse_before_any_launch(user, name, source, files):
    suite = create_suite(owner=user, source=source, files=files)
    version = suite.latest_version
    spec = load_saved_suite(source, files)  # what a worker parses from the YAML without a kept parse
    kept = ParsedVersion.objects.filter(version=version).first()
    if type(spec) is not Suite:  # a calibration set is never kept: it carries its set beside the schema
        assert kept is None
        return
    assert kept is not None and kept.schema == specs.schema_digest()
    assert Suite.model_validate_json(kept.suite) == spec


@pytest.mark.django_db
def test_create_suite_parses_its_yaml_once_and_a_new_version_keeps_its_own_parse(user, monkeypatch):
    parses = []
    validate = services.validate_source
    monkeypatch.setattr(services, "validate_source", lambda *a, **kw: parses.append(1) or validate(*a, **kw))
    suite = create_suite(owner=user, source=SUITE)
    assert len(parses) == 1

    edited = SUITE.replace("Be brief.", "Be very brief.")
    second = save_version(suite=suite, source=edited, user=user)
    assert Suite.model_validate_json(ParsedVersion.objects.get(version=second).suite) == load_suite(edited)
    assert (
        save_version(suite=suite, source=edited, user=user) == second
    )  # unchanged: no version, nothing kept
    assert ParsedVersion.objects.filter(version__suite=suite).count() == 2
