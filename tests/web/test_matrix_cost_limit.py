"""A matrix with a cost limit: each variant's run has the limit of its own, the launch answers what the runs
may cost as `evalsite run` says it, and the matrix's page says which variant its limit stopped, why and how far
it got (not a bare "cancelled"), the limit in its header, and "not started" in the cells it never started.
The runs are played in this process as a worker plays them, against the fake endpoint with prices."""

from __future__ import annotations

import html
import re

import pytest
from django.urls import reverse

from runs.models import RunMatrix, Status
from runs.worker import budget
from suites.services import create_suite
from tests.factories import play

pytestmark = pytest.mark.django_db

# Six three-turn conversations; each of the fake's one-token "OK" replies costs $0.10 at these prices.
SUITE = "name: budgeted-matrix\nmodel: fake/test-model\nevals:\n" + "".join(
    f"  - id: q{n}\n    turns:\n"
    + "".join(f"      - input: question {n} turn {t}\n" for t in (1, 2, 3))
    + "    checks: [{contains: OK}]\n"
    for n in range(6)
)


def text(page: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


@pytest.fixture
def priced(fake_endpoint):
    fake_endpoint.price_output = 100_000  # USD per million completion tokens
    fake_endpoint.save()
    return fake_endpoint


def launch(client, variants: list[str], **options) -> tuple[dict, RunMatrix]:
    body = {"yaml": SUITE, "variants": variants, "concurrency": 2, "options": options}
    answer = client.post("/api/matrices", body, content_type="application/json")
    assert answer.status_code == 201, answer.content
    return answer.json(), RunMatrix.objects.get(pk=answer.json()["id"])


def test_the_page_says_which_variant_its_cost_limit_stopped_and_how_far_it_got(client, user, priced):
    """The audit's matrix: a priced variant beside the free mock, with a limit each. The priced one plays its
    first conversation whole ($0.30), is stopped at the first turn of its second ($0.40), and never starts
    the other four; the mock plays everything."""
    client.force_login(user)
    launched, matrix = launch(client, ["fake/test-model", "mock"], max_cost=0.35)
    # What the runs may cost, in the words `evalsite run --model a,b` prints, the limit said to be each one's.
    estimate = launched["estimate"]
    assert [line.split(": ")[0] for line in estimate] == ["fake/test-model", "mock", "both variants"]
    assert estimate[0].startswith("fake/test-model: ≈ $360.00 (up to $1,440.00): 6 conversations × 3 turns")
    assert (
        estimate[1] == "mock: no cost: the mock endpoint (6 conversations × 3 turns) · limit $0.35 a variant"
    )
    assert all(line.endswith(" · limit $0.35 a variant") for line in estimate)
    priced_run, mock_run = matrix.runs.order_by("created_at")
    for run in (priced_run, mock_run):
        play(run)
    priced_run.refresh_from_db()
    assert (priced_run.status, priced_run.stop_reason) == (Status.CANCELLED, "cost limit $0.35 reached")

    page = client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()
    said = text(page)
    assert (
        "Cost limit $0.35 a variant: each variant's run stops once it has spent that much, whatever the others "
        "spent; together the 2 may spend $0.70."
    ) in said
    summary = page[page.index('class="table matrix-summary"') : page.index("</table>")]
    priced_row, mock_row = summary.split("<tr data-variant=")[1:]
    assert ">stopped</a>" in priced_row and ">cancelled</a>" not in priced_row
    assert (
        "stopped cost limit $0.35 reached — 1 of 6 conversations played, 1 stopped mid-way, 4 not started"
        in text(priced_row)
    )
    assert ">failed</a>" in mock_row and "cost limit" not in mock_row  # the mock's run played everything
    # Its cells: the conversation stopped mid-way says why; those never started read so, not "cancelled".
    cells = {eval_id: text(row) for eval_id, row in re.findall(r'data-eval="(q\d)">(.*?)</tr>', page, re.S)}
    assert "cancelled : stopped after 1 turn: cost limit $0.35 reached" in cells["q1"]
    for eval_id in ("q2", "q3", "q4", "q5"):
        assert "not started : cost limit $0.35 reached FAIL" in cells[eval_id], cells[eval_id]
        assert "cancelled" not in cells[eval_id]
    markdown = client.get(reverse("matrices:export", args=[matrix.pk, "md"])).content.decode()
    assert "| q2 | not started | FAIL | incomplete |" in markdown
    # The API's progress tells the conversations never started from those stopped mid-way.
    progress = client.get(f"/api/runs/{priced_run.pk}").json()["progress"]
    assert (progress["counts"]["cancelled"], progress["not_started"]) == (5, 4)


def test_a_variant_stopping_says_so_while_its_last_conversations_finish(client, user, priced):
    client.force_login(user)
    _, matrix = launch(client, ["fake/test-model", "mock"], max_cost=0.35)
    first = matrix.runs.order_by("created_at").first()
    first.conversations.filter(index__in=(0, 1)).update(status=Status.RUNNING)
    assert budget.stop(first.pk, 0.35)
    page = client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()
    summary = page[page.index('class="table matrix-summary"') : page.index("</table>")]
    assert "stopping cost limit $0.35 reached; 2 finishing" in text(summary)


def test_the_header_says_the_suites_own_limit_and_nothing_without_one(client, user, priced):
    client.force_login(user)
    create_suite(owner=user, source=SUITE.replace("evals:", "max_cost: 5\nevals:", 1))
    answer = client.post(
        "/api/matrices",
        {"suite": "budgeted-matrix", "variants": ["fake/test-model", "fake/other", "mock"]},
        content_type="application/json",
    )
    assert answer.status_code == 201, answer.content
    assert answer.json()["estimate"][-1].startswith("all 3 variants: ≈ $720.00 (up to $2,880.00)")
    page = text(client.get(reverse("matrices:detail", args=[answer.json()["id"]])).content.decode())
    assert "Cost limit $5.00 a variant:" in page and "together the 3 may spend $15.00." in page
    _, matrix = launch(client, ["fake/test-model", "mock"])  # its next version, without the limit
    assert "Cost limit" not in client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()
