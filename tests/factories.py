"""Runs, conversations and turns for tests. What production computes is stored through its own code, so a test
cannot drift from what a worker writes: a launched run goes through runs.services.create_run, turns through
runs.worker.writes.store_turn (the Turn row and the conversation's counters). A page test that
shows chosen states starts from mock_run and sets its conversations' outcomes itself."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from engine.results import TurnRecord
from projects.models import Membership, Project
from runs import services
from runs.models import ACTIVE, Conversation, Run, Status
from runs.worker import pump, writes
from suites import services as suite_services


def join(user, project: Project | None = None, role: str = "admin") -> Membership:
    """Makes `user` a member of `project` (the default project when None) with `role`."""
    membership, _ = Membership.objects.update_or_create(
        project=project or Project.default(), user=user, defaults={"role": role}
    )
    user.__dict__.pop("_project_roles", None)  # roles are read once per request; a test changes them between
    return membership


def other_project() -> Project:
    """A second project, apart from the default one."""
    project, _ = Project.objects.get_or_create(slug="other", defaults={"name": "Other team"})
    return project


def project_of(user) -> Project:
    """The user's first project (the default one when they are in none)."""
    membership = Membership.objects.filter(user=user).order_by("pk").first()
    return membership.project if membership else Project.default()


def launch(user, source: str, *, files: dict[str, str] | None = None, **options) -> Run:
    """A run of a new suite in the user's project, created as the launch button creates it (its conversations
    queued); `options`: create_run's model and concurrency."""
    suite = suite_services.create_suite(
        owner=user, source=source, files=files or {}, project=project_of(user)
    )
    version = suite.latest_version
    return services.create_run(version=version, user=user, **options)


def store_turns(conversation: Conversation, records: list[TurnRecord]) -> Conversation:
    """Store `records` as the worker playing `conversation` stores each graded turn; the conversation keeps the
    status it had. Returns it refreshed (turn count, tokens and cost added up by the store)."""
    status = conversation.status
    Conversation.objects.filter(pk=conversation.pk).update(status=Status.RUNNING)
    for record in records:
        writes.store_turn(conversation.pk, conversation.attempt, record)
    Conversation.objects.filter(pk=conversation.pk).update(status=status)
    conversation.refresh_from_db()
    return conversation


def play(run: Run | str) -> Run:
    """Play every conversation of a launched run (a Run or its id) in this process, as a worker plays it
    (runs.worker.pump.execute): the real store path, whatever the model. Returns the run refreshed."""
    run = run if isinstance(run, Run) else Run.objects.get(pk=run)
    for conversation_id in run.conversations.values_list("pk", flat=True):
        pump.execute(conversation_id)
    run.refresh_from_db()
    return run


# A suite a CI job runs: two evals on the built-in mock model, both passing; replace "Paris" to break one.
MOCK_CI_SUITE = """\
name: {name}
model: mock
mock:
  rules:
    - {{when: "*2+2*", reply: "4"}}
    - {{when: "*capital*", reply: "Paris"}}
evals:
  - {{id: add, prompt: What is 2+2?, checks: [{{contains: "4"}}]}}
  - {{id: capital, prompt: What is the capital of France?, checks: [{{contains: Paris}}]}}
"""


# The demo suite in small (examples/demo-mock.yaml): a conversation tree that passes once the model recalculates,
# and a question with a check of its own. Tests compose their suite from these parts with demo_suite.
MULTIPLY_EVAL = """\
  - id: multiply
    prompt: What is 15 * 7?
    checks:
      - match: "*105*"
        prompt: That answer is incorrect. Please recalculate 15 multiplied by 7.
        checks:
          - match: "*105*"
"""
ADD_EVAL = """\
  - id: add
    prompt: What is 2 + 2?
    checks:
      - match: "*4*"
"""
CAPITAL_EVAL = """\
  - id: capital
    prompt: What is the capital of Australia?
    checks:
      - contains: Canberra
"""
# The capital question with a follow-up of its own, asked when Canberra is missing.
CAPITAL_THINK_AGAIN_EVAL = (
    CAPITAL_EVAL
    + """\
      - prompt: Think again.
        checks:
          - contains: Canberra
"""
)
# The built-in mock's answers to the demo: wrong at first, right once asked to recalculate.
DEMO_MOCK = """\
mock:
  rules:
    - when: "*recalculate*"
      reply: "Sorry: 105."
    - when: "*15 * 7*"
      reply: "15 * 7 = 100"
  default: "Canberra."
"""


def demo_suite(
    head: str = "name: arithmetic\nmodel: mock\n" + DEMO_MOCK,
    evals: tuple[str, ...] = (MULTIPLY_EVAL, CAPITAL_EVAL),
) -> str:
    """The demo suite: `head` (the suite's keys before `evals:`, each line ending in a newline), then `evals`."""
    return f"{head}evals:\n{''.join(evals)}"


def body(response) -> bytes:
    """A response's body, streamed (results.json, the CSVs) or not."""
    return b"".join(response.streaming_content) if response.streaming else response.content


def bearer(token: str) -> dict:
    """Test-client headers of a request with an API token, as a CI job sends it."""
    return {"HTTP_AUTHORIZATION": f"Bearer {token}"}


def mock_run(
    version, user, *, status: str = Status.PASSED, elapsed: timedelta = timedelta(0), **fields
) -> Run:
    """A run of `version` on the mock model in `status`: started `elapsed` ago, and finished now unless it is
    still queued or running. Its conversations are the test's to add."""
    now = timezone.now()
    return Run.objects.create(
        suite_version=version, created_by=user, model="mock", endpoint_name="mock", is_mock=True, status=status,
        started_at=now - elapsed, finished_at=None if status in ACTIVE else now, **fields,
    )  # fmt: skip
