"""What `evalsite validate` and `evalsite run` load before their work: only what the command needs. The openai
package, aiohttp and Django's apps (their models) each cost a large share of a short command's time on a small
machine; the modules a command imported are read from Python's own import log (PYTHONPROFILEIMPORTTIME)."""

from __future__ import annotations

import json
import re

from tests.engine.standalone import evalsite, run_on

IMPORTED = re.compile(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", re.MULTILINE)


def imported(stderr: str) -> set[str]:
    return set(IMPORTED.findall(stderr))


def test_validate_loads_no_model_client_and_no_django_app(tmp_path, suite):
    result = evalsite("validate", str(suite), cwd=tmp_path, PYTHONPROFILEIMPORTTIME="1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok — suite 'standalone', 2 evals" in result.stdout
    modules = imported(result.stderr)
    assert "engine.loader" in modules  # the log is read at all
    assert not {"openai", "aiohttp", "django.contrib.contenttypes.models"} & modules


def test_a_run_on_the_default_endpoint_loads_neither_openai_nor_djangos_apps(fake, suite):
    fake.script("What is 15 * 7?", ["105"])
    fake.script("What is 2 + 2?", ["5", "4"])
    out = suite.parent / "out.json"
    result = run_on(fake, suite, "--json", str(out), PYTHONPROFILEIMPORTTIME="1")
    assert result.returncode == 1, result.stdout + result.stderr
    modules = imported(result.stderr)
    assert "aiohttp" in modules  # the model under test is called through it
    assert not {"openai", "django.contrib.contenttypes.models"} & modules
    report = json.loads(out.read_text())
    assert [ev["status"] for ev in report["evals"]] == ["passed", "failed"]


def test_a_run_that_names_an_endpoint_still_reads_the_admins_endpoints(fake, suite):
    named = suite.with_name("named.yaml")
    named.write_text(suite.read_text().replace("model: gpt-test", "model: gpt-test\njudge: team/judge-model"))
    result = run_on(fake, named, PYTHONPROFILEIMPORTTIME="1")
    # The database was looked for (there is none here), so the reference names no endpoint: refused.
    assert result.returncode == 2, result.stdout + result.stderr
    assert (
        "no endpoint named `team` is known here, since named endpoints live in the admin's database and there "
        "is no database" in result.stderr
    )
    assert "django.contrib.contenttypes.models" in imported(result.stderr)
    assert fake.chat_requests() == []


GRADED = (
    "name: graded\nmodel: gpt-test\ngraders:\n  tone:\n    kind: llm_judge\n    model: {judge}\n"
    "    rubric: Polite.\nevals:\n  - prompt: hi\n    checks:\n      - match: '*hello*'\n"
)


def test_a_graders_model_that_names_an_endpoint_is_enough_to_read_them(fake, tmp_path):
    suite = tmp_path / "graded.yaml"
    suite.write_text(GRADED.format(judge="team/judge-model"))
    result = run_on(fake, suite, PYTHONPROFILEIMPORTTIME="1")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "graders.tone.model `team/judge-model`: no endpoint named `team`" in result.stderr
    assert "django.contrib.contenttypes.models" in imported(result.stderr)


def test_a_model_id_sent_whole_to_the_default_endpoint_reads_no_database(fake, tmp_path):
    suite = tmp_path / "graded.yaml"
    suite.write_text(GRADED.format(judge="default/team/judge-model"))
    fake.script("hi", ["hello"])
    fake.rule("Polite.", "PASS")  # the grader's judge, on the default endpoint as model `team/judge-model`
    result = run_on(fake, suite, PYTHONPROFILEIMPORTTIME="1")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "django.contrib.contenttypes.models" not in imported(result.stderr)
    assert {body["model"] for body in fake.chat_requests()} == {"gpt-test", "team/judge-model"}
