"""An endpoint that echoes the key in its 401 does not leak it anywhere.

The fake server answers 401 "Incorrect API key provided: <the key it was sent>", as some providers do. The
run goes through a real worker; the key must then be in no stored row, no page (run, transcript, progress,
results.json, API, share link, admin) and not in the worker's log.
"""

from __future__ import annotations

import secrets

import pytest
from django.core import serializers
from django.urls import reverse

from endpoints.models import Endpoint
from runs import services
from runs.models import Conversation, Status, Turn
from suites.services import create_suite
from tests.e2e.conftest import wait_for_run
from tests.factories import body

pytestmark = [pytest.mark.e2e]

SUITE = """
name: leaky
model: leaky/test-model
evals:
  - id: one
    prompt: What is 2 + 2?
    checks:
      - contains: "4"
  - id: two
    prompt: What is 3 + 3?
    checks:
      - contains: "6"
"""


@pytest.mark.timeout(120)
def test_a_key_echoed_in_a_401_is_nowhere_to_be_seen(
    user, fake_endpoint, fake_openai, start_worker, client, admin_client
):
    key = "sk-proj-" + secrets.token_hex(24) + "Zq7w"
    Endpoint.objects.create(
        name="leaky", base_url=fake_openai.base_url, api_key_env="LEAKY_PROVIDER_CREDS", timeout=5
    )
    worker = start_worker(concurrency=2, LEAKY_PROVIDER_CREDS=key)
    suite = create_suite(owner=user, source=SUITE)
    run = wait_for_run(services.create_run(version=suite.latest_version, user=user))

    assert run.status == Status.ERROR
    conversations = list(run.conversations.all())
    assert [c.status for c in conversations] == ["error", "error"]
    # The endpoint did echo it, and the person reading the run still learns which key was refused.
    assert key in fake_openai.requests[0]["headers"]["authorization"]
    assert conversations[0].error == (
        "HTTP 401 from leaky: Incorrect API key provided: sk-proj-…Zq7w. "
        "You can find your API key at https://platform.openai.com/account/api-keys."
    )

    stored = serializers.serialize(
        "json",
        [run, *Conversation.objects.filter(run=run), *Turn.objects.filter(conversation__run=run)],
    )
    client.force_login(user)
    link = services.create_share_link(run, user)
    conversation = conversations[0]
    pages = {
        "stored rows": stored,
        "worker log": worker.log_path.read_text(errors="replace"),
    }
    for url in [
        reverse("runs:detail", args=[run.pk]),
        reverse("runs:progress", args=[run.pk]),
        reverse("runs:json", args=[run.pk]),
        reverse("runs:conversation", args=[run.pk, 0]),
        f"/api/runs/{run.pk}",
        f"/api/runs/{run.pk}/progress",
        f"/api/runs/{run.pk}/results",
        f"/api/runs/{run.pk}/results.junit.xml",
        f"/api/runs/{run.pk}/results.md",
        reverse("share:run", args=[link.token]),
        reverse("share:json", args=[link.token]),
        reverse("share:conversation", args=[link.token, 0]),
    ]:
        response = client.get(url)
        assert response.status_code in (200, 286), url  # 286: a finished run's progress stops polling
        pages[url] = body(response).decode()
    for url in [
        reverse("admin:runs_run_change", args=[run.pk]),
        reverse("admin:runs_conversation_changelist"),
        reverse("admin:runs_conversation_change", args=[conversation.pk]),
    ]:
        response = admin_client.get(url)
        assert response.status_code == 200, url
        pages[url] = response.content.decode()

    assert "Incorrect API key provided" in pages[reverse("runs:conversation", args=[run.pk, 0])]
    secret_part = key[len("sk-proj-") : -4]
    leaks = [where for where, text in pages.items() if key in text or secret_part in text]
    assert leaks == []
