"""The response cache as a launch sets it: the launch form's box, checked as the suite says, and the run's
stored options; the API's `options.cache`; the admin index links the cache's page, which staff alone see."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import Run
from suites.services import create_suite

pytestmark = pytest.mark.django_db

CACHED = (
    "name: s\nmodel: mock\ncache: {model: true}\nevals:\n  - prompt: hi\n    checks:\n      - contains: hi\n"
)
PLAIN = CACHED.replace("cache: {model: true}\n", "").replace("name: s", "name: plain")


def _launch(client, suite, **fields) -> Run:
    before = set(Run.objects.values_list("pk", flat=True))
    response = client.post(
        reverse("suites:launch", args=[suite.public_id]), {"version": "1", "concurrency": "2", **fields}
    )
    assert response.status_code == 302, response.content.decode()[-2000:]
    return Run.objects.exclude(pk__in=before).get()


def test_the_box_is_checked_as_the_suite_says(logged_in, user):
    cached = create_suite(owner=user, source=CACHED)
    plain = create_suite(owner=user, source=PLAIN)
    page = logged_in.get(reverse("suites:detail", args=[cached.public_id])).content.decode()
    assert 'name="cache" value="on" checked' in page
    page = logged_in.get(reverse("suites:detail", args=[plain.public_id])).content.decode()
    assert 'name="cache" value="on">' in page and 'name="cache" value="on" checked' not in page


def test_the_box_turns_the_cache_on_or_off_over_the_suite_and_leaves_a_suites_own_choice(logged_in, user):
    plain = create_suite(owner=user, source=PLAIN)
    assert _launch(logged_in, plain, **{"cache-shown": "1", "cache": "on"}).options["cache"]["judge"] is True
    assert not (_launch(logged_in, plain, **{"cache-shown": "1"}).options or {}).get("cache")

    cached = create_suite(owner=user, source=CACHED)
    # Left checked: the suite's own per-role choice stands (judges stay off).
    assert "cache" not in (_launch(logged_in, cached, **{"cache-shown": "1", "cache": "on"}).options or {})
    off = _launch(logged_in, cached, **{"cache-shown": "1"}).options["cache"]
    assert off == {"model": False, "judge": False, "simulated_user": False, "repeats": False}
    # A form without the box (a version's Run button) leaves the suite's.
    assert "cache" not in (_launch(logged_in, cached).options or {})


def test_the_admin_index_links_the_cache_page_which_staff_alone_open(admin_client, user):
    index = admin_client.get(reverse("admin:index")).content.decode()
    assert reverse("admin_response_cache") in index
    page = admin_client.get(reverse("admin_response_cache"))
    assert page.status_code == 200 and 'data-testid="cache-entries">0<' in page.content.decode()
    assert "csrfmiddlewaretoken" in page.content.decode()
    alice = Client()
    alice.force_login(user)  # no staff member
    response = alice.get(reverse("admin_response_cache"))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
