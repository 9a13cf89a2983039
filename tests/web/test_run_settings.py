"""Generation settings on the server: the launch form's settings fields (validated, located), stored with the run,
sent by the worker, shown in the run's header and written in its results.json."""

from __future__ import annotations

import html
import json
import re

import pytest
from django.urls import reverse

from runs.models import Run
from runs.services import create_run
from runs.worker.stopping import stop_run
from suites import services
from tests.factories import body, play

pytestmark = [pytest.mark.django_db]

SUITE = """\
name: settings-page
model: fake/agent
model_settings: {max_tokens: 300, seed: 1}
evals:
  - id: hello
    prompt: Say hello.
    checks: [{contains: OK}]
"""


@pytest.fixture
def suite(user):
    return services.create_suite(owner=user, source=SUITE)


def launch(client, suite, **fields):
    data = {"concurrency": "1", **fields}
    return client.post(reverse("suites:launch", args=[suite.public_id]), data)


def test_the_form_launches_with_settings_that_are_stored_sent_shown_and_reported(
    logged_in, suite, fake_endpoint, fake_openai
):
    response = launch(
        logged_in,
        suite,
        model_settings="temperature: 0.3\nseed: 5\nstop: ['<end>']",
        judge_settings='{"temperature": 0}',
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get()
    assert run.options == {
        "model_settings": {"temperature": 0.3, "seed": 5, "stop": ["<end>"]},
        "judge_settings": {"temperature": 0.0},
    }
    run = play(run)
    sent = fake_openai.chat_requests("Say hello.")[0]
    assert (sent["temperature"], sent["seed"], sent["max_tokens"], sent["stop"]) == (0.3, 5, 300, ["<end>"])

    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    header = page[page.index('class="run-settings"') :][:600]
    for pair in (
        "max_tokens=300",
        "seed=5",
        "temperature=0.3",
        "stop=[&quot;&lt;end&gt;&quot;]",
        "temperature=0.0",
    ):
        assert f"<code>{pair}</code>" in header, header
    assert "judge" in header

    again = logged_in.post(
        reverse("suites:launch", args=[suite.public_id]),
        {"version": "1", "concurrency": "1", "model_settings": _hidden(page, "model_settings"),
         "judge_settings": _hidden(page, "judge_settings")},
    )  # fmt: skip
    assert again.status_code == 302  # "Run again" launches with the same settings
    assert Run.objects.exclude(pk=run.pk).get().options == run.options

    results = json.loads(body(logged_in.get(f"/api/runs/{run.pk}/results")))
    assert results["settings"] == {
        "model": {"temperature": 0.3, "max_tokens": 300, "seed": 5, "stop": ["<end>"]},
        "judge": {"temperature": 0.0},
    }


def test_a_run_without_launch_settings_shows_and_reports_the_suites(
    logged_in, suite, fake_endpoint, fake_openai
):
    assert launch(logged_in, suite).status_code == 302
    run = play(Run.objects.get())
    assert run.options == {}
    assert fake_openai.chat_requests("Say hello.")[0]["seed"] == 1
    results = json.loads(body(logged_in.get(f"/api/runs/{run.pk}/results")))
    assert results["settings"] == {"model": {"max_tokens": 300, "seed": 1}}


def test_a_null_setting_at_launch_sends_none_of_the_suites_and_is_kept_for_run_again(
    logged_in, suite, fake_endpoint, fake_openai
):
    assert launch(logged_in, suite, model_settings="seed: null").status_code == 302
    run = Run.objects.get()
    assert run.options == {"model_settings": {"seed": None}}  # stored as given: the null removes the suite's
    play(run)
    sent = fake_openai.chat_requests("Say hello.")[0]
    assert "seed" not in sent and sent["max_tokens"] == 300
    results = json.loads(body(logged_in.get(f"/api/runs/{run.pk}/results")))
    assert results["settings"] == {"model": {"max_tokens": 300}}
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    assert json.loads(_hidden(page, "model_settings")) == {"seed": None}
    # The API stores it as given too.
    launched = logged_in.post(
        "/api/runs",
        {"suite": "settings-page", "options": {"model_settings": {"seed": None, "max_tokens": 20}}},
        content_type="application/json",
    )
    assert launched.status_code == 201, launched.content
    assert Run.objects.get(pk=launched.json()["id"]).options == {
        "model_settings": {"seed": None, "max_tokens": 20}
    }


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("seed: 1\ntemperature: 5", "line 2, temperature: expected a number at most 2; found the number 5"),
        ("temprature: 0.2", "line 1, temprature: unknown key `temprature` (did you mean `temperature`?)"),
        ("[0.2]", "write a mapping, e.g. {temperature: 0.2, max_tokens: 500}"),
        ("temperature: [", "line 1: not YAML or JSON"),
        ("seed: 1\nseed: 2", "line 2, seed: duplicate key `seed`"),
        ("extra_body:\n  a: &x [1, 1]\n  b: [*x, *x]", "line 2: anchor &x is not allowed"),
    ],
)
def test_a_wrong_setting_is_refused_where_it_is_written_and_nothing_starts(logged_in, suite, text, said):
    response = launch(logged_in, suite, model_settings=text)
    assert response.status_code == 400
    page = response.content.decode()
    assert html.escape(said) in page
    assert '<details class="field launch-settings" open>' in page  # kept open, with what was typed
    assert Run.objects.count() == 0


def test_a_run_stopped_for_a_refused_setting_says_so_in_its_header(logged_in, suite, user, fake_endpoint):
    run = create_run(version=suite.latest_version, user=user)
    reason = "the endpoint refused model_settings.seed: Unrecognized request argument supplied: seed"
    assert stop_run(run.pk, reason) and not stop_run(run.pk, "again")
    run.refresh_from_db()
    assert (run.status, run.stop_reason) == ("cancelled", reason)
    assert list(run.conversations.values_list("status", flat=True)) == ["cancelled"]
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    # The header's state: stopped, the refusal named as the reason (runs.display.state), and the endpoint's
    # words in the notice below it.
    assert (
        "stopped" in page
        and "the endpoint refused model_settings.seed; 1 not started of 1 conversation" in page
    )
    assert re.sub(r"<[^>]+>", "", page).count("Unrecognized request argument supplied: seed") == 1


def _hidden(page: str, name: str) -> str:
    """The value of the page's hidden input `name`, as a browser would send it."""
    found = re.search(rf'<input type="hidden" name="{name}" value="([^"]*)">', page)
    assert found, name
    return html.unescape(found[1])


def test_run_again_launches_with_every_option_the_run_had(logged_in, suite, fake_endpoint, fake_openai):
    """The run page's Run again form carries the cost limit, the cache choice and the simulated user's settings
    too, as a browser sends its hidden fields: a run stopped at its limit must not run again without one."""
    response = launch(
        logged_in, suite, model_settings="seed: 5", user_settings="temperature: 0.9", max_cost="500",
        **{"cache-shown": "1", "cache": "on"},
    )  # fmt: skip
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get()
    assert run.options["max_cost"] == 500 and run.options["user_settings"] == {"temperature": 0.9}
    assert run.options["cache"]["model"] is True
    Run.objects.filter(pk=run.pk).update(status="cancelled")  # ended: its page offers Run again
    page = logged_in.get(reverse("runs:detail", args=[run.pk])).content.decode()
    # The page says what the run may spend and what the cache answers, as it was launched.
    assert '<span class="run-limit">cost limit $500.00</span>' in page
    assert '<span class="run-limit">response cache: model, judges, simulated user</span>' in page
    form = page[: page.index(">Run again</button>")]
    form = form[form.rindex("<form") :]
    fields = {
        name: html.unescape(value)
        for name, value in re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', form)
    }
    again = logged_in.post(reverse("suites:launch", args=[suite.public_id]), fields)
    assert again.status_code == 302, again.content.decode()[:2000]
    assert Run.objects.exclude(pk=run.pk).get().options == run.options
