"""The run page's rows come from a cache (the `rows` cache, keyed by what each row shows) once rendered: a
cached page must read exactly as a freshly rendered one, and any change to a row must show at once.

Runs are launched and played through the worker's own path on the built-in mock model (tests.factories).
"""

from __future__ import annotations

import re

import pytest
from django.core.cache import caches
from django.db.models import F
from django.urls import reverse
from django.utils.safestring import mark_safe

from runs import reviews
from runs.models import Conversation, Run, ShareLink, Status
from runs.page_cache import ROW_FRAGMENT
from tests.factories import body, launch, play

pytestmark = pytest.mark.django_db

SUITE = """\
name: rows
model: mock
mock:
  rules:
    - {when: "*2+2*", reply: "4"}
    - {when: "*script*", reply: "<script>alert(1)</script> done"}
evals:
  - id: add
    prompt: What is 2+2?
    checks: [{contains: "4"}]
  - id: scripted
    turns:
      - input: Say <script> twice
        checks: [{contains: done}]
      - input: And 2+2?
        checks: [{contains: "5"}]
  - id: third
    prompt: What is 2+2 again?
    checks: [{contains: "4"}]
"""


@pytest.fixture(autouse=True)
def _empty_rows_cache():
    caches["rows"].clear()
    caches["tables"].clear()
    yield
    caches["rows"].clear()
    caches["tables"].clear()


def rows(html: bytes) -> list[str]:
    """The conversation table's rows, as sent."""
    return re.findall(r'<tr id="conv-\d+".*?</tr>', html.decode(), flags=re.S)


def table(html: bytes) -> str:
    return re.search(r'<section id="conversations".*?</section>', html.decode(), flags=re.S).group()


def row_of(html: bytes, conversation: Conversation) -> str:
    return next(row for row in rows(html) if row.startswith(f'<tr id="conv-{conversation.pk}"'))


@pytest.fixture
def run(user):
    return play(launch(user, SUITE))


def page(client, run) -> bytes:
    response = client.get(reverse("runs:detail", args=[run.pk]))
    assert response.status_code == 200
    return body(response)


def test_a_cached_page_reads_exactly_as_a_fresh_one(logged_in, run):
    fresh = page(logged_in, run)
    assert len(caches["rows"]._cache) == 3  # each finished row put in the cache as it was rendered
    cached = page(logged_in, run)
    assert len(rows(fresh)) == 3
    assert table(cached) == table(fresh)  # the rest differs by its CSRF token and CSP nonce only
    # Model output and prompts stay escaped when they come from the cache (a SafeString of escaped HTML).
    assert b"<script>" not in cached and b"&lt;script&gt;" in cached


def test_rows_are_served_from_the_cache(logged_in, run):
    page(logged_in, run)
    # Stand in for a cached row: the page sends what the cache holds under the row's key, without rendering.
    key = next(iter(caches["rows"]._cache))
    caches["rows"].set(key.split(":", 2)[-1], mark_safe('<tr id="conv-0" class="from-cache"></tr>'))
    caches["tables"].clear()  # as in a process that has the rows but not the whole table
    assert b'class="from-cache"' in page(logged_in, run)


def test_a_changed_row_is_rendered_again(logged_in, run):
    before = page(logged_in, run)
    conversation = run.conversations.get(eval_id="add")
    assert "passed" in row_of(before, conversation)
    Conversation.objects.filter(pk=conversation.pk).update(status=Status.FAILED, verdict="a new verdict")
    # As every change to a finished run's conversations does (an override, a retry): its kept table goes.
    Run.objects.filter(pk=run.pk).update(revision=F("revision") + 1)
    after = row_of(page(logged_in, run), conversation)
    assert "badge-failed" in after and "a new verdict" in after


def test_an_override_shows_on_the_next_page(logged_in, user, run):
    scripted = run.conversations.get(eval_id="scripted")
    before = row_of(page(logged_in, run), scripted)
    assert "1/2" in before and "overridden" not in before
    reviews.override_outcome(scripted, user, turn=2, target="checks[0]", passed=True, note="5 is fine here")
    after = row_of(page(logged_in, run), scripted)
    assert "overridden" in after and "2/2" in after


def test_a_share_page_links_rows_to_the_share_link_not_the_owners_pages(logged_in, client, user, run):
    page(logged_in, run)  # the owner's rows, cached
    link = ShareLink.objects.create(run=run, created_by=user)
    logged_in.logout()
    shared = body(client.get(reverse("share:run", args=[link.token])))
    assert len(rows(shared)) == 3
    for row in rows(shared):
        assert f'href="/s/{link.token}/c/' in row and f"/runs/{run.pk}/" not in row


def test_running_rows_are_not_cached(logged_in, user):
    run = launch(user, SUITE)  # queued: nothing played
    page(logged_in, run)
    assert len(caches["rows"]._cache) == 0
    Conversation.objects.filter(run=run, eval_id="add").update(status=Status.RUNNING)
    assert "turn 1…" in row_of(page(logged_in, run), run.conversations.get(eval_id="add"))


def test_the_fragment_name_is_the_templates(logged_in, run):
    """The view looks rows up under the name the template's {% cache %} tag stores them under."""
    page(logged_in, run)
    assert all(f"template.cache.{ROW_FRAGMENT}." in key for key in caches["rows"]._cache)
