"""A run its endpoint stopped by refusing a generation setting, played by a worker's pump in this process against
the fake endpoint, three conversations at a time: the conversation whose refusal stopped the run keeps its error,
the two in flight refused the same way read "stopped" (they were sent), the other nine "not started"; the run
page says the refusal once, in a notice that says what to change, its header counts them so, and the
transcripts and exports read the same."""

from __future__ import annotations

import html
import json
import re
import xml.etree.ElementTree as ET

import pytest
from django.urls import reverse

from engine.options import RunOptions
from engine.schema.settings import ModelSettings
from runs import services
from runs.models import Run, Status
from runs.worker.pump import Pump
from suites.services import create_suite
from tests.factories import body

pytestmark = pytest.mark.django_db(transaction=True)

EVALS, AT_ONCE = 12, 3
WORDS = "Unsupported parameter: 'max_tokens' is not supported with this model."

CHECKED = "checks: [{contains: OK}]"
JUDGED = "checks: [{llm_judge: {criteria: Says OK}}]"
SIMULATED = "simulate: {persona: You are a customer., max_turns: 3}, checks: [{contains: OK}]"


def suite_source(settings: str, eval_keys: str) -> str:
    evals = "".join(f"  - {{id: e{n}, prompt: 'question {n}', {eval_keys}}}\n" for n in range(EVALS))
    return f"name: refused\nmodel: fake/m\n{settings}evals:\n{evals}"


@pytest.fixture
def published(monkeypatch) -> list[int]:
    sent: list[int] = []
    monkeypatch.setattr("runs.worker.tasks.run_conversation.delay", sent.append)
    return sent


def play_refused(user, fake_openai, published, source: str, refused: str, options=None) -> Run:
    """The run launched AT_ONCE conversations at a time and played by one pump until nothing is left."""
    fake_openai.refuse(refused)
    fake_openai.latency = 0.2  # the first wave's calls are all out before the first refusal comes back
    version = create_suite(owner=user, source=source).latest_version
    run = services.create_run(version=version, user=user, concurrency=AT_ONCE, options=options)
    pump = Pump(capacity=AT_ONCE)
    assert all(pump.offer(pk) for pk in published)
    pump.serve(until_idle=True)
    run.refresh_from_db()
    assert not run.conversations.filter(status__in=[Status.QUEUED, Status.RUNNING]).exists()
    return run


def text(page: str) -> str:
    """What a person reads: tags out, whitespace squeezed."""
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", page)))


def rows(page: str) -> dict[str, str]:
    """Each row's verdict cell as read, by eval id."""
    found = re.findall(
        r'href="[^"]*">(e\d+)</a>.*?class="verdict-cell[^"]*"[^>]*>(.*?)</td>', page, re.DOTALL
    )
    return {eval_id: text(cell).strip() for eval_id, cell in found}


@pytest.mark.parametrize(
    ("suite_settings", "eval_keys", "where", "stopped_at"),
    [
        ("model_settings: {max_tokens: 50}\n", CHECKED, "model_settings.max_tokens", "at its first call"),
        # The model answered; its judge's call, or the simulated user's, was refused: the turn is kept.
        ("judge_settings: {max_tokens: 50}\n", JUDGED, "judge_settings.max_tokens", "after 1 turn"),
        ("user_settings: {max_tokens: 50}\n", SIMULATED, "user_settings.max_tokens", "after 1 turn"),
    ],
)
def test_the_refusal_is_said_once_and_each_conversation_reads_as_it_ended(
    logged_in, user, fake_endpoint, fake_openai, published, suite_settings, eval_keys, where, stopped_at
):
    # Not `settings`: pytest-django's fixture of that name points the default endpoint at the fake.
    run = play_refused(user, fake_openai, published, suite_source(suite_settings, eval_keys), "max_tokens")
    reason = f"the endpoint refused {where}: {WORDS}"
    assert (run.status, run.stop_reason) == (Status.CANCELLED, reason)
    ended = {c.eval_id: c for c in run.conversations.all()}
    errors = [c for c in ended.values() if c.status == Status.ERROR]
    stopped = [c for c in ended.values() if c.status == Status.CANCELLED and c.verdict.startswith("stopped")]
    unplayed = [c for c in ended.values() if c.verdict.startswith("not started")]
    # One error says it; the two in flight with it were refused too (or, for a simulated user asked after the
    # run had stopped, stopped before their next call): stopped, not errors again, nor "not started".
    assert len(errors) == 1 and errors[0].error == reason
    assert len(stopped) == AT_ONCE - 1 and len(unplayed) == EVALS - AT_ONCE
    assert {c.verdict for c in stopped} == {f"stopped {stopped_at}: {reason}"}
    assert {(c.status, c.turn_count) for c in unplayed} == {(Status.CANCELLED, 0)}

    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    shown = text(page)
    # The header: why, in a few words, and how every conversation ended, counted as they ended.
    assert (
        f"stopped the endpoint refused {where}; 1 error, 2 stopped, 9 not started of 12 conversations"
        in shown
    )
    assert ".;" not in shown
    assert re.search(r"\b1 / 12 done, 2 stopped, 9 not started\b", shown), shown  # the progress card
    # The endpoint's words once, in the notice, with what to change; the rows name the refusal without them.
    assert shown.count(WORDS) == 1
    notice = text(page[page.index('id="run-refusal"') :][:1500])
    role, key = where.split(".")
    assert f"The endpoint refused {where} : “{WORDS}”" in notice
    assert f"Remove or change {key} in the suite's {role}" in notice
    cells = rows(page)
    assert len(cells) == EVALS
    assert cells[errors[0].eval_id].endswith(f"the endpoint refused {where}")
    assert {cells[c.eval_id] for c in stopped} == {f"stopped {stopped_at}: the endpoint refused {where}"}
    assert {cells[c.eval_id] for c in unplayed} == {"not started"}

    # A conversation's own page says the whole of how it ended.
    for conversation, said, end in [
        (stopped[0], f"Stopped {stopped_at}: {reason}", "The run stopped; this conversation stopped here."),
        (unplayed[0], f"Not started: {reason}", "The run had stopped before this conversation started."),
    ]:
        transcript = text(
            logged_in.get(reverse("runs:conversation", args=[run.pk, conversation.index])).content.decode()
        )
        assert said in transcript and end in transcript and "cancelled" not in transcript

    results = json.loads(body(logged_in.get(reverse("runs:json", args=[run.pk]))))
    assert results["stop_reason"] == reason
    verdicts = {e["id"]: (e["status"], e["verdict"]) for e in results["evals"]}
    assert verdicts[errors[0].eval_id][0] == "error"
    assert {verdicts[c.eval_id] for c in stopped} == {("cancelled", f"stopped {stopped_at}: {reason}")}
    assert {verdicts[c.eval_id] for c in unplayed} == {("cancelled", f"not started: {reason}")}

    junit = ET.fromstring(body(logged_in.get(reverse("runs:export", args=[run.pk, "junit"]))))
    suite = junit.find("testsuite")
    assert (suite.get("errors"), suite.get("skipped")) == ("1", "11")
    skipped = {
        case.get("name"): case.find("skipped").get("message")
        for case in suite.iter("testcase")
        if case.find("skipped") is not None
    }
    assert {skipped[c.eval_id] for c in stopped} == {f"stopped {stopped_at}: {reason}"}
    assert {skipped[c.eval_id] for c in unplayed} == {f"not started: {reason}"}
    summary = body(logged_in.get(reverse("runs:export", args=[run.pk, "md"]))).decode()
    assert "**1** errored · 2 stopped · 9 not started of 12 evals" in summary


def test_a_setting_the_launch_sent_is_to_be_changed_at_the_next_launch(
    logged_in, user, fake_endpoint, fake_openai, published
):
    options = RunOptions(model_settings=ModelSettings(seed=7))
    run = play_refused(user, fake_openai, published, suite_source("", CHECKED), "seed", options)
    assert len(fake_openai.chat_requests()) == AT_ONCE  # the first wave, each refused; no other asked
    notice = text(logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode())
    assert (
        "This run's launch set seed : launch again from the suite's page with it removed or changed under "
        "Generation settings → Model settings (Run again sends it as it was)."
    ) in notice
