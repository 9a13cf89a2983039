"""A matrix: launched from the form and the API (a run per variant, all or none), its page (the grid, each
variant's figures, what differs beyond chance, cells to transcripts, two cells or columns to compare), its
exports and who may see and launch it. Models are the fake endpoint's, which answers per model, played in
this process as a worker plays them."""

from __future__ import annotations

import csv
import io
import json
import re
import xml.etree.ElementTree as ET

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from endpoints.models import Endpoint
from engine.matrix import parse_variants
from runs.matrix import create_matrix
from runs.models import Run, RunMatrix
from suites.services import create_suite
from tests.factories import join, other_project, play
from tests.fakeopenai import Reply

pytestmark = pytest.mark.django_db


def suite_source(evals: int, name: str = "capitals", unknown: tuple[int, ...] = ()) -> str:
    """Evals asking for Canberra: the fake's `good` model knows it, `bad` answers OK; neither knows the
    capital the `unknown` evals ask for."""
    lines = [f"name: {name}", "model: fake/good", "evals:"]
    lines += [
        f"  - {{id: q{n}, prompt: 'Question {n}: the capital of {'Narnia' if n in unknown else 'Australia'}?', "
        "checks: [{contains: Canberra}]}"
        for n in range(evals)
    ]
    return "\n".join(lines) + "\n"


@pytest.fixture
def models(fake_openai, fake_endpoint):
    fake_openai.rule("capital of Australia", "Canberra.", model="good")
    return fake_openai


def launched(user, variants: list[str], evals: int = 3, name: str = "capitals", unknown=()) -> RunMatrix:
    suite = create_suite(owner=user, source=suite_source(evals, name, unknown))
    matrix = create_matrix(version=suite.latest_version, user=user, variants=parse_variants(variants))
    for run in matrix.runs.all():
        play(run)
    return matrix


def test_the_launch_form_opens_a_matrix_of_a_run_per_variant(client, user, models):
    suite = create_suite(owner=user, source=suite_source(2))
    client.force_login(user)
    response = client.post(
        reverse("suites:launch", args=[suite.public_id]),
        {"model": "fake/good", "compare": "fake/bad\nfake/bad@temperature=0.7", "concurrency": 5},
    )
    matrix = RunMatrix.objects.get()
    assert response.status_code == 302 and response["Location"] == reverse(
        "matrices:detail", args=[matrix.pk]
    )
    runs = list(matrix.runs.order_by("created_at"))
    assert [run.model for run in runs] == ["fake/good", "fake/bad", "fake/bad"]
    assert runs[2].options == {"model_settings": {"temperature": 0.7}, "label": "fake/bad temperature=0.7"}
    # One model and nothing to compare with keeps today's single run.
    response = client.post(
        reverse("suites:launch", args=[suite.public_id]), {"model": "fake/good", "concurrency": 5}
    )
    run = Run.objects.filter(matrix=None).get()
    assert response["Location"] == reverse("runs:detail", args=[run.pk])


def elsewhere(fake_endpoint) -> str:
    """A variant on another project's endpoint: refused at launch."""
    Endpoint.objects.create(
        name="theirs",
        base_url=fake_endpoint.base_url,
        api_key_env=fake_endpoint.api_key_env,
        project=other_project(),
    )
    return "theirs/good"


def test_a_variant_that_cannot_start_starts_none(client, user, models, fake_endpoint):
    suite = create_suite(owner=user, source=suite_source(2))
    client.force_login(user)
    response = client.post(
        reverse("suites:launch", args=[suite.public_id]),
        {"model": "fake/good", "compare": f"fake/bad\n{elsewhere(fake_endpoint)}", "concurrency": 5},
    )
    assert response.status_code == 400
    assert "theirs/good: " in response.content.decode()
    assert not Run.objects.exists() and not RunMatrix.objects.exists()
    response = client.post(
        reverse("suites:launch", args=[suite.public_id]),
        {"model": "fake/good", "compare": "fake/bad@temperature=7", "concurrency": 5},
    )
    assert response.status_code == 400 and "temperature" in response.content.decode()
    assert not Run.objects.exists()


def test_the_grid_shows_cells_figures_and_the_significant_difference(client, user, models):
    matrix = launched(user, ["fake/good", "fake/bad"], evals=8)
    client.force_login(user)
    response = client.get(reverse("matrices:detail", args=[matrix.pk]))
    page = response.content.decode()
    assert response.status_code == 200
    good, bad = matrix.runs.order_by("created_at")
    # Every cell opens its transcript; the good model passed all 8 and the bad none.
    assert page.count(reverse("runs:conversation", args=[good.pk, 0])) == 1
    assert page.count(">pass</a>") == 8 and page.count(">FAIL</a>") == 8
    assert "100% [68%–100%]" in page and "0% [0%–32%]" in page
    assert "fake/good beats fake/bad: passed 8 evals it failed, failed 0 it passed" in page
    assert 'hx-trigger="every 2s"' not in page  # every run ended: nothing to poll
    # Each run, and the runs list, lead back to the matrix.
    matrix_url = reverse("matrices:detail", args=[matrix.pk])
    assert matrix_url in client.get(reverse("runs:detail", args=[bad.pk])).content.decode()
    assert client.get(reverse("runs:list")).content.decode().count(matrix_url) == 2


def test_a_variant_on_an_endpoint_without_prices_has_an_unknown_cost(client, user, models, fake_endpoint):
    Endpoint.objects.create(
        name="priced", base_url=fake_endpoint.base_url, api_key_env=fake_endpoint.api_key_env,
        price_input=1000, price_output=1000,
    )  # fmt: skip
    matrix = launched(user, ["fake/good", "priced/good"], evals=2)
    client.force_login(user)
    page = client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()
    costs = re.findall(r'<td class="num"(?: title="([^"]*)")?>(unknown|\$[0-9.]+)</td>', page)
    assert costs[0] == ("no prices for endpoint fake", "unknown")
    assert costs[1][0] == "" and float(costs[1][1].removeprefix("$")) > 0
    data = client.get(f"/api/matrices/{matrix.pk}").json()
    assert [v["unpriced"] for v in data["variants"]] == [["fake"], []]


# Transactional: the cache is written from the conversations' own thread, which a test transaction would lock out.
@pytest.mark.django_db(transaction=True)
def test_a_matrix_played_from_the_cache_says_so_and_leaves_cached_replies_out_of_latency(
    client, user, models
):
    suite = create_suite(owner=user, source="cache: true\n" + suite_source(2))
    variants = parse_variants(["fake/good", "fake/bad"])
    for _ in range(2):  # the second matrix's calls all come from the first's replies
        matrix = create_matrix(version=suite.latest_version, user=user, variants=variants)
        for run in matrix.runs.all():
            play(run)
    client.force_login(user)
    page = client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()
    assert "4 calls came from the response cache" in page
    # No variant did better than the other: none is called best.
    assert 'title="The highest pass rate">best' not in launched_page(
        client, user, ["fake/good", "fake/good@seed=1"]
    )
    # Latency counts only replies the model gave: here none, so p50 and p95 are unknown, not 0 ms.
    assert "0 ms" not in page


def launched_page(client, user, variants: list[str]) -> str:
    matrix = launched(user, variants, evals=2, name="ties")
    return client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()


def test_rows_sort_by_disagreement_and_by_the_suite(client, user, models):
    matrix = launched(user, ["fake/good", "fake/bad"], evals=3, unknown=(1,))
    client.force_login(user)
    page = client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()
    # q1 is the one eval both fail: the two that differ come first.
    assert page.index('data-eval="q0"') < page.index('data-eval="q2"') < page.index('data-eval="q1"')
    assert "2 of 3 evals end differently" in page
    page = client.get(reverse("matrices:detail", args=[matrix.pk]), {"sort": "suite"}).content.decode()
    assert page.index('data-eval="q0"') < page.index('data-eval="q1"') < page.index('data-eval="q2"')


def test_a_row_with_an_errored_or_cancelled_cell_is_incomplete_not_a_difference(client, user, models):
    matrix = launched(user, ["fake/good", "fake/bad"], evals=4)
    good, bad = matrix.runs.order_by("created_at")
    bad.conversations.filter(index=1).update(status="error", error="HTTP 400")
    good.conversations.filter(index=2).update(status="cancelled")
    client.force_login(user)
    page = client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()
    # q0 and q3: good passed where bad failed; q1 and q2 have a verdict on one side only.
    order = [page.index(f'data-eval="q{n}"') for n in (0, 3, 1, 2)]
    assert order == sorted(order)
    rows = {n: page[order[i] : page.index("</tr>", order[i])] for i, n in enumerate((0, 3, 1, 2))}
    assert ">differs</span>" in rows[0] and ">differs</span>" in rows[3]
    for n in (1, 2):
        assert ">differs</span>" not in rows[n] and ">incomplete</span>" in rows[n]
    said = " ".join(page.split())
    assert "2 of 4 evals end differently across variants; 2 more have a cell with no verdict" in said
    csv_rows = list(
        csv.reader(
            io.StringIO(client.get(reverse("matrices:export", args=[matrix.pk, "csv"])).content.decode())
        )
    )
    assert [row[:3] for row in csv_rows[1:]] == [
        ["q0", "0", "yes"], ["q3", "0", "yes"], ["q1", "0", "incomplete"], ["q2", "0", "incomplete"],
    ]  # fmt: skip


def test_an_error_cell_says_why_in_its_title_and_to_a_screen_reader_escaped(client, user, models):
    models.rule("Question 1:", Reply(status=400, text='no <img src=x onerror="alert(1)"> model'), model="bad")
    matrix = launched(user, ["fake/good", "fake/bad"], evals=2)
    good, bad = matrix.runs.order_by("created_at")
    good.conversations.filter(index=0).update(status="cancelled", verdict="stopped: cost limit $0.01 reached")
    client.force_login(user)
    page = client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()
    (error,) = re.findall(r'<a href="[^"]+" class="badge badge-error" title="([^"]*)">error(.*?)</a>', page)
    title, spoken = error
    assert title.startswith("HTTP 400") and "no &lt;img src=x onerror=&quot;alert(1)&quot;&gt; model" in title
    assert title.endswith("(open the transcript)")
    assert spoken.startswith('<span class="sr-only">: HTTP 400') and "no &lt;img src=x" in spoken
    assert "<img" not in page
    (cancelled,) = re.findall(
        r'class="badge badge-cancelled" title="([^"]*)">cancelled<span class="sr-only">', page
    )
    assert cancelled == "stopped: cost limit $0.01 reached (open the transcript)"
    # A cell with a verdict keeps its plain title.
    assert page.count('title="Open the transcript">pass</a>') == 1


def test_a_live_matrix_polls_and_explains_its_empty_grid(client, user, models):
    suite = create_suite(owner=user, source=suite_source(2))
    matrix = create_matrix(
        version=suite.latest_version, user=user, variants=parse_variants(["fake/good,fake/bad"])
    )
    client.force_login(user)
    page = client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()
    assert 'hx-trigger="every 2s"' in page and "0 of 4 conversations ended" in page
    assert page.count(">…</a>") == 4  # queued cells: shown, not yet graded
    for run in matrix.runs.all():
        play(run)
    response = client.get(reverse("matrices:poll", args=[matrix.pk]), HTTP_HX_REQUEST="true")
    assert response.status_code == 286  # htmx's "stop polling"
    assert "4 of 4 conversations ended" in response.content.decode()


def test_a_matrix_still_playing_says_its_figures_are_so_far(client, user, models):
    matrix = launched(user, ["fake/good", "fake/bad"], evals=3)
    good, bad = matrix.runs.order_by("created_at")
    # The bad model's run as a worker leaves it mid-way: one conversation still to play.
    Run.objects.filter(pk=bad.pk).update(status="running", finished_at=None)
    bad.conversations.filter(index=2).update(status="queued", score=None, finished_at=None)
    client.force_login(user)
    page = client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()
    said = " ".join(page.split())
    assert "Per variant, so far</h2>" in said
    assert "Partial: these figures count the 5 of 6 conversations ended so far" in said
    summary = page[page.index('class="table matrix-summary"') : page.index("</table>")]
    good_row, bad_row = summary.split("<tr data-variant=")[1:]
    assert ">so far</span>" not in good_row  # its run has ended: its figures are final
    assert bad_row.count(">so far</span>") == 2  # its pass rate and its count of passed
    assert "best so far</span>" in good_row
    markdown = client.get(reverse("matrices:export", args=[matrix.pk, "md"])).content.decode()
    assert markdown.startswith(
        "**Partial, so far: 5 of 6 conversations ended; still playing: fake/bad. These figures change"
    )
    Run.objects.filter(pk=bad.pk).update(status="failed")
    bad.conversations.filter(index=2).update(status="failed")
    page = client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()
    assert "so far" not in page and "Partial" not in page
    markdown = client.get(reverse("matrices:export", args=[matrix.pk, "md"])).content.decode()
    assert markdown.startswith("| variant |")


def test_the_page_reads_the_same_number_of_queries_whatever_its_size(client, user, models):
    small = launched(user, ["fake/good", "fake/bad"], evals=2, name="small")
    big = launched(
        user, ["fake/good", "fake/bad", "fake/good@temperature=0", "fake/bad@seed=1"], evals=7, name="big"
    )
    client.force_login(user)
    counts = []
    for matrix in (small, big):
        for name in ("matrices:detail", "matrices:poll"):
            with CaptureQueriesContext(connection) as queries:
                assert client.get(reverse(name, args=[matrix.pk])).status_code in (200, 286)
            counts.append(len(queries))
    assert counts[:2] == counts[2:], counts


def test_two_cells_of_one_eval_open_it_side_by_side_and_two_columns_the_runs(client, user, models):
    matrix = launched(user, ["fake/good", "fake/bad"], evals=2)
    good, bad = matrix.runs.order_by("created_at")
    client.force_login(user)
    url = reverse("matrices:compare", args=[matrix.pk])
    response = client.get(url, {"cell": [f"{good.pk}:1:0", f"{bad.pk}:1:0"]})
    assert response["Location"] == reverse("runs:compare_eval", args=[bad.pk, good.pk, "q1"])
    assert client.get(response["Location"]).status_code == 200
    response = client.get(url, {"a": str(good.pk), "b": str(bad.pk)})
    assert response["Location"] == reverse("runs:compare_with", args=[bad.pk, good.pk])
    # One column's two cells compare nothing: back to the grid, saying why.
    response = client.get(url, {"cell": [f"{good.pk}:0:0", f"{good.pk}:1:0"]}, follow=True)
    assert "choose cells in two columns" in response.content.decode()


def test_two_settings_variants_of_one_model_are_told_apart_side_by_side(client, user, models):
    matrix = launched(user, ["fake/good", "fake/good@temperature=0.7"], evals=1)
    cold, warm = matrix.runs.order_by("created_at")
    client.force_login(user)
    page = client.get(reverse("runs:compare_eval", args=[warm.pk, cold.pk, "q0"])).content.decode()
    assert "(capitals v1 · fake/good temperature=0.7)" in page and "(capitals v1 · fake/good)" in page
    page = client.get(reverse("runs:compare_with", args=[warm.pk, cold.pk])).content.decode()
    assert "fake/good temperature=0.7" in page


def test_exports_a_csv_grid_a_markdown_table_and_junit_per_variant(client, user, models):
    matrix = launched(user, ["fake/good", "fake/bad"], evals=2)
    client.force_login(user)
    rows = list(
        csv.reader(
            io.StringIO(client.get(reverse("matrices:export", args=[matrix.pk, "csv"])).content.decode())
        )
    )
    assert rows[0][:4] == ["eval", "iteration", "disagree", "fake/good status"]
    bad = rows[0].index("fake/bad status")
    assert rows[1][:6] == ["q0", "0", "yes", "passed", "1.0", "1"] and rows[1][bad] == "failed"
    markdown = client.get(reverse("matrices:export", args=[matrix.pk, "md"])).content.decode()
    assert "| fake/good | 100% [" in markdown and "| q0 | pass | FAIL |" in markdown
    junit = ET.fromstring(client.get(reverse("matrices:export", args=[matrix.pk, "junit"])).content)
    suites = list(junit.iter("testsuite"))
    assert [s.get("name") for s in suites] == ["capitals [fake/good]", "capitals [fake/bad]"]
    assert [s.get("failures") for s in suites] == ["0", "2"]
    assert client.get(reverse("matrices:export", args=[matrix.pk, "xls"])).status_code == 404


def test_a_variants_tokens_tell_the_models_from_the_judges(client, user, models):
    """The figure per variant is not one sum a judge swells: the model's tokens and the judges' apart, on the
    page, in the exports and from the API, read from the conversations as the workers wrote them."""
    matrix = launched(user, ["fake/good", "fake/bad"], evals=2)
    good, bad = matrix.runs.order_by("created_at")
    good.conversations.update(prompt_tokens=1000, completion_tokens=234, judge_tokens=5000)
    bad.conversations.update(prompt_tokens=7, completion_tokens=0, judge_tokens=0, user_tokens=90)
    client.force_login(user)
    page = client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()
    summary = page[page.index('class="table matrix-summary"') : page.index("</table>")]
    headings = re.findall(r'<th scope="col"[^>]*>([^<]+)</th>', summary)
    assert headings[5:9] == ["Model tokens", "Judge tokens", "Simulated-user tokens", "Cost"]
    cells = [
        re.findall(r'<td class="num">([^<$]+)</td>', row) for row in summary.split("<tr data-variant=")[1:]
    ]
    assert [row[3:6] for row in cells] == [["2,468", "10,000", "0"], ["14", "0", "180"]]
    markdown = client.get(reverse("matrices:export", args=[matrix.pk, "md"])).content.decode()
    assert "| model tokens | judge tokens | simulated-user tokens | cost |" in markdown
    assert "| 2,468 | 10,000 | 0 |" in markdown and "| 14 | 0 | 180 |" in markdown
    rows = list(
        csv.DictReader(
            io.StringIO(client.get(reverse("matrices:export", args=[matrix.pk, "csv"])).content.decode())
        )
    )
    assert [(row["fake/good model_tokens"], row["fake/good judge_tokens"]) for row in rows] == [
        ("1234", "5000")
    ] * 2
    variants = client.get(f"/api/matrices/{matrix.pk}").json()["variants"]
    assert [(v["model_tokens"], v["judge_tokens"], v["user_tokens"], v["tokens"]) for v in variants] == [
        (2468, 10000, 0, 12468),
        (14, 0, 180, 194),
    ]


def test_each_variants_calls_from_the_response_cache_and_what_they_saved(client, user, models):
    """Per variant, on the page, in the exports and from the API: how many calls the response cache answered
    and what they cost when first asked."""
    matrix = launched(user, ["fake/good", "fake/bad"], evals=2)
    good, bad = matrix.runs.order_by("created_at")
    good.conversations.update(cached_calls=3, saved_cost=0.0125)
    client.force_login(user)
    page = client.get(reverse("matrices:detail", args=[matrix.pk])).content.decode()
    summary = page[page.index('class="table matrix-summary"') : page.index("</table>")]
    headings = re.findall(r'<th scope="col"[^>]*>([^<]+)</th>', summary)
    assert headings[8:10] == ["Cached calls", "Saved"]
    cells = [
        re.findall(r'<td class="num"[^>]*>([^<]+)</td>', row)
        for row in summary.split("<tr data-variant=")[1:]
    ]
    assert [row[6:8] for row in cells] == [["6", "$0.0250"], ["0", "$0.0000"]]
    markdown = client.get(reverse("matrices:export", args=[matrix.pk, "md"])).content.decode()
    assert "| cost | cached calls | saved | p50 | p95 |" in markdown
    assert "| 6 | $0.0250 |" in markdown and "| 0 | $0.0000 |" in markdown
    rows = list(
        csv.DictReader(
            io.StringIO(client.get(reverse("matrices:export", args=[matrix.pk, "csv"])).content.decode())
        )
    )
    assert [(row["fake/good cached_calls"], row["fake/good saved_cost"]) for row in rows] == [
        ("3", "0.0125")
    ] * 2
    assert {(row["fake/bad cached_calls"], row["fake/bad saved_cost"]) for row in rows} == {("0", "0.0")}
    variants = client.get(f"/api/matrices/{matrix.pk}").json()["variants"]
    assert [(v["cached_calls"], v["saved_cost"]) for v in variants] == [(6, 0.025), (0, 0.0)]


def test_the_api_launches_and_reads_a_matrix(client, user, models, fake_endpoint):
    create_suite(owner=user, source=suite_source(2))
    client.force_login(user)
    response = client.post(
        "/api/matrices",
        json.dumps(
            {
                "suite": "capitals",
                "variants": [
                    "fake/good",
                    {"model": "fake/bad", "model_settings": {"seed": 3}, "label": "bad, seeded"},
                ],
            }
        ),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    data = response.json()
    assert [v["label"] for v in data["variants"]] == ["fake/good", "bad, seeded"]
    assert data["url"].endswith(reverse("matrices:detail", args=[data["id"]])) and not data["finished"]
    for run in Run.objects.filter(matrix_id=data["id"]):
        play(run)
    data = client.get(f"/api/matrices/{data['id']}").json()
    assert data["finished"] and [v["pass_rate"] for v in data["variants"]] == [1.0, 0.0]
    assert data["variants"][1]["run"]["model"] == "fake/bad"
    refused = client.post(
        "/api/matrices",
        json.dumps({"suite": "capitals", "variants": ["fake/good", elsewhere(fake_endpoint)]}),
        content_type="application/json",
    )
    assert refused.status_code == 422 and "theirs/good" in refused.json()["detail"]
    assert RunMatrix.objects.count() == 1


def test_the_api_refuses_a_variant_named_twice_and_plays_one_whose_name_is_long(client, user, models):
    create_suite(owner=user, source=suite_source(1))
    client.force_login(user)

    def launch(variants):
        body = json.dumps({"suite": "capitals", "variants": variants})
        return client.post("/api/matrices", body, content_type="application/json")

    twice = launch(["fake/good", {"model": "fake/bad", "label": "fake/good"}])
    assert twice.status_code == 422 and "`fake/good` is named twice" in twice.json()["detail"]
    assert not RunMatrix.objects.exists() and not Run.objects.exists()
    long = "fake/good@stop=" + "z" * 150
    response = launch(["fake/good", long])
    assert response.status_code == 201, response.content
    labels = [v["label"] for v in response.json()["variants"]]
    assert labels[0] == "fake/good" and len(labels[1]) == 100 and labels[1].startswith("fake/good stop=zzz")
    for run in Run.objects.filter(matrix_id=response.json()["id"]):
        play(run)
    assert set(Run.objects.values_list("status", flat=True)) == {"passed"}


def test_viewers_see_a_matrix_editors_launch_and_outsiders_get_404(client, user, other_user, models):
    matrix = launched(user, ["fake/good", "fake/bad"], evals=1)
    client.force_login(other_user)
    assert client.get(reverse("matrices:detail", args=[matrix.pk])).status_code == 404
    assert client.get(f"/api/matrices/{matrix.pk}").status_code == 404
    join(other_user, role="viewer")
    assert client.get(reverse("matrices:detail", args=[matrix.pk])).status_code == 200
    body = json.dumps({"suite": "capitals", "variants": ["fake/good", "fake/bad"]})
    assert client.post("/api/matrices", body, content_type="application/json").status_code == 403
