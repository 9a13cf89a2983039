"""/api/docs works without internet: Swagger UI's assets come from our own static files, not a CDN."""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders

from tests.e2e.conftest import PASSWORD, PageWatch, log_in, screenshot


@pytest.mark.django_db
def test_docs_page_references_no_external_url(client, user):
    client.force_login(user)
    response = client.get("/api/docs")
    assert response.status_code == 200
    html = response.content.decode()
    urls = re.findall(r"""(?:src|href)=["']([^"']+)""", html)
    assert any(url.endswith("swagger-ui-bundle.js") for url in urls), urls
    external = [url for url in urls if urlsplit(url).netloc or url.startswith("//")]
    assert not external, f"the docs page loads from other hosts: {external}"
    for url in urls:  # and each asset is one of our static files (collectstatic gathers them for whitenoise)
        assert url.startswith(settings.STATIC_URL) and finders.find(url.removeprefix(settings.STATIC_URL)), (
            url
        )


@pytest.mark.browser
def test_docs_render_with_the_network_off(page, user):  # noqa: F811
    from playwright.sync_api import expect

    aborted: list[str] = []

    def offline(route):
        host = urlsplit(route.request.url).hostname
        if host in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            aborted.append(route.request.url)
            route.abort("internetdisconnected")

    page.route("**/*", offline)
    watch = PageWatch(page)
    log_in(page, user.username, PASSWORD)
    page.goto("/api/docs")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("evalsite API")
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible()
    expect(page.locator(".opblock-summary-path", has_text="/api/suites/validate")).to_be_visible()
    screenshot(page, "api-docs-offline.png")
    assert not aborted, f"requests to other hosts: {aborted}"
    watch.check()
