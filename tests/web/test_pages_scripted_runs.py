"""Run pages for scripted turns, turns, given histories and gates: the gates panel, the ✓✗ strips in the
conversation table (in a constant number of queries), and transcripts with per-turn grades, the given
history marked as given, and the conversation as `[Role]:` text.

Runs are built from rows (no worker): Run, Conversation and Turn with `record` = a TurnRecord.
"""

from __future__ import annotations

import html
import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from engine.results import CheckResult, TurnGrade, TurnRecord, Usage
from runs import selectors
from runs.models import Conversation, Run, ShareLink, Status, Turn
from suites import services as suite_services
from tests.factories import mock_run, store_turns

SUITE = """\
name: per-turn
model: mock
system: You are a careful reviewer.
grader: contains
gates:
  - metric: avg
    op: ">="
    value: 0.6
  - metric: min
    value: 0.9
evals:
  - id: capitals
    input: ["Capital of France?", "And of Germany?", "And of Italy?"]
    ground_truth: [Paris, Berlin, Rome]
  - id: review
    messages:
      - role: system
        content: [{type: file, value: guide.instructions.md}]
      - role: user
        content: I have a <bug>.
      - role: assistant
        content: Can you share the code?
      - role: user
        content: [{type: text, value: "Here it is:"}, {type: file, value: snippet.py}]
      - role: tool
        content: "lint: 1 warning"
    checks:
      - contains: IndexError
  - id: follow-through
    messages:
      - role: user
        content: I have a bug.
      - role: assistant
        content: Can you share it?
    turns:
      - input: "for i in range(3): print(items[i])"
        checks: [{contains: IndexError}]
      - input: Thanks!
        checks: [{not_match: "*IndexError*"}]
  - id: judged
    input: Explain recursion.
    ground_truth: A function that calls itself.
    grader: llm_judge
    rubric: "Does {submission} match {ground_truth}?"
"""
FILES = {
    "guide.instructions.md": "Prefer <small> functions.",
    "snippet.py": "for i in range(len(items) + 1):\n    print(items[i])\n",
}
SNIPPET_BLOCK = "=== snippet.py ===\nfor i in range(len(items) + 1):\n    print(items[i])"
REVIEW_HISTORY = [
    {"role": "user", "content": "I have a <bug>."},
    {"role": "assistant", "content": "Can you share the code?"},
    {"role": "user", "content": "Here it is:\n" + SNIPPET_BLOCK},
    {"role": "tool", "content": "lint: 1 warning"},
]
# The system message the model saw in `review`: the suite's system prompt, then the guidelines its history attached.
REVIEW_SYSTEM = "You are a careful reviewer.\n\n=== guide.instructions.md ===\nPrefer <small> functions."
REVIEW_REPLY = "range(len(items) + 1) reads past the end: an IndexError."

pytestmark = pytest.mark.django_db


@pytest.fixture
def version(user):
    return suite_services.create_suite(owner=user, source=SUITE, files=FILES).latest_version


def grade(turn: int, submission: str, truth: str, passed: bool, **extra) -> TurnGrade:
    rationale = f"{truth!r} {'found' if passed else 'not found'} in the submission"
    return TurnGrade(
        turn=turn,
        score=1.0 if passed else 0.0,
        passed=passed,
        rationale=rationale,
        submission=submission,
        ground_truth=truth,
        grader="contains",
        **extra,
    )


def check(label: str, passed: bool) -> CheckResult:
    return CheckResult(type=label.split()[0], label=label, passed=passed, reason="ok" if passed else "no")


def conversation(run: Run, index: int, eval_id: str, *, style: str, records: list[TurnRecord], **fields):
    created = Conversation.objects.create(
        run=run,
        index=index,
        eval_id=eval_id,
        style=style,
        kind="multi-turn" if len(records) > 1 else "single-turn",
        finished_at=timezone.now(),
        **fields,
    )
    return store_turns(created, records)


def capitals_turns() -> list[TurnRecord]:
    answers = [
        ("Capital of France?", "The capital of France is Paris.", "Paris", True),
        ("And of Germany?", "Berlin.", "Berlin", True),
        ("And of Italy?", "I believe it is Madrid.", "Rome", False),
    ]
    return [
        TurnRecord(
            turn=n,
            node=f"evals[0].input[{n - 1}]",
            prompt=prompt,
            response=reply,
            usage=Usage(prompt_tokens=10, completion_tokens=5),
            passed=ok,
            grade=grade(n, reply, truth, ok),
        )
        for n, (prompt, reply, truth, ok) in enumerate(answers, start=1)
    ]


def make_run(version, user, *, status=Status.FAILED, capitals: int = 1) -> Run:
    """A finished run: `capitals` copies of the 2/3 scripted conversation, a history reply, a `turns`
    conversation after a history, and an llm_judge-graded one."""
    run = mock_run(version, user, status=status, elapsed=timedelta(seconds=5))
    conversation(
        run, 1, "review", style="history", status=Status.PASSED, history=REVIEW_HISTORY, prompt="Here it is:",
        system=REVIEW_SYSTEM,
        records=[TurnRecord(turn=1, node="evals[1].messages", prompt="", response=REVIEW_REPLY,
                            checks=[check("contains IndexError", True)], passed=True)],
        turns_passed=1, turns_total=1, score=1.0, verdict="every turn passed: 1 of 1",
    )  # fmt: skip
    conversation(
        run, 2, "follow-through", style="turns", status=Status.PASSED,
        history=[{"role": "user", "content": "I have a bug."}, {"role": "assistant", "content": "Can you share it?"}],
        records=[
            TurnRecord(turn=1, prompt="for i in range(3): print(items[i])", response="IndexError when short.",
                       checks=[check("contains IndexError", True)], passed=True),
            TurnRecord(turn=2, prompt="Thanks!", response="You're welcome.",
                       checks=[check('not_match "*IndexError*"', True)], passed=True),
        ],
        turns_passed=2, turns_total=2, score=1.0, verdict="every turn passed: 2 of 2",
    )  # fmt: skip
    raw = '{"score": 0.2, "reason": "<vague>"}'
    conversation(
        run, 3, "judged", style="scripted", status=Status.FAILED, prompt="Explain recursion.",
        records=[TurnRecord(
            turn=1, prompt="Explain recursion.", response="It is when things repeat.", passed=False,
            grade=TurnGrade(turn=1, score=0.2, passed=False, rationale="vague", submission="It is when things repeat.",
                            ground_truth="A function that calls itself.", grader="llm_judge", raw=raw),
        )],
        turns_passed=0, turns_total=1, score=0.2, verdict="0 of 1 turn passed, score 0.20 < 1.00",
    )  # fmt: skip
    for copy in range(capitals):
        conversation(
            run, 0 if copy == 0 else 3 + copy, "capitals" if copy == 0 else f"capitals-{copy}", style="scripted",
            status=Status.FAILED, prompt="Capital of France?", records=capitals_turns(),
            turns_passed=2, turns_total=3, score=2 / 3, verdict="2 of 3 turns passed, score 0.67 < 1.00",
        )  # fmt: skip
    return run


def run_url(name: str, run: Run, *args) -> str:
    return reverse(f"runs:{name}", args=[run.pk, *args])


def text(fragment: str) -> str:
    """What a reader sees: tags removed, entities decoded, whitespace collapsed."""
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", fragment))).strip()


def element(page: str, element_id: str, tag: str = "section") -> str:
    return page.split(f'id="{element_id}"', 1)[1].split(f"</{tag}>", 1)[0]


def table_rows(page: str) -> dict[str, str]:
    body = element(page, "conversations").split("<tbody>")[1]
    rows = [text(row) for row in body.split("</tr>") if "<td" in row]
    return {row.split()[1]: row for row in rows}


# --- The run page -------------------------------------------------------------------------------------------


def test_gates_panel_shows_each_gate_with_its_actual_value(logged_in, version, user):
    run = make_run(version, user)
    page = logged_in.get(run_url("detail", run)).content.decode()
    gates = text(element(page, "gates"))
    # avg of 1, 1, 0.2, 2/3 = 0.717; min = 0.2
    assert "avg >= 0.6 — actual 0.717 ✓" in gates
    assert "min >= 0.9 — actual 0.2 ✗" in gates
    assert "1 of 2 failing" in gates
    assert 'class="card gates-card gates-bad"' in page


def test_gates_panel_while_running_says_so_far_and_is_refreshed_by_the_poll(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    page = logged_in.get(run_url("detail", run)).content.decode()
    assert "so far:" in text(element(page, "gates"))
    poll = logged_in.get(run_url("progress", run), HTTP_HX_REQUEST="true").content.decode()
    assert (
        'id="gates" class="card gates-card gates-bad" aria-labelledby="gates-title" hx-swap-oob="true"'
        in poll
    )


def test_no_gates_panel_for_a_suite_without_gates(logged_in, user):
    source = SUITE.split("gates:")[0] + "evals:" + SUITE.split("evals:")[1]
    version = suite_services.create_suite(owner=user, source=source, files=FILES).latest_version
    page = logged_in.get(run_url("detail", make_run(version, user))).content.decode()
    assert 'id="gates"' not in page


def test_conversation_table_shows_scripted_verdicts_and_per_turn_strips(logged_in, version, user):
    run = make_run(version, user)
    rows = table_rows(logged_in.get(run_url("detail", run)).content.decode())
    # the status badge says the outcome once, the verdict how it came out
    assert "failed 2 of 3 turns passed, score 0.67 < 1.00 2/3 ✓✓✗ " in rows["capitals"]
    assert "2/2 ✓✓" in rows["follow-through"]
    assert "0/1 ✗" in rows["judged"]
    assert "✓" not in rows["review"]  # a history reply: its turn count
    assert "passed every turn passed: 1 of 1" in rows["review"]


def test_run_page_queries_stay_constant_with_many_scripted_conversations(
    logged_in, version, user, django_assert_max_num_queries
):
    def queries(run: Run) -> tuple[int, str]:
        with CaptureQueriesContext(connection) as context:
            response = logged_in.get(run_url("detail", run))
        assert response.status_code == 200
        return len(context.captured_queries), response.content.decode()

    first = make_run(version, user, capitals=1)
    selectors.suite_facts(first)  # stored at launch (which mock_run skips), then kept by each process
    few, _ = queries(first)
    many_run = make_run(version, user, capitals=120)
    many, page = queries(many_run)
    assert many == few
    # The table shows 100 conversations a page: every strip, over its two pages, each in one query.
    with CaptureQueriesContext(connection) as second:
        rest = logged_in.get(run_url("detail", many_run) + "?page=2").content.decode()
    assert len(second.captured_queries) <= few  # fewer: the finished run's counts were kept by the first
    assert page.count("2/3 ✓✓✗") == 0 and text(page).count("2/3 ✓✓✗") + text(rest).count("2/3 ✓✓✗") == 120
    # A bigger run shows a page of strips too: only the page's turns are read, in one query.
    huge_run = make_run(version, user, capitals=230)
    huge, page = queries(huge_run)
    assert huge <= few
    assert text(page).count("2/3 ✓✓✗") == 97  # the first page: three other evals, then 97 capitals
    with django_assert_max_num_queries(few):
        logged_in.get(run_url("detail", huge_run))
    # The poll that re-renders the table is bounded the same way.
    Run.objects.filter(pk=huge_run.pk).update(status=Status.RUNNING)
    with django_assert_max_num_queries(few):
        logged_in.get(run_url("progress", huge_run), HTTP_HX_REQUEST="true")


# --- Transcripts --------------------------------------------------------------------------------------------


def test_scripted_transcript_shows_the_summary_and_each_turns_grade(logged_in, version, user):
    run = make_run(version, user)
    page = logged_in.get(run_url("conversation", run, 0)).content.decode()
    verdict = text(element(page, "verdict"))
    assert "2 of 3 turns passed, score 0.67 < 1.00" in verdict
    assert "2/3 ✓✓✗ graded turns passed" in verdict
    for number in (1, 2, 3):
        assert f'href="#turn-{number}" class="mark' in element(page, "verdict")  # each mark jumps to its turn
    third = text(element(page, "turn-3", "li"))
    assert "✗ FAIL contains 0.00" in third
    assert "Submission I believe it is Madrid." in third
    assert "Ground truth Rome" in third
    assert "Rationale 'Rome' not found in the submission" in third
    first = text(element(page, "turn-1", "li"))
    assert "✓ PASS contains 1.00" in first and "Ground truth Paris" in first
    assert "scripted turns" in text(page.split('class="page-head"')[1].split("</div>")[0])


def test_llm_judge_grade_keeps_the_raw_answer_folded(logged_in, version, user):
    run = make_run(version, user)
    page = logged_in.get(run_url("conversation", run, 3)).content.decode()
    turn = element(page, "turn-1", "li")
    assert "✗ FAIL llm_judge 0.20" in text(turn)
    assert '<details class="raw"><summary>Judge\'s raw answer</summary><pre>' in turn
    assert "&quot;reason&quot;: &quot;&lt;vague&gt;&quot;" in turn  # escaped, never |safe


def test_history_is_shown_first_and_marked_as_given(logged_in, version, user):
    run = make_run(version, user)
    page = logged_in.get(run_url("conversation", run, 1)).content.decode()
    given = element(page, "given-title", "ol")
    assert page.index('id="given-title"') < page.index('id="turns"')
    note = "4 messages from the suite, sent before the first live turn — not generated in this run"
    assert note in text(given)
    assert given.count('<span class="tag tag-given">given</span>') == 4
    roles = re.findall(r'class="msg msg-given msg-(\w+)"', given)
    assert roles == ["user", "assistant", "user", "tool"]
    assert "I have a &lt;bug&gt;." in given  # escaped
    file_block = f'<pre class="file-block">{html.escape(SNIPPET_BLOCK)}</pre>'
    assert file_block in given  # the embedded file, exactly as the model saw it
    # The live reply to the history: no user bubble before it.
    live = element(page, "turn-1", "li")
    assert "bubble-user" not in live and "The model replies to the given history" in text(live)
    assert REVIEW_REPLY in html.unescape(live)
    # The system message the model saw: the suite's system prompt and the guidelines file.
    system = page.split('class="system-prompt"')[1].split("</details>")[0]
    assert "with guidelines from guide.instructions.md" in text(system)
    assert "You are a careful reviewer." in system and "Prefer &lt;small&gt; functions." in system


def test_copy_as_text_holds_the_whole_conversation_in_role_format(logged_in, version, user):
    run = make_run(version, user)
    page = logged_in.get(run_url("conversation", run, 1)).content.decode()
    assert 'data-copy="#transcript-text"' in page
    textarea = re.search(r'<textarea id="transcript-text"[^>]*>(.*?)</textarea>', page, re.DOTALL)
    # The system message first: the suite's system prompt and the guidelines that were sent.
    assert html.unescape(textarea.group(1)) == (
        "[System]:\nYou are a careful reviewer.\n\n=== guide.instructions.md ===\nPrefer <small> functions.\n\n"
        "[User]:\nI have a <bug>.\n\n"
        "[Assistant]:\nCan you share the code?\n\n"
        "[User]:\nHere it is:\n" + SNIPPET_BLOCK + "\n\n"
        "[Tool]:\nlint: 1 warning\n\n"
        "[Assistant]:\n" + REVIEW_REPLY
    )
    assert "<bug>" not in page  # escaped in the textarea too
    # Without JS the text is in a <details> anyone can open.
    assert page.index('<details class="as-text" id="as-text">') < page.index('id="transcript-text"')

    turns = logged_in.get(run_url("conversation", run, 2)).content.decode()
    textarea = re.search(r'<textarea id="transcript-text"[^>]*>(.*?)</textarea>', turns, re.DOTALL)
    assert html.unescape(textarea.group(1)) == (
        "[User]:\nI have a bug.\n\n[Assistant]:\nCan you share it?\n\n"
        "[User]:\nfor i in range(3): print(items[i])\n\n[Assistant]:\nIndexError when short.\n\n"
        "[User]:\nThanks!\n\n[Assistant]:\nYou're welcome."
    )


def test_a_running_scripted_transcript_polls_its_strip_and_text(logged_in, version, user):
    run = make_run(version, user, status=Status.RUNNING)
    convo = run.conversations.get(index=0)
    Turn.objects.filter(conversation=convo, position=3).delete()
    Conversation.objects.filter(pk=convo.pk).update(
        status=Status.RUNNING, turn_count=2, turns_passed=None, turns_total=None, verdict=""
    )
    page = logged_in.get(run_url("conversation", run, 0)).content.decode()
    assert "2/2 ✓✓" in text(element(page, "verdict"))  # the marks so far
    third = capitals_turns()[2]
    store_turns(convo, [third])
    poll = logged_in.get(
        run_url("conversation_poll", run, 0), {"after": 2, "status": "running"}, HTTP_HX_REQUEST="true"
    ).content.decode()
    assert 'id="turn-3"' in poll and 'id="turn-2"' not in poll
    assert "2/3 ✓✓✗" in text(element(poll, "verdict"))
    textarea = poll.split('<textarea id="transcript-text"')[1]
    assert textarea.split(">")[0].endswith('hx-swap-oob="true"')  # the text follows the new turn
    assert "I believe it is Madrid." in textarea


def test_a_shared_transcript_shows_the_given_history_and_grades(version, user):
    run = make_run(version, user)
    link = ShareLink.objects.create(run=run, created_by=user)
    visitor = Client()
    review = visitor.get(reverse("share:conversation", args=[link.token, 1])).content.decode()
    assert review.count('<span class="tag tag-given">given</span>') == 4
    capitals = visitor.get(reverse("share:conversation", args=[link.token, 0])).content.decode()
    assert "2/3 ✓✓✗" in text(element(capitals, "verdict")) and "Ground truth Rome" in text(capitals)
    run_page = visitor.get(reverse("share:run", args=[link.token])).content.decode()
    assert "avg >= 0.6 — actual 0.717 ✓" in text(element(run_page, "gates"))


def test_a_turns_mark_is_its_stored_pass_with_its_grade_and_checks_in_the_title():
    """A mark is passed or failed as the engine stored it (Turn.passed), never worked out again from the
    record; the title says what was graded. Ungraded turns (passed None) have no mark."""
    from runs.display import turn_marks

    graded = TurnRecord(turn=1, prompt="q", response="a", grade=grade(1, "a", "a", True), passed=True)
    both = TurnRecord(
        turn=2, prompt="q", response="b", grade=grade(2, "b", "b", True), checks=[check("contains z", False)],
        passed=False,
    )  # fmt: skip
    ungraded = TurnRecord(turn=3, prompt="q", response="c")
    rows = [
        Turn(position=r.turn, record=r.model_dump(mode="json"), passed=r.passed)
        for r in (graded, both, ungraded)
    ]
    marks = turn_marks(rows)
    assert [(mark.turn, mark.passed) for mark in marks] == [(1, True), (2, False)]
    assert marks[1].title == "Turn 2 failed: contains 1.00, 0/1 check"
    rows[1].passed = True  # the stored pass decides, whatever the record's checks say
    assert [mark.passed for mark in turn_marks(rows)] == [True, True]


def test_launch_stores_the_system_message_and_history_the_model_is_sent(version, user):
    """What make_run stores by hand is what a launch stores: the suite's system prompt with the guidelines
    a history attached, and the history with its files embedded."""
    from runs.services import create_run

    run = create_run(version=version, user=user)
    stored = {c.eval_id: (c.system, c.history) for c in run.conversations.all()}
    assert stored["review"] == (REVIEW_SYSTEM, REVIEW_HISTORY)
    assert stored["capitals"] == ("You are a careful reviewer.", [])
