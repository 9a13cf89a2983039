"""One source of truth: what a launch stores is what the model is sent and what the pages show.

The system message and the given history are built once per eval when a run is launched and stored on each
conversation; the worker sends them as stored, and the transcript shows them as stored without reading the
suite again. A turn's pass and a conversation's verdict are shown as the engine stored them.

Conversations are played in this process (runs.worker.pump.execute) against the fake OpenAI server.
"""

from __future__ import annotations

import functools
import re
import sys

import pytest
import yaml
from django.db.models import F
from django.urls import reverse

from engine import history as engine_history
from engine import loader, source
from engine.history import given_messages
from runs import specs
from runs.models import Run, Status, Turn
from runs.services import create_run
from runs.worker.pump import execute
from suites.services import create_suite

pytestmark = pytest.mark.django_db

SUITE = """\
name: single source
model: fake/m
system: You are a careful reviewer.
evals:
  - id: review
    messages:
      - role: system
        content: [{type: file, value: guide.instructions.md}]
      - role: user
        content: [{type: text, value: "Here it is:"}, {type: file, value: snippet.py}]
    checks: [{contains: IndexError}]
  - id: steps
    iterations: 2
    turns:
      - input: First?
        checks: [{contains: one}]
      - input: Second?
        checks: [{contains: two}]
"""
FILES = {"guide.instructions.md": "Prefer small functions.", "snippet.py": "print(items[3])\n"}


def spy_on(monkeypatch, function) -> list:
    """Record every call of `function`, under whatever name any loaded module imported it."""
    calls: list = []

    @functools.wraps(function)
    def spy(*args, **kwargs):
        calls.append(args)
        return function(*args, **kwargs)

    for module in list(sys.modules.values()):
        for name, value in list(getattr(module, "__dict__", {}).items()):
            if value is function:
                monkeypatch.setattr(module, name, spy)
    return calls


@pytest.fixture
def launched(user, fake_endpoint, fake_openai):
    fake_openai.rule("Here it is:", "An IndexError: items has three elements.")
    fake_openai.script("First?", ["one", "nope"])
    version = create_suite(owner=user, source=SUITE, files=FILES).latest_version
    return version


def test_the_history_is_built_at_launch_at_most_once_per_eval_and_sent_as_stored(
    launched, user, client, fake_openai, monkeypatch
):
    builds = spy_on(monkeypatch, engine_history.build_history)
    run = create_run(version=launched, user=user)
    at_launch = len(builds)
    assert 1 <= at_launch <= 2  # at most one per eval: the two iterations of `steps` share theirs
    review = run.conversations.get(eval_id="review")
    assert review.system == (
        "You are a careful reviewer.\n\n=== guide.instructions.md ===\nPrefer small functions."
    )
    assert review.history == [{"role": "user", "content": "Here it is:\n=== snippet.py ===\nprint(items[3])"}]

    for conversation_id in run.conversations.values_list("pk", flat=True):
        execute(conversation_id)
    run.refresh_from_db()
    assert run.status == Status.FAILED  # `steps` fails its second turn
    (sent,) = fake_openai.chat_requests(first_user=review.history[0]["content"])
    assert sent["messages"] == given_messages(review.system, review.history)
    steps = run.conversations.filter(eval_id="steps")
    for request in fake_openai.chat_requests(first_user="First?"):
        assert request["messages"][0] == {"role": "system", "content": "You are a careful reviewer."}

    client.force_login(user)
    for conversation in [review, *steps]:
        page = client.get(
            reverse("runs:conversation", args=[run.pk, conversation.index]),
            {"iteration": conversation.iteration},
        )
        assert page.status_code == 200
    assert client.get(reverse("runs:detail", args=[run.pk])).status_code == 200
    assert client.get(reverse("runs:json", args=[run.pk])).status_code == 200
    assert len(builds) == at_launch  # not again by the worker, the transcripts, the run page or the JSON


def test_a_transcript_shows_the_stored_system_message_without_parsing_the_suite(
    launched, user, client, monkeypatch
):
    run = create_run(version=launched, user=user)
    monkeypatch.setattr(specs, "_suites", {})  # as in a fresh web process
    parses = [
        spy_on(monkeypatch, function)
        for function in (
            yaml.load,
            yaml.safe_load,
            yaml.parse,
            yaml.compose,
            source.parse_yaml,
            loader.load_saved_suite,
            loader.load_suite,
        )
    ]
    client.force_login(user)
    page = client.get(reverse("runs:conversation", args=[run.pk, 0])).content.decode()
    assert [len(calls) for calls in parses] == [0] * len(parses)
    system = page.split('class="system-prompt"')[1].split("</details>")[0]
    assert "with guidelines from guide.instructions.md" in system
    assert "You are a careful reviewer." in system and "Prefer small functions." in system
    assert '<pre class="file-block">=== snippet.py ===\nprint(items[3])</pre>' in page  # the given history


def test_pages_show_a_turns_pass_and_a_verdict_as_stored(launched, user, client):
    """The ✓✗ marks read Turn.passed and the headline reads Conversation.reason: changing what is stored
    changes the page, though the turn's checks in its record still say otherwise."""
    run = create_run(version=launched, user=user)
    steps = run.conversations.get(eval_id="steps", iteration=0)
    execute(steps.pk)
    client.force_login(user)
    transcript_url = reverse("runs:conversation", args=[run.pk, steps.index])

    def marks(fragment: str) -> str:
        return "".join(re.findall(r'class="mark mark-(?:pass|fail)"[^>]*>(.)</', fragment))

    def shown() -> tuple[str, str, str]:
        transcript = client.get(transcript_url).content.decode()
        verdict = transcript.split('id="verdict"', 1)[1].split("</section>", 1)[0]
        table = (
            client.get(reverse("runs:detail", args=[run.pk])).content.decode().split('id="conversations"')[1]
        )
        row = table.split(f'href="{transcript_url}"', 1)[1].split("</tr>", 1)[0]
        return marks(verdict), marks(row), verdict

    verdict_marks, row_marks, _ = shown()
    assert verdict_marks == row_marks == "✓✗"  # `one`, then `nope` where `two` was asked for
    Turn.objects.filter(conversation=steps, position=1).update(passed=False)
    Turn.objects.filter(conversation=steps, position=2).update(passed=True)
    run.conversations.filter(pk=steps.pk).update(reason="failed: as the engine worded it")
    # As every change to a finished run's conversations does (an override, a retry): its kept table goes.
    Run.objects.filter(pk=run.pk).update(revision=F("revision") + 1)
    verdict_marks, row_marks, verdict = shown()
    assert verdict_marks == row_marks == "✗✓"
    assert "Failed: as the engine worded it" in verdict


@pytest.mark.django_db(transaction=True)
def test_migrating_gives_conversations_stored_before_it_the_system_message_they_were_sent(user):
    """runs 0008 fills Conversation.system for runs launched before it: the suite's system prompt, with the
    guidelines an eval's history attached."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    from runs.models import Conversation

    before, after = [("runs", "0007_retry_budget_and_waits")], [("runs", "0008_conversation_system")]
    executor = MigrationExecutor(connection)
    executor.migrate([*before, ("suites", "0004_safe_file_names")])  # before suites belonged to projects
    apps = executor.loader.project_state([*before, ("suites", "0002_suite_files")]).apps
    suite = apps.get_model("suites", "Suite").objects.create(owner_id=user.pk, name="old")
    version = apps.get_model("suites", "SuiteVersion").objects.create(
        suite=suite, number=1, source=SUITE, sha256="old"
    )
    for name, content in FILES.items():
        apps.get_model("suites", "SuiteFile").objects.create(
            version=version, name=name, content=content, size=len(content)
        )
    run = apps.get_model("runs", "Run").objects.create(
        suite_version=version, created_by_id=user.pk, model="fake/m", endpoint_name="fake"
    )
    for index, eval_id in enumerate(["review", "steps"]):
        apps.get_model("runs", "Conversation").objects.create(run=run, index=index, eval_id=eval_id)

    executor = MigrationExecutor(connection)
    executor.migrate(after)
    try:
        assert dict(Conversation.objects.filter(run_id=run.pk).values_list("eval_id", "system")) == {
            "review": "You are a careful reviewer.\n\n=== guide.instructions.md ===\nPrefer small functions.",
            "steps": "You are a careful reviewer.",
        }
    finally:  # back to the latest schema: later migrations add columns the tests after this one use
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())


def test_a_status_has_one_symbol_on_every_page(launched, user, client):
    """runs.display.STATUS_SYMBOLS is the one mapping: a transcript's verdict icon and the iteration marks
    of the switcher and of the run page all take a status's symbol from it."""
    from runs.display import STATUS_SYMBOLS

    run = create_run(version=launched, user=user)
    run.conversations.filter(eval_id="steps", iteration=0).update(status=Status.CANCELLED)
    run.conversations.filter(eval_id="steps", iteration=1).update(status=Status.ERROR)
    client.force_login(user)
    transcript = client.get(reverse("runs:conversation", args=[run.pk, 1])).content.decode()
    icon = re.search(r'<span class="verdict-icon" aria-hidden="true">(.)</span>', transcript)[1]
    switcher = transcript.split('id="iteration-switcher"', 1)[1].split("</nav>", 1)[0]
    run_page = client.get(reverse("runs:detail", args=[run.pk])).content.decode()
    row = run_page.split('id="iter-1"', 1)[1].split("</tr>", 1)[0]
    expected = STATUS_SYMBOLS["cancelled"] + STATUS_SYMBOLS["error"]
    assert icon == STATUS_SYMBOLS["cancelled"]
    for strip in (switcher, row):
        assert "".join(re.findall(r'class="imark imark-\w+[^"]*"[^>]*>(.)</a>', strip)) == expected
    review = client.get(reverse("runs:conversation", args=[run.pk, 0])).content.decode()
    assert (
        re.search(r'<span class="verdict-icon" aria-hidden="true">(.)</span>', review)[1]
        == STATUS_SYMBOLS["queued"]
    )
