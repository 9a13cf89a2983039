"""Bad suites through the page, the upload and the API: a clear, located error, and nothing saved."""

from __future__ import annotations

import html
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from engine.bounds import position
from engine.loader import load_suite
from engine.source import SuiteError
from suites.models import Suite, SuiteVersion
from suites.services import create_suite
from tests.conftest import ROOT

GOOD = "name: keep-me\nmodel: mock\nevals:\n  - prompt: hi\n    checks:\n      - match: '*'\n"


def _nested(depth: int) -> str:
    lines = [
        "name: keep-me",
        "model: mock",
        "evals:",
        "  - prompt: level 0",
        "    checks:",
        "      - match: '*x*'",
    ]
    indent = "      "
    for level in range(1, depth + 1):
        lines += [f"{indent}- prompt: level {level}", f"{indent}  checks:", f"{indent}    - match: '*x*'"]
        indent += "    "
    return "\n".join(lines) + "\n"


BAD_TEXT = {
    "invalid YAML": ("name: keep-me\nevals: [\n", "invalid YAML", "line 3, col 1"),
    "wrong types": (
        GOOD.replace("prompt: hi", "prompt: [1, 2]"),
        "expected a string; found a list",
        "evals[0].prompt",
    ),
    "unknown key": (GOOD.replace("checks:", "chekcs:"), "did you mean `checks`", "evals[0].chekcs"),
    "depth 6": (
        _nested(6),
        "this one is level 6",
        "evals[0].checks[1].checks[1].checks[1].checks[1].checks[1].checks[1].prompt",
    ),
    "anchors": ("name: &n keep-me\nmodel: mock\nevals: []\n", "anchor &n is not allowed", "line 1, col 7"),
    "aliases": (GOOD + "judge: *n\n", "alias *n is not allowed", "line 7, col 8"),
}
BAD_BYTES = {
    "over 1 MB": (GOOD.encode() + b"#" * 1_000_001, "larger than 1 MB"),
    "not UTF-8": (b"name: caf\xe9\nmodel: mock\n", "not UTF-8: byte 0xe9 at offset 9"),
}


@pytest.fixture
def existing(user):
    """A suite whose version 1 must survive every bad save."""
    return create_suite(owner=user, source=GOOD)


def _unchanged(existing) -> None:
    assert list(SuiteVersion.objects.values_list("number", flat=True)) == [1]
    assert existing.latest_version.source == GOOD
    assert Suite.objects.count() == 1


def test_depth_5_is_fine():
    from engine.loader import load_suite

    assert load_suite(_nested(5)).evals[0].checks[0].kind == "match"


@pytest.mark.django_db
@pytest.mark.parametrize("case", BAD_TEXT)
def test_bad_text_saved_from_the_editor(client, user, existing, case):
    source, message, where = BAD_TEXT[case]
    client.force_login(user)
    response = client.post(reverse("suites:detail", args=[existing.public_id]), {"source": source})
    body = html.unescape(response.content.decode())
    assert response.status_code == 400
    assert "nothing was stored" in body and "v1 is unchanged" in body
    assert message in body
    assert where in body
    _unchanged(existing)


@pytest.mark.django_db
@pytest.mark.parametrize("case", BAD_TEXT)
def test_bad_text_as_a_new_suite(client, user, existing, case):
    client.force_login(user)
    response = client.post(reverse("suites:new"), {"source": BAD_TEXT[case][0]})
    assert response.status_code == 400
    _unchanged(existing)


@pytest.mark.django_db
@pytest.mark.parametrize("case", [*BAD_TEXT, *BAD_BYTES])
def test_bad_file_uploaded(client, user, existing, case):
    data, message = (BAD_TEXT[case][0].encode(), BAD_TEXT[case][1]) if case in BAD_TEXT else BAD_BYTES[case]
    client.force_login(user)
    upload = SimpleUploadedFile("suite.yaml", data, content_type="application/x-yaml")
    response = client.post(reverse("suites:upload"), {"file": upload, "suite": existing.public_id})
    assert response.status_code == 400
    assert message in html.unescape(response.content.decode())
    _unchanged(existing)


@pytest.mark.django_db
def test_good_file_upload_makes_the_next_version(client, user, existing):
    client.force_login(user)
    upload = SimpleUploadedFile("suite.yaml", GOOD.replace("hi", "hello").encode(), content_type="text/yaml")
    response = client.post(reverse("suites:upload"), {"file": upload, "suite": existing.public_id})
    assert response.status_code == 302
    assert existing.latest_version.number == 2 and "hello" in existing.latest_version.source
    assert existing.versions.get(number=1).source == GOOD


@pytest.mark.django_db
def test_api_validate_reports_located_problems(client, user):
    client.force_login(user)
    response = client.post(
        reverse("api:validate"),
        {"source": GOOD.replace("checks:", "chekcs:")},
        content_type="application/json",
    )
    body = response.json()
    assert body["valid"] is False
    assert {"line": 5, "column": 5, "path": "evals[0].chekcs"}.items() <= body["problems"][-1].items()


@pytest.mark.django_db
def test_json_schema_is_served_without_login(client):
    schema = client.get("/api/suites/schema.json").json()
    assert schema["$schema"].startswith("https://json-schema.org/")
    assert "evals" in schema["properties"]
    assert "or" in schema["$defs"]["Check"]["properties"]


# --- Hostile input: every path answers with a located problem, never a 500, a traceback or a crash ---------

HEAD = "name: keep-me\nmodel: mock\nevals:\n  - prompt: hi\n    checks: "
DEEP = "nested more than 100 levels deep"


def _stop_when(condition: str) -> str:
    return (
        f"name: keep-me\nmodel: mock\nevals:\n  - prompt: hi\n    simulate:\n      stop_when: {condition}\n"
    )


# name: (source, message, (line, column) or None when the problem is about the file as a whole, whether the
# YAML itself is refused: an importer reads it first and says so)
HOSTILE = {
    "1,000 nested [": (HEAD + "[" * 1_000 + "]" * 1_000 + "\n", DEEP, (5, 110), True),
    "20,000 nested [": (HEAD + "[" * 20_000 + "]" * 20_000 + "\n", DEEP, (5, 110), True),
    "2,000 nested or": (
        HEAD + "[{or: " * 2_000 + "[{contains: x}]" + "}]" * 2_000 + "\n",
        DEEP,
        (5, 302),
        True,
    ),
    "3,000 nested not": (_stop_when("{not: " * 3_000 + "{contains: x}" + "}" * 3_000), DEEP, (6, 594), True),
    "iterations of 5,000 digits": (
        "name: keep-me\nmodel: mock\niterations: " + "9" * 5_000 + "\nevals:\n  - prompt: hi\n",
        "a number of 5000 characters is too long (at most 100)",
        (3, 13),
        True,
    ),
    "a date that does not exist": (
        "name: keep-me\nmodel: mock\nevals:\n  - prompt: 2001-02-30\n",
        "`2001-02-30` is not a valid date (day is out of range for month)",
        (4, 13),
        True,
    ),
    "a repeat count over 2**32": (
        HEAD + "\n      - regex: 'a{4294967296}'\n",
        "invalid regular expression",
        (6, 16),
        False,
    ),
    "NUL": (
        "name: keep-me\nmodel: mo\x00ck\nevals:\n  - prompt: hi\n",
        "control character U+0000",
        (2, 10),
        True,
    ),
    "a control character": (
        "name: keep-me\nmodel: mock\nevals:\n  - prompt: h\x07i\n",
        "control character U+0007",
        (4, 14),
        True,
    ),
    "a NUL escape": (
        'name: keep-me\nmodel: mock\nevals:\n  - prompt: "a\\0b"\n',
        "holds the character U+0000 (NUL), which cannot be stored",
        (4, 13),
        False,
    ),
    "evals: 5": (
        "name: keep-me\nmodel: mock\nevals: 5\n",
        "expected a list of evals; found the number 5",
        (3, 8),
        False,
    ),
    "empty": ("", "the file is empty", (1, 1), False),
}
DATASET_SUITE = "name: rows\nmodel: mock\ndataset: {name}\n"
OK_ROW = '{"input": "hi", "ground_truth": "hi"}\n'
HOSTILE_DATASETS = {
    "a JSONL row nested 100,000 deep": (
        "rows.jsonl",
        OK_ROW + '{"input": ' + "[" * 100_000 + "]" * 100_000 + "}\n",
        "nested more than 100 levels deep at column 110",
        2,
    ),
    "a CSV field over 131,072 characters": (
        "rows.csv",
        'input,ground_truth\nhi,hi\n"' + "x" * 131_073 + '",hi\n',
        "a field is longer than 131,072 characters",
        3,
    ),
    "a JSONL NUL escape": (
        "rows.jsonl",
        OK_ROW + '{"input": "a\\u0000b", "ground_truth": "hi"}\n',
        "U+0000 (NUL), which cannot be stored",
        2,
    ),
    "a JSONL lone surrogate escape": (
        "rows.jsonl",
        '{"input": "a\\ud800", "ground_truth": "hi"}\n',
        "U+D800 is half of a UTF-16 surrogate pair",
        1,
    ),
}


def _page_says(response, message: str, where: tuple[int, int] | None) -> None:
    body = html.unescape(response.content.decode())
    assert response.status_code in (200, 400), response.status_code
    assert "Traceback" not in body
    assert message in body
    if where is not None:
        assert f"line {where[0]}, col {where[1]}" in body


@pytest.mark.django_db
@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_text_through_the_api(client, user, case):
    source, message, where, _ = HOSTILE[case]
    client.force_login(user)
    response = client.post(reverse("api:validate"), {"source": source}, content_type="application/json")
    assert response.status_code == 200
    body = response.json()
    assert body["valid"] is False
    found = [p for p in body["problems"] if message in p["message"]]
    assert found, body["problems"]
    assert (found[0]["line"], found[0]["column"]) == where


@pytest.mark.django_db
@pytest.mark.parametrize("case", [case for case in HOSTILE if HOSTILE[case][0]])  # empty: a hint, until saved
def test_hostile_text_validated_as_you_type(client, user, existing, case):
    source, message, where, _ = HOSTILE[case]
    client.force_login(user)
    response = client.post(reverse("suites:validate"), {"source": source, "suite": existing.public_id})
    assert response.status_code == 200
    _page_says(response, message, where)


@pytest.mark.django_db
@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_text_saved(client, user, existing, case):
    source, message, where, _ = HOSTILE[case]
    client.force_login(user)
    response = client.post(reverse("suites:detail", args=[existing.public_id]), {"source": source})
    assert response.status_code == 400
    _page_says(response, message, where)
    assert "Not saved: 1 problem to fix" in html.unescape(response.content.decode())
    response = client.post(reverse("suites:new"), {"source": source})
    assert response.status_code == 400
    _page_says(response, message, where)
    _unchanged(existing)


@pytest.mark.django_db
@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_file_uploaded(client, user, existing, case):
    source, message, where, _ = HOSTILE[case]
    client.force_login(user)
    upload = SimpleUploadedFile("suite.yaml", source.encode(), content_type="application/x-yaml")
    response = client.post(reverse("suites:upload"), {"file": upload, "suite": existing.public_id})
    assert response.status_code == 400
    _page_says(response, message, where)
    _unchanged(existing)


@pytest.mark.django_db
@pytest.mark.parametrize("case", HOSTILE)
def test_hostile_text_imported(client, user, existing, case):
    source, message, where, refused_as_yaml = HOSTILE[case]
    client.force_login(user)
    # As a pasted suite and as an uploaded file: the importer parses it before it knows whose format it is.
    for data in ({"pasted": source}, {"files": [SimpleUploadedFile("suite.yaml", source.encode())]}):
        response = client.post(reverse("suites:import"), data)
        assert response.status_code in (200, 400)  # 200: converted, with the suite's problems listed
        body = html.unescape(response.content.decode())
        assert "Traceback" not in body
        if refused_as_yaml:
            assert response.status_code == 400
            assert message in body
            assert f"line {where[0]}, column {where[1]}" in body
    _unchanged(existing)


@pytest.mark.django_db
def test_a_surrogate_sent_to_the_api_is_located(client, user):
    # JSON can escape half a surrogate pair; no UTF-8 file can hold one, and encoding it crashed the loader.
    client.force_login(user)
    payload = json.dumps({"source": "name: keep-\ud800me\nmodel: mock\nevals:\n  - prompt: hi\n"})
    response = client.post(reverse("api:validate"), payload, content_type="application/json")
    assert response.status_code == 200
    problem = response.json()["problems"][0]
    assert (problem["line"], problem["column"]) == (1, 12)
    assert "U+D800 is half of a UTF-16 surrogate pair" in problem["message"]


@pytest.mark.django_db
@pytest.mark.parametrize("case", HOSTILE_DATASETS)
def test_hostile_dataset_attached(client, user, existing, case):
    name, text, message, line = HOSTILE_DATASETS[case]
    client.force_login(user)
    source = DATASET_SUITE.format(name=name)
    where = f"{name}, line {line}"

    def files():
        return [SimpleUploadedFile(name, text.encode())]

    # With a new suite, validated as you type and saved:
    for url in (reverse("suites:validate"), reverse("suites:new")):
        response = client.post(url, {"source": source, "files": files()})
        body = html.unescape(response.content.decode())
        assert response.status_code in (200, 400)
        assert message in body and where in body
    # Attached in place of the good dataset of a saved suite:
    suite = create_suite(
        owner=user,
        source=source,
        files={name: OK_ROW if name.endswith(".jsonl") else "input,ground_truth\nhi,hi\n"},
    )
    response = client.post(reverse("suites:attach_files", args=[suite.public_id]), {"files": files()})
    assert response.status_code == 400
    body = html.unescape(response.content.decode())
    assert message in body and where in body
    assert suite.versions.count() == 1


@pytest.mark.parametrize("case", HOSTILE_DATASETS)
def test_hostile_dataset_imported(case):
    from engine.imports import ImportProblem, convert
    from tests.engine.import_fixtures import FIXTURES

    name, text, message, line = HOSTILE_DATASETS[case]
    suite = (FIXTURES / "letta-per-turn" / "suite.yaml").read_text().replace("dataset.jsonl", name)
    try:
        result = convert({"suite.yaml": suite, name: text})
    except ImportProblem as exc:
        assert f"{name} line {line}" in str(exc)
    else:  # rows are carried over as they are, and the suite's loader refuses them, located
        from engine.loader import load_suite
        from engine.source import SuiteError

        with pytest.raises(SuiteError) as refused:
            load_suite(result.source, files=result.files)
        assert any(message in problem.message for problem in refused.value.problems)


# Once a crash of the process itself (libyaml's composer recursed in C until SIGSEGV): sent from a subprocess,
# so that without the fix the test fails rather than taking the test run down.
CRASHER = HEAD + "[" * 40_000 + "]" * 40_000 + "\n"
ENTRY_POINTS = ("api", "validate", "save", "new", "upload", "import", "import upload")


def test_what_crashed_the_web_app_is_a_located_problem_on_every_path(tmp_path):
    suite = tmp_path / "suite.yaml"
    suite.write_text(CRASHER)
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.settings",
        "EVALSITE_VAR_DIR": str(tmp_path / "var"),
    }
    env.pop("DATABASE_URL", None)
    result = subprocess.run(
        [sys.executable, "-m", "tests.hostile_paths", str(suite)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    started = [line["path"] for line in lines if line.get("started")]
    assert result.returncode == 0, (
        f"the process died (exit {result.returncode}) on {started[-1] if started else 'setup'}: "
        f"{result.stderr[-3000:]}"
    )
    answers = {line["path"]: line for line in lines if "status" in line}
    assert list(answers) == list(ENTRY_POINTS)
    for path, answer in answers.items():
        assert answer["status"] in (200, 400), (path, answer["status"])
        assert "Traceback" not in answer["body"]
        assert DEEP in answer["body"], path
        if path == "api":
            problem = json.loads(answer["body"])["problems"][0]
            assert (problem["line"], problem["column"]) == (5, 110)
        elif path.startswith("import"):
            assert "line 5, column 110" in answer["body"], path
        else:
            assert "line 5, col 110" in answer["body"], path
    assert lines[-1] == {"versions": 1}


def _evalsite(*args: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ}
    env.pop("DATABASE_URL", None)
    return subprocess.run(
        [str(Path(sys.executable).parent / "evalsite"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_hostile_files_through_the_cli(tmp_path):
    """`evalsite validate` on every hostile suite and dataset at once: exit 2, no signal, each one located."""
    expected = {}
    texts = {case: (source, message, where) for case, (source, message, where, _) in HOSTILE.items()}
    texts["40,000 nested ["] = (CRASHER, DEEP, (5, 110))
    for number, (source, message, where) in enumerate(texts.values()):
        path = tmp_path / f"suite-{number}.yaml"
        path.write_bytes(source.encode())
        expected[path.name] = f"{path.name}:{where[0]}:{where[1]} ", message
    for number, (name, text, message, line) in enumerate(HOSTILE_DATASETS.values()):
        folder = tmp_path / f"dataset-{number}"
        folder.mkdir()
        (folder / name).write_bytes(text.encode())
        (folder / "suite.yaml").write_text(DATASET_SUITE.format(name=name))
        expected[f"dataset-{number}/suite.yaml"] = f"dataset-{number}/{name}:{line}: ", message
    result = _evalsite("validate", *expected, cwd=tmp_path)
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    for name, (where, message) in expected.items():
        assert any(line.startswith(where) and message in line for line in lines), (name, where, message)


@pytest.mark.parametrize("command", ["evalsite run", "evalsite validate", "manage.py evalvalidate"])
def test_what_crashed_the_cli_is_a_located_problem(tmp_path, command):
    (tmp_path / "suite.yaml").write_text(CRASHER)
    if command.startswith("evalsite"):
        result = _evalsite(command.split()[1], "suite.yaml", cwd=tmp_path)
    else:
        env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.settings", "EVALSITE_VAR_DIR": str(tmp_path)}
        env.pop("DATABASE_URL", None)
        result = subprocess.run(
            [sys.executable, "manage.py", "evalvalidate", str(tmp_path / "suite.yaml")],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
    assert result.returncode == 2, (result.returncode, result.stderr[-3000:])  # a signal is negative
    assert "Traceback" not in result.stderr
    assert "suite.yaml:5:110 evals[0].checks[0]" in result.stderr and DEEP in result.stderr


@pytest.mark.django_db
def test_a_hostile_import_report_is_ignored_not_a_crash(client, user):
    # The preview page carries its report back as JSON in a hidden field; anyone can post anything there.
    client.force_login(user)
    data = {"action": "create", "source": GOOD, "report": "[" * 100_000 + "]" * 100_000}
    response = client.post(reverse("suites:import"), data)
    assert response.status_code == 302
    assert Suite.objects.get().name == "keep-me"


def test_deep_flow_nesting_is_located_past_quoted_brackets_and_comments():
    # libyaml refuses ~1,000 levels itself while scanning ahead; the bound is still found at level 101, and
    # brackets inside quotes or after a comment's # do not count.
    head = HEAD + '["' + "[" * 300 + "\", '" + "{" * 300 + "', # [[[[[\n  "
    source = head + "[" * 1_000 + "]" * 1_000 + "]\n"
    with pytest.raises(SuiteError) as caught:
        load_suite(source)
    (problem,) = caught.value.problems
    offset = len(head) + 96  # four levels are open before it: the suite, evals, the eval and the outer list
    assert (problem.line, problem.column) == position(source, offset) and DEEP in problem.message
