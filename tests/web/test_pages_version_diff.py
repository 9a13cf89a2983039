"""The suite version diff page: the YAML line diff, evals added / removed / changed by id, and the
version menus; model-authored YAML is escaped; someone else's suite is a 404."""

from __future__ import annotations

import pytest
from django.urls import reverse

from suites.services import create_suite, save_version

pytestmark = pytest.mark.django_db

V1 = """\
name: tutor
model: mock
evals:
  - {id: add, prompt: What is 2+2?, checks: [{contains: "4"}]}
  - {id: greet, prompt: Say hi., checks: [{match: "*"}]}
"""
V2 = V1.replace("Say hi.", "Say hi <script>x</script>.").replace(
    "  - {id: add", "  - {id: bye, prompt: Say bye., checks: [{match: '*'}]}\n  - {id: add"
)


@pytest.fixture
def suite(user):
    suite = create_suite(owner=user, source=V1)
    save_version(suite=suite, source=V2, user=user, note="say bye too")
    return suite


def test_the_diff_names_the_evals_and_shows_the_lines(client, user, suite):
    client.force_login(user)
    page = client.get(reverse("suites:version_diff", args=[suite.public_id, 2, 1]))
    assert page.status_code == 200
    diff = page.context["diff"]
    assert (diff.added, diff.removed, diff.changed) == (["bye"], [], ["greet"])
    html = page.content.decode()
    assert "Say hi &lt;script&gt;x&lt;/script&gt;." in html and "<script>x</script>" not in html
    assert 'class="diff-add"' in html and "say bye too" in html
    version = client.get(reverse("suites:version", args=[suite.public_id, 2])).content.decode()
    assert reverse("suites:version_diff", args=[suite.public_id, 2, 1]) in version


def test_the_menus_redirect_newest_first(client, user, suite):
    client.force_login(user)
    url = reverse("suites:version_diff", args=[suite.public_id, 2, 1])
    response = client.get(url, {"older": 2, "newer": 1})
    assert response.status_code == 302 and response["Location"] == url


def test_someone_elses_suite_is_404(client, other_user, suite):
    client.force_login(other_user)
    assert client.get(reverse("suites:version_diff", args=[suite.public_id, 2, 1])).status_code == 404
