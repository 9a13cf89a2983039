"""The response cache through real workers: two worker processes play a run with `cache: true`, then a re-run
of the unchanged suite is answered from the store they share (the database's table) with no model call, its
turns marked cached and its page saying what was saved; purging the store from the admin page makes the next
run ask again."""

from __future__ import annotations

import pytest
from django.urls import reverse

from endpoints.models import Endpoint
from runs import response_cache, services
from runs.models import Status, Turn
from suites.services import create_suite
from tests.conftest import FAKE_KEY_ENV
from tests.e2e.conftest import wait_for_run

pytestmark = [pytest.mark.e2e]

CONVERSATIONS = 12


def _suite_source() -> str:
    evals = "\n".join(
        f"  - {{id: q{i}, prompt: question {i}, checks: [{{contains: OK}}]}}" for i in range(CONVERSATIONS)
    )
    return f"name: cached\nmodel: fake/test-model\ncache: true\niterations: 2\nevals:\n{evals}\n"


def test_two_workers_share_the_cache_and_a_rerun_makes_no_model_call(
    user, client, fake_openai, start_worker, django_user_model
):
    fake_openai.latency = 0.05
    for i in range(CONVERSATIONS):
        fake_openai.script(f"question {i}", [f"OK {i}"])
    Endpoint.objects.create(
        name="fake", base_url=fake_openai.base_url, api_key_env=FAKE_KEY_ENV, max_concurrency=8,
        price_input=1.0, price_output=2.0,
    )  # fmt: skip
    start_worker(concurrency=4, hostname="cache-a@%h")
    start_worker(concurrency=4, hostname="cache-b@%h")
    suite = create_suite(owner=user, source=_suite_source())

    first = wait_for_run(services.create_run(version=suite.latest_version, user=user, concurrency=8))
    assert first.status == Status.PASSED
    asked = len(fake_openai.chat_requests())
    assert asked == 2 * CONVERSATIONS  # each iteration asked once: repeats are not answered by each other
    assert len({c.worker.split(":", 1)[0] for c in first.conversations.all()}) == 2  # both workers played
    assert response_cache.size().entries == 2 * CONVERSATIONS

    second = wait_for_run(services.create_run(version=suite.latest_version, user=user, concurrency=8))
    assert second.status == Status.PASSED
    assert len(fake_openai.chat_requests()) == asked  # not one model call
    turns = Turn.objects.filter(conversation__run=second)
    assert turns.count() == 2 * CONVERSATIONS and all(turn.record["cached"] for turn in turns)
    assert all(turn.record["cost"] == 0 for turn in turns)
    spent = sum(c.cost for c in first.conversations.all())
    saved = sum(c.saved_cost for c in second.conversations.all())
    assert spent > 0 and saved == pytest.approx(spent)

    client.force_login(user)
    page = client.get(reverse("runs:detail", args=[second.pk])).content.decode()
    stats = page[page.index('<dl class="stats">') :][:1500]
    assert f"{2 * CONVERSATIONS} calls from the cache" in " ".join(stats.split()), stats
    conversation = second.conversations.order_by("index").first()
    transcript = client.get(
        reverse("runs:conversation", args=[second.pk, conversation.index])
    ).content.decode()
    assert 'data-testid="cached-badge"' in transcript

    staff = django_user_model.objects.create_superuser("root", "root@example.com", "pw-root-123")
    client.force_login(staff)
    admin_page = client.get(reverse("admin_response_cache")).content.decode()
    assert f'data-testid="cache-entries">{2 * CONVERSATIONS}<' in admin_page
    client.post(reverse("admin_response_cache"), {})  # not confirmed: nothing goes
    assert response_cache.size().entries == 2 * CONVERSATIONS
    client.post(reverse("admin_response_cache"), {"confirm": "yes"})
    assert response_cache.size().entries == 0

    third = wait_for_run(services.create_run(version=suite.latest_version, user=user, concurrency=8))
    assert third.status == Status.PASSED
    assert len(fake_openai.chat_requests()) == 2 * asked  # purged: asked again
