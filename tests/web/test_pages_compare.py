"""The compare pages: two runs of a suite eval by eval (regressions first, filters, deltas, pass
rates of iterated evals), one eval's two conversations turn by turn (changed replies as a word diff, flipped
checks, where a tree's follow-ups parted), a pinned baseline that compare opens on, and access rules. Runs
use the built-in mock model, played in this process as a worker plays them."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import Run
from runs.services import create_run
from suites.services import create_suite, save_version
from tests.factories import play

pytestmark = pytest.mark.django_db

# Not the demo suite: its mock answers so that two versions differ eval by eval, which the comparison asserts.
SUITE = """\
name: compare-me
model: mock
mock:
  rules:
    - {when: "*15 * 7*", reply: "15 * 7 = 105."}
    - {when: "*capital*", reply: "Paris is the capital."}
    - {when: "*greet*", reply: "Hello there!"}
evals:
  - id: multiply
    prompt: What is 15 * 7?
    checks:
      - contains: "105"
        prompt: Please recalculate 15 * 7.
        checks: [{contains: "105"}]
  - {id: capital, prompt: What is the capital of France?, checks: [{contains: Paris}]}
  - {id: greet, prompt: Please greet me., checks: [{contains: Hello}]}
"""


@pytest.fixture
def pair(user):
    suite = create_suite(owner=user, source=SUITE)
    before = play(create_run(version=suite.latest_version, user=user))
    # The new version breaks the capital and answers the first multiplication wrongly (a follow-up fixes it),
    # and the greeting says something else that still passes.
    edited = (
        SUITE.replace('reply: "Paris is the capital."', 'reply: "It is <b>Lyon</b>."')
        .replace('{when: "*15 * 7*", reply: "15 * 7 = 105."}', '{when: "*recalculate*", reply: "Sorry: 105."}\n    - {when: "*15 * 7*", reply: "15 * 7 = 100."}')
        .replace('reply: "Hello there!"', 'reply: "Hello, dear friend!"')
    )  # fmt: skip
    save_version(suite=suite, source=edited, user=user)
    after = play(create_run(version=suite.latest_version, user=user))
    return before, after


def test_the_table_lists_regressions_first_with_deltas(client, user, pair):
    before, after = pair
    client.force_login(user)
    page = client.get(reverse("runs:compare_with", args=[after.pk, before.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    rows = page.context["rows"]
    assert [(row["id"], row["change"]) for row in rows] == [
        ("capital", "regression"), ("multiply", "unchanged"), ("greet", "unchanged"),
    ]  # fmt: skip
    assert rows[0]["score_delta_text"] == "-1.00"
    multiply = rows[1]
    assert (multiply["sides"][0].passed_on_turn, multiply["sides"][1].passed_on_turn) == (1, 2)
    assert "on turn 1" in html and "on turn 2" in html
    regressions = client.get(
        reverse("runs:compare_with", args=[after.pk, before.pk]), {"change": "regression"}
    )
    assert [row["id"] for row in regressions.context["rows"]] == ["capital"]
    assert "-0.333" in html  # the mean score: 1.0 before, 2/3 after


def test_runs_on_an_endpoint_without_prices_tell_no_cost_difference(client, user, pair):
    before, after = pair
    client.force_login(user)
    url = reverse("runs:compare_with", args=[after.pk, before.pk])
    assert "$0.0000" in client.get(url).content.decode()  # the mock: free, and said so
    Run.objects.filter(pk=after.pk).update(unpriced=["fast"])
    page = client.get(url)
    html = page.content.decode()
    assert page.context["cost_delta_text"] == "unknown"
    assert "→ unknown: no prices for endpoint fast" in " ".join(html.split())
    assert all(row["cost_delta_text"] == "" for row in page.context["rows"])


def test_a_turn_by_turn_view_shows_the_diff_the_flips_and_the_parting(client, user, pair):
    before, after = pair
    client.force_login(user)
    page = client.get(reverse("runs:compare_eval", args=[after.pk, before.pk, "multiply"]))
    assert page.status_code == 200
    first, second = page.context["pairs"]
    assert first["reply_changed"] and [(f.label, f.before, f.after) for f in first["flips"]] == [
        ('contains "105"', True, False)
    ]
    assert second["only"] == "after" and page.context["diverged_at"] is None
    capital = client.get(reverse("runs:compare_eval", args=[after.pk, before.pk, "capital"]))
    html = capital.content.decode()
    assert "&lt;b&gt;Lyon&lt;/b&gt;" in html and "<b>Lyon</b>" not in html  # model output is escaped
    assert "<ins>" in html and "<del>" in html


def test_the_pinned_baseline_is_what_compare_opens_on(client, user, pair):
    before, after = pair
    client.force_login(user)
    choose = client.get(reverse("runs:compare", args=[after.pk]))
    assert choose.status_code == 200 and [r.pk for r in choose.context["candidates"]] == [before.pk]
    client.post(reverse("runs:pin", args=[before.pk]), {"next": "https://evil.example/"})
    before.refresh_from_db()
    assert before.pinned_at is not None
    opened = client.get(reverse("runs:compare", args=[after.pk]))
    assert opened.status_code == 302 and opened["Location"] == reverse(
        "runs:compare_with", args=[after.pk, before.pk]
    )
    # Pinning another run of the suite unpins the first; the open redirect is refused.
    response = client.post(reverse("runs:pin", args=[after.pk]), {"next": "https://evil.example/"})
    assert response["Location"] == reverse("runs:detail", args=[after.pk])
    before.refresh_from_db()
    assert before.pinned_at is None and Run.objects.get(pk=after.pk).pinned_at is not None


def test_someone_elses_runs_are_404(client, other_user, pair):
    before, after = pair
    client.force_login(other_user)
    assert client.get(reverse("runs:compare_with", args=[after.pk, before.pk])).status_code == 404
    assert client.get(reverse("runs:compare_eval", args=[after.pk, before.pk, "capital"])).status_code == 404
    assert client.post(reverse("runs:pin", args=[before.pk])).status_code == 404


def test_the_compare_page_makes_the_same_queries_whatever_the_run_size(client, user):
    many = SUITE + "".join(
        f"  - {{id: extra-{n}, prompt: Please greet me {n}., checks: [{{contains: Hello}}]}}\n"
        for n in range(30)
    )
    suite = create_suite(owner=user, source=SUITE)
    small = (play(create_run(version=suite.latest_version, user=user)),
             play(create_run(version=suite.latest_version, user=user)))  # fmt: skip
    big_suite = create_suite(owner=user, source=many.replace("compare-me", "compare-many"))
    big = (play(create_run(version=big_suite.latest_version, user=user)),
           play(create_run(version=big_suite.latest_version, user=user)))  # fmt: skip
    client.force_login(user)
    counts = []
    for before, after in (small, big):
        with CaptureQueriesContext(connection) as queries:
            assert client.get(reverse("runs:compare_with", args=[after.pk, before.pk])).status_code == 200
        counts.append(len(queries))
    assert counts[0] == counts[1], counts


def test_the_run_page_offers_compare_and_pinning(client, user, pair):
    before, after = pair
    client.force_login(user)
    page = client.get(reverse("runs:detail", args=[after.pk])).content.decode()
    assert reverse("runs:compare", args=[after.pk]) in page and "Pin as baseline" in page
    assert "Compare with baseline" not in page
    client.post(reverse("runs:pin", args=[before.pk]))
    page = client.get(reverse("runs:detail", args=[after.pk])).content.decode()
    assert "Compare with baseline" in page
    assert "Unpin baseline" in client.get(reverse("runs:detail", args=[before.pk])).content.decode()
