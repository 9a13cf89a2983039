"""The Content-Security-Policy: every page sends it, and no page carries what it refuses.

The policy allows scripts and styles from our own static files only, so a page must hold no inline
<script>, no on*= handler attribute, no <style> element and no style= attribute. The browser test
(tests/e2e/test_browser_csp.py) then visits the same pages in chromium and counts violations.
"""

from __future__ import annotations

from dataclasses import dataclass
from html.parser import HTMLParser

import pytest
from django.urls import reverse

from runs.services import create_run, create_share_link
from runs.worker.pump import execute
from suites.services import create_suite, save_version
from tests.factories import DEMO_MOCK, demo_suite

ROOT_PASSWORD = "pw-root-123"
SUITE = demo_suite(
    "name: csp-suite\ndescription: Two questions and a follow-up, answered by the built-in mock.\nmodel: mock\n"
    + DEMO_MOCK
)


@dataclass
class Site:
    """A superuser with a suite of two versions, a finished run with a share link, and every page's URL."""

    user: object
    pages: dict[str, str]
    run: object


def build_site(django_user_model) -> Site:
    root = django_user_model.objects.create_superuser("root", password=ROOT_PASSWORD)
    suite = create_suite(owner=root, source=SUITE)
    save_version(suite=suite, user=root, source=SUITE.replace("Two questions", "Two short questions"))
    run = create_run(version=suite.latest_version, user=root)
    for conversation_id in run.conversations.values_list("pk", flat=True):
        execute(conversation_id)
    run.refresh_from_db()
    assert run.status == "passed", run.status
    other = create_run(version=suite.latest_version, user=root)
    for conversation_id in other.conversations.values_list("pk", flat=True):
        execute(conversation_id)
    link = create_share_link(run, root)
    pages = {
        "suites list": reverse("suites:list"),
        "new suite": reverse("suites:new"),
        "editor": reverse("suites:detail", args=[suite.public_id]),
        "version": reverse("suites:version", args=[suite.public_id, 1]),
        "version diff": reverse("suites:version_diff", args=[suite.public_id, 2, 1]),
        "import": reverse("suites:import"),
        "runs list": reverse("runs:list"),
        "run": reverse("runs:detail", args=[run.pk]),
        "transcript": reverse("runs:conversation", args=[run.pk, 0]),
        "compare": reverse("runs:compare_with", args=[other.pk, run.pk]),
        "compare, choose": reverse("runs:compare", args=[other.pk]),
        "compare, one eval": reverse("runs:compare_eval", args=[other.pk, run.pk, "multiply"]),
        "api tokens": reverse("tokens"),
        "share": reverse("share:run", args=[link.token]),
        "shared transcript": reverse("share:conversation", args=[link.token, 0]),
        "admin index": reverse("admin:index"),
        "admin runs": reverse("admin:runs_run_changelist"),
        "admin run": reverse("admin:runs_run_change", args=[run.pk]),
        "api docs": "/api/docs",
        "not found": "/no-such-page/",
    }
    return Site(user=root, pages=pages, run=run)


class InlineFinder(HTMLParser):
    """Everything in a page that a script-src/style-src 'self' policy refuses."""

    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []
        self._script_open = False

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        for name, _value in attrs:
            if name.startswith("on") or name.startswith("hx-on"):
                self.found.append(f"<{tag} {name}=…>")
            if name == "style":
                self.found.append(f"<{tag} style=…>")
        if tag == "style":
            self.found.append("<style> element")
        # A JSON data block is not run, so the policy lets it be.
        if tag == "script" and "src" not in attributes and attributes.get("type") != "application/json":
            self._script_open = True
            self.found.append("inline <script>")
        if tag == "a" and (attributes.get("href") or "").lower().startswith("javascript:"):
            self.found.append("javascript: link")


def inline_code(html: str) -> list[str]:
    finder = InlineFinder()
    finder.feed(html)
    return finder.found


@pytest.fixture
def site(django_user_model, client) -> Site:
    built = build_site(django_user_model)
    client.force_login(built.user)
    return built


@pytest.mark.django_db
def test_every_page_sends_a_policy_without_inline_script(client, site):
    for name, url in site.pages.items():
        response = client.get(url)
        assert response.status_code == (404 if name == "not found" else 200), (name, response.status_code)
        policy = response.headers.get("Content-Security-Policy")
        assert policy, f"{name}: no Content-Security-Policy header"
        directives = {part.split()[0]: part.split()[1:] for part in policy.split(";") if part.strip()}
        assert directives["script-src"] == ["'self'"], (name, policy)
        assert directives["style-src"] == ["'self'"], (name, policy)
        assert directives["frame-ancestors"] == ["'none'"], (name, policy)
        assert directives["default-src"] == ["'self'"] and directives["base-uri"] == ["'self'"], policy
        assert directives["form-action"] == ["'self'"] and directives["object-src"] == ["'none'"], policy
        assert "'unsafe-eval'" not in policy and "'unsafe-inline'" not in policy, (name, policy)


@pytest.mark.django_db
def test_no_page_carries_inline_script_or_style(client, site):
    for name, url in site.pages.items():
        html = client.get(url).content.decode()
        assert not inline_code(html), f"{name} ({url}): {inline_code(html)}"
    # The partials htmx swaps in are held to the same rule.
    run = site.run
    for url in (
        reverse("runs:progress", args=[run.pk]),
        reverse("runs:conversation_poll", args=[run.pk, 0]),
    ):
        html = client.get(url).content.decode()
        assert not inline_code(html), f"{url}: {inline_code(html)}"


@pytest.mark.django_db
def test_login_and_lockout_pages_carry_no_inline_code(client, user):
    html = client.get(reverse("login")).content.decode()
    assert not inline_code(html)
    for _ in range(5):
        response = client.post(reverse("login"), {"username": user.username, "password": "wrong"})
    assert response.status_code == 429 and "Content-Security-Policy" in response.headers
    assert not inline_code(response.content.decode())


def test_the_finder_finds_what_the_policy_refuses():
    """The check above can fail: each kind of inline code is caught."""
    page = (
        '<script>alert(1)</script><script src="/static/x.js"></script>'
        '<script type="application/json" id="data">{}</script>'
        '<button onclick="go()">x</button><div style="width: 3%"></div><style>p{}</style>'
        '<div hx-on:click="x()"></div><a href="javascript:alert(1)">x</a>'
    )
    assert inline_code(page) == [
        "inline <script>",
        "<button onclick=…>",
        "<div style=…>",
        "<style> element",
        "<div hx-on:click=…>",
        "javascript: link",
    ]
