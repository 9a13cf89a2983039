"""Pages that must not outlive their access: share-link pages are never cached, and the API's docs and
schema are for signed-in users once DEBUG is off."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from runs.services import revoke_share_link
from tests.web.test_csp import build_site

pytestmark = pytest.mark.django_db


def test_every_shared_page_forbids_caching(django_user_model):
    site = build_site(django_user_model)
    link = site.run.share_links.get()
    visitor = Client()
    token = link.token
    urls = [
        reverse("share:run", args=[token]),
        reverse("share:progress", args=[token]),
        reverse("share:json", args=[token]),
        reverse("share:conversation", args=[token, 0]),
        reverse("share:conversation_poll", args=[token, 0]),
    ]
    for url in urls:
        response = visitor.get(url)
        assert response.status_code in (200, 286), url  # 286: a finished run's poll says stop
        assert response.headers["Cache-Control"] == "private, no-store", url
    # Revoked: the page that says so is not cached either, so the old page cannot come back from a cache.
    revoke_share_link(link)
    gone = visitor.get(reverse("share:run", args=[token]))
    assert gone.status_code == 404
    assert gone.headers["Cache-Control"] == "private, no-store"


@pytest.mark.parametrize("url", ["/api/docs", "/api/openapi.json"])
def test_api_docs_need_sign_in_when_debug_is_off(client, user, settings, url):
    settings.DEBUG = False
    response = client.get(url)
    if url == "/api/docs":  # a person: sent to sign in, and back
        assert response.status_code == 302
        assert response.headers["Location"] == f"{reverse('login')}?next=/api/docs"
    else:  # a program: refused like the rest of the API
        assert response.status_code == 401
        assert response.json() == {"detail": "Unauthorized"}
    client.force_login(user)
    assert client.get(url).status_code == 200


@pytest.mark.parametrize("url", ["/api/docs", "/api/openapi.json"])
def test_api_docs_stay_open_when_debug_is_on(client, settings, url):
    settings.DEBUG = True
    response = client.get(url)
    assert response.status_code == 200
    assert b"evalsite API" in response.content
