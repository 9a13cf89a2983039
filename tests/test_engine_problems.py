"""Problems as a suite's author reads them: in line order everywhere.

pydantic finds problems in the schema's field order, not the file's line order.
"""

from __future__ import annotations

import io
import textwrap

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from engine.loader import SuiteError, SuiteProblem, load_suite


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


@pytest.mark.django_db
def test_the_api_lists_problems_in_line_order(client, user):
    client.force_login(user)
    response = client.post(reverse("api:validate"), {"source": OUT_OF_ORDER}, content_type="application/json")
    problems = response.json()["problems"]
    assert [(p["line"], p["column"], p["path"]) for p in problems] == IN_LINE_ORDER


@pytest.mark.django_db
def test_the_editor_lists_problems_in_line_order(client, user):
    client.force_login(user)
    body = client.post(reverse("suites:validate"), {"source": OUT_OF_ORDER}, HTTP_HX_REQUEST="true")
    text = body.content.decode()
    shown = [text.index(f'data-line="{line}" data-column="{column}"') for line, column, _ in IN_LINE_ORDER]
    assert shown == sorted(shown)


@pytest.mark.django_db
def test_the_cli_lists_problems_in_line_order(tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(OUT_OF_ORDER)
    stderr = io.StringIO()
    with pytest.raises((CommandError, SystemExit)):
        call_command("evalvalidate", str(path), stderr=stderr, stdout=io.StringIO())
    lines = [line for line in stderr.getvalue().splitlines() if line.startswith(f"{path}:")]
    assert [line.split(" ")[1].rstrip(":") for line in lines] == [path for _, _, path in IN_LINE_ORDER]
