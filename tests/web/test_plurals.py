"""Counts of one read in the singular everywhere a count is followed by its noun: check reasons, the terminal
report, evalvalidate's summary, and the run pages."""

from __future__ import annotations

import html
import io
import re

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from engine.checks import JudgeContext, Reply, evaluate
from engine.report import format_report
from engine.results import EvalResult, RunReport, RunTotals, SuiteRef, Totals, TurnRecord, Usage
from engine.schema import Check
from runs import display
from runs.models import Conversation, Run, Status, Turn
from suites import services as suite_services

ONE_EVAL = "name: deep\nmodel: mock\nevals:\n  - prompt: hi\n    checks: [{contains: hi}]\n"


def text(fragment: str) -> str:
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", fragment))).strip()


def test_a_token_check_on_a_one_token_reply():
    hi = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hi"}]
    reply = Reply(text="hi", completion_tokens=1, conversation=hi)
    result = evaluate(Check.model_validate({"min_tokens": 1}), reply, JudgeContext(None, "judge"))
    assert result.reason == "1 completion token"


def test_the_terminal_report_summary_of_one_eval_with_one_token():
    turn = TurnRecord(turn=1, prompt="hi", response="hi", usage=Usage(prompt_tokens=0, completion_tokens=1))
    result = EvalResult(index=0, id="e", kind="single-turn", prompt="hi", status="error", verdict="error",
                        error="boom", turns=[turn], totals=Totals.of([turn]))  # fmt: skip
    report = RunReport(suite=SuiteRef(name="deep"), model="mock", endpoint="mock", mock=True, status="error",
                       evals=[result], totals=RunTotals.of([result], duration_s=None))  # fmt: skip
    summary = next(line for line in format_report(report).splitlines() if line.startswith("Summary:"))
    assert "0 passed, 0 failed, 1 error of 1 eval — 1 turn, 1 token," in summary


def test_evalvalidate_says_one_eval_and_one_file(tmp_path):
    good = tmp_path / "deep.yaml"
    good.write_text(ONE_EVAL)
    out = io.StringIO()
    call_command("evalvalidate", str(good), stdout=out)
    assert "suite 'deep', 1 eval\n" in out.getvalue()
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nevals: []\nnope: 1\n")
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("evalvalidate", str(bad), stdout=io.StringIO(), stderr=err)
    assert err.getvalue().splitlines()[-1].endswith("1 of 1 file has problems")


@pytest.mark.django_db
def test_run_pages_with_one_of_everything(client, user):
    client.force_login(user)
    version = suite_services.create_suite(owner=user, source=ONE_EVAL).latest_version
    run = Run.objects.create(suite_version=version, created_by=user, model="mock", endpoint_name="mock",
                             is_mock=True, status=Status.FAILED)  # fmt: skip
    conversation = Conversation.objects.create(
        run=run, index=0, eval_id="hi", prompt="hi", status=Status.FAILED, turn_count=1, style="scripted",
        judge_tokens=1, user_tokens=1,
    )  # fmt: skip
    record = TurnRecord(turn=1, prompt="hi", response="hi", judge_usage=Usage(prompt_tokens=1),
                        user_usage=Usage(completion_tokens=1), passed=False)  # fmt: skip
    Turn.objects.create(conversation=conversation, position=1, record=record.model_dump(mode="json"))

    page = text(client.get(reverse("runs:detail", args=[run.pk])).content.decode())
    assert "1 / 1 conversation done" in page
    assert "failed 1 of 1 eval failed" in page
    transcript = text(client.get(reverse("runs:conversation", args=[run.pk, 0])).content.decode())
    assert "Failed after 1 turn" in transcript  # no stored verdict: the page words it
    assert "judge 1 token ·" in transcript and "simulated user 1 token ·" in transcript
    marks = display.turn_marks([Turn(record={"turn": 1, "checks": [{"passed": True}]}, passed=True)])
    assert marks[0].title == "Turn 1 passed: 1/1 check"
