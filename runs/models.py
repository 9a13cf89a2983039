"""Runs, conversations, turns, endpoint pauses, shared links and the response cache's answers.

Run state lives here, never only in the broker: a run is a row, each eval of it is a Conversation row, and
each graded reply is a Turn row written once. Workers claim conversations with conditional updates.
"""

import secrets
import uuid

from django.conf import settings
from django.core.validators import MinValueValidator
from django.db import models
from django.urls import reverse
from django.utils import timezone

from engine import outcomes
from engine.clients import DEFAULT
from engine.schema import Style


class EndpointPause(models.Model):
    """An endpoint that answered "rate limited": every worker process holds its calls back until then.

    One row per endpoint name (named or `default`), written when a call gets a 429 and read by each process
    at most once a second per endpoint (runs.pauses). `recovered_at` is when the endpoint last answered
    after failing: calls backing off from an outage in every process retry then.
    """

    endpoint = models.CharField(max_length=50, unique=True)
    paused_until = models.DateTimeField()
    recovered_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.endpoint} paused until {self.paused_until}"


class CachedAnswer(models.Model):
    """A model's answer kept by the server's response cache in the database (runs.response_cache), under the
    digest of everything that shaped it (engine.cache.call_key), with when it was kept: an answer is refused
    once older than EVALSITE_CACHE_TTL as it is now, whatever it was when the answer was kept."""

    key = models.CharField(max_length=64, primary_key=True)
    answer = models.TextField()  # JSON, as engine.cache keeps it: its length is what the admin counts
    kept_at = models.DateTimeField()

    class Meta:
        db_table = "evalsite_cached_answer"
        # The oldest first: the bound's cull and the admin's oldest entry; the TTL's cut-off on each count.
        indexes = [models.Index(fields=["kept_at"], name="cached_answer_kept")]

    def __str__(self) -> str:
        return f"answer {self.key[:12]}… kept {self.kept_at:%Y-%m-%d %H:%M}"


# The engine's statuses (engine.outcomes.Status), as the choices of the status columns.
Status = models.TextChoices("Status", [(status.name, status.value) for status in outcomes.Status])

ACTIVE = (Status.QUEUED, Status.RUNNING)
FINISHED = (Status.PASSED, Status.FAILED, Status.ERROR, Status.CANCELLED, Status.SKIPPED)


class RunMatrix(models.Model):
    """One launch of a suite version against several models or settings variants: a run each, compared on
    one page (evals × models)."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    suite_version = models.ForeignKey(
        "suites.SuiteVersion", on_delete=models.PROTECT, related_name="matrices"
    )
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="matrices")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="matrices"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"matrix of {self.suite_version} ({self.created_at:%Y-%m-%d %H:%M})"


class Run(models.Model):
    """One launch of a suite version.

    Status: queued -> running (first conversation claimed) -> passed | failed | error (last conversation
    done: error if any conversation errored, else failed if any failed, else passed); queued/running ->
    cancelled by a user; passed | failed | error -> running again when a user retries its errored
    conversations. Every transition is a conditional update on the current status.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    suite_version = models.ForeignKey("suites.SuiteVersion", on_delete=models.PROTECT, related_name="runs")
    # Its suite's project, kept on the run for the runs list's index.
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="runs")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    model = models.CharField(max_length=200, help_text="Model reference the run used, after any override.")
    endpoint_name = models.CharField(max_length=50)
    is_mock = models.BooleanField(default=False)
    concurrency = models.PositiveSmallIntegerField(default=10, validators=[MinValueValidator(1)])
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    created_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # The baseline of its suite since then: compare pages and `--baseline pinned` use it. At most one run of a
    # suite is pinned (services.pin_baseline unpins the others).
    pinned_at = models.DateTimeField(null=True, blank=True)
    # A re-graded run: its conversations are this run's, graded again under (possibly edited) checks, with no
    # call to the model under test (engine.conversation.run_eval's replay).
    regraded_from = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="regrades"
    )
    # Counts the changes made to a finished run's conversations (a reviewer's overrides, a retry): the run
    # page keeps a finished run's aggregates under its status, finished_at and revision.
    revision = models.PositiveIntegerField(default=0, editable=False)
    # The progress aggregate as runs.worker.scheduling.finalize found it when the run ended ({"status", "revision",
    # "by_eval", "progress"}), so that the first view of a finished run of 100,000 conversations does not
    # scan them all; read only while the run's status and revision are still those.
    summary = models.JSONField(default=dict, blank=True, editable=False)
    # The suite's variables as this run filled them (engine.suitevars): a re-grade or a look back knows
    # what was sent. Secrets are never stored; they are read from the worker's environment.
    vars = models.JSONField(default=dict, blank=True, editable=False)
    # The branch, tag or commit a CI job launched it from (its suite version's ref); blank otherwise.
    ref = models.CharField(max_length=200, blank=True, default="", editable=False)
    # What the launch set over its suite (engine.options.RunOptions: generation settings, cache, max_cost, a
    # matrix variant's label); every process that plays the run applies them to the suite it loads.
    options = models.JSONField(default=dict, blank=True, editable=False)
    # Why the run stopped short of its conversations, as its page says it ("cost limit $5.00 reached").
    stop_reason = models.CharField(max_length=200, blank=True, default="", editable=False)
    # The endpoints without prices that its calls have gone to (engine.meter), named by the workers as its turns
    # are stored and its conversations end: their calls count 0, so its cost is unknown, or a lower bound.
    # Empty: every call it made went to an endpoint with prices, or to the mock.
    unpriced = models.JSONField(default=list, blank=True, editable=False)
    # The model matrix it is one column of: one launch of several models (or settings variants) of a suite.
    matrix = models.ForeignKey(
        "RunMatrix", null=True, blank=True, on_delete=models.SET_NULL, related_name="runs", editable=False
    )

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # The runs list: a user's runs, newest first.
            models.Index(fields=["created_by", "-created_at"], name="run_owner_recent"),
            # A project's runs, newest first.
            models.Index(fields=["project", "-created_at"], name="run_project_recent"),
            # The refs the runs list offers: a project's CI runs only.
            models.Index(fields=["project", "ref"], name="run_project_ref", condition=~models.Q(ref="")),
            # The dispatcher and sweeper look for active runs, by endpoint.
            models.Index(fields=["status", "endpoint_name"], name="run_status_endpoint"),
        ]

    def __str__(self) -> str:
        return f"{self.suite_version} · {self.model} · {self.status}"

    def save(self, *args, **kwargs):
        if self.project_id is None:  # a run's project is always its suite's
            self.project_id = self.suite_version.suite.project_id
        super().save(*args, **kwargs)

    def get_absolute_url(self) -> str:
        return reverse("runs:detail", args=[self.pk])

    @property
    def audit_label(self) -> str:
        """How the audit log names the run, once it may be gone."""
        return f"run {str(self.pk)[:8]} of {self.suite_version} on {self.model}"

    @property
    def is_active(self) -> bool:
        return self.status in ACTIVE

    # What the templates ask of a run, so that they never spell a status or an endpoint name out.
    @property
    def is_cancelling(self) -> bool:
        """Cancelled, with conversations still finishing their turn (`in_flight_count`, which the runs list
        annotates)."""
        return self.status == Status.CANCELLED and bool(getattr(self, "in_flight_count", 0))

    @property
    def on_default_endpoint(self) -> bool:
        return self.endpoint_name == DEFAULT

    @property
    def mock_model(self) -> str:
        """What a mock run names beside its mock badge: the id after `mock/`, nothing for plain `mock`."""
        return self.model.removeprefix("mock").removeprefix("/") if self.is_mock else ""

    @property
    def elapsed(self):
        if not self.started_at:
            return None
        return (self.finished_at or timezone.now()) - self.started_at


class VersionFacts(models.Model):
    """What a run page asks of a suite version on every view (runs.selectors.SuiteFacts, as JSON), worked out
    when a run of it is launched: every web process of every host reads it here instead of parsing the suite
    (slow for a large dataset). Read back only under the engine schema it was worked out with."""

    version = models.OneToOneField(
        "suites.SuiteVersion", on_delete=models.CASCADE, primary_key=True, related_name="facts"
    )
    schema = models.CharField(max_length=64)
    facts = models.JSONField()

    def __str__(self) -> str:
        return f"facts of {self.version_id}"


class Conversation(models.Model):
    """One eval (one iteration of it) inside a run; a Celery task plays it.

    Status: queued -> running (claimed; `attempt` is the fencing token) -> passed | failed | error |
    cancelled; a re-grade's conversation of an eval the source run never played is skipped from the start. `dispatched_at` is set when its task is sent; `lease_expires_at` is renewed by the worker
    running it, and a lapsed lease sends it back to queued for another worker to resume. A user may send an
    errored conversation of a finished run back to queued; it resumes after its last stored turn.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="conversations")
    index = models.PositiveIntegerField(help_text="Position of the eval in the suite.")
    iteration = models.PositiveIntegerField(default=0)
    eval_id = models.CharField(max_length=200)
    prompt = models.TextField(blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    attempt = models.PositiveIntegerField(default=0)
    dispatched_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(
        max_length=200, blank=True, help_text="The worker process playing it (Worker.name)."
    )
    kind = models.CharField(max_length=20, default="single-turn")
    # No choices: engine.schema.Style lists the styles, and a new one needs no migration.
    style = models.CharField(
        max_length=10,
        default=Style.TREE.value,
        help_text="How the conversation is driven (engine.schema.Style).",
    )
    # What the model saw before the live turns, built once when the run is launched (engine.history) and
    # read by the worker and the transcript alike: nothing rebuilds it from the suite.
    system = models.TextField(
        blank=True,
        help_text="The system message sent first: the suite's system prompt and any guidelines the history "
        "attached. Empty: none was sent.",
    )
    history = models.JSONField(
        default=list, blank=True, help_text="Given messages sent before the live turns."
    )
    termination = models.CharField(max_length=300, blank=True, help_text="Simulated: why it ended.")
    # As the engine gave it (engine.results.EvalResult), so that no page parses the words. No choices:
    # engine.outcomes.TerminationKind lists the kinds, and a new one needs no migration.
    termination_kind = models.CharField(
        max_length=20,
        blank=True,
        help_text="Simulated: why it ended, as a kind (engine.outcomes.TerminationKind).",
    )
    termination_detail = models.CharField(
        max_length=300, blank=True, help_text="What decided the ending: the condition, the max turns."
    )
    user_tokens = models.PositiveIntegerField(default=0, help_text="Tokens the simulated user spent.")
    turns_passed = models.PositiveIntegerField(null=True, blank=True)
    turns_total = models.PositiveIntegerField(null=True, blank=True)
    # A re-grade's conversation that parted from the stored one (engine.results.EvalResult.diverged_at): the
    # turn where it did. A retry cannot change it, so the retry button and API leave such errors alone.
    diverged_at = models.PositiveIntegerField(null=True, blank=True)
    passed_on_turn = models.PositiveIntegerField(null=True, blank=True)
    score = models.FloatField(null=True, blank=True)
    # Named graders' results (engine.results.GraderResult, as JSON), written when the conversation ends, so the
    # run page shows a column per grader without reading any turn.
    graders = models.JSONField(default=list, blank=True)
    # Overridden by a reviewer (Override rows): status, score, verdict and passed_on_turn are the reviewed ones
    # and this holds what the run gave (engine.results.OriginalVerdict, as JSON). Empty: not overridden.
    original = models.JSONField(default=dict, blank=True)
    # The tools the model called, written when the conversation ends (runs.worker.writes.tools_called): every
    # call's name in the order made, each on a line of its own between newlines ("\nsearch\nbook\n"), so the
    # run page's "called X" filter is one `contains` on any database and a comparison reads the sequence
    # without reading a turn. Empty: no tool was called (or the conversation has not ended).
    tools_called = models.TextField(blank=True, default="")
    verdict = models.CharField(max_length=300, blank=True)
    reason = models.CharField(
        max_length=300, blank=True, help_text="The verdict without how it ended (the termination says that)."
    )
    error = models.TextField(blank=True)
    turn_count = models.PositiveIntegerField(default=0)
    prompt_tokens = models.PositiveIntegerField(default=0)
    completion_tokens = models.PositiveIntegerField(default=0)
    judge_tokens = models.PositiveIntegerField(default=0)
    cost = models.FloatField(default=0.0)
    tokens_estimated = models.BooleanField(default=False)
    # Calls answered from the response cache (engine.cache) and what they cost when first asked: saved, not in
    # `cost`.
    cached_calls = models.PositiveIntegerField(default=0)
    saved_cost = models.FloatField(default=0.0)
    # While a model call waits to retry: until when, and why. Written once per wait, cleared with the next
    # turn; shown only while in the future.
    waiting_until = models.DateTimeField(null=True, blank=True)
    waiting_reason = models.CharField(max_length=100, blank=True)
    # While a model call has been out longer than the run's usual latency (runs.worker.pump's watch): when it
    # went out. Written once when it becomes slow, cleared when it ends; calls that are not slow cost nothing.
    calling_since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["index", "iteration"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index", "iteration"], name="conversation_unique_per_run"),
        ]
        indexes = [
            # Progress counts and the dispatcher's "next queued conversation" both filter a run by status.
            models.Index(fields=["run", "status"], name="conversation_run_status"),
            # The sweeper looks for lapsed leases.
            models.Index(fields=["status", "lease_expires_at"], name="conversation_lease"),
            # A dead worker's conversations are taken over by name.
            models.Index(fields=["worker"], name="conversation_worker", condition=models.Q(status="running")),
            # Dispatch counts what is in flight and takes the next waiting conversations in suite order,
            # once per conversation that ends; these stay small (a run's concurrency; its unsent rows) and
            # keep that one statement from scanning and sorting a whole run.
            models.Index(
                fields=["run"],
                name="conversation_in_flight",
                condition=models.Q(dispatched_at__isnull=False, status__in=["queued", "running"]),
            ),
            models.Index(
                fields=["run", "index", "iteration"],
                name="conversation_waiting",
                condition=models.Q(dispatched_at__isnull=True, status="queued"),
            ),
            # The conversations a reviewer overrode: few, counted on every run page and poll (the progress
            # scan reads no JSON for them) and listed by the table's "overridden" filter.
            models.Index(
                fields=["run", "index", "iteration"],
                name="conversation_overridden",
                condition=~models.Q(original={}),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.eval_id} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("runs:conversation", args=[self.run_id, self.index])

    @property
    def audit_label(self) -> str:
        """How the audit log names the conversation, once it may be gone."""
        suffix = f" #{self.iteration + 1}" if self.iteration else ""
        return f"{self.eval_id}{suffix} in run {str(self.run_id)[:8]}"

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    # What the templates ask of a conversation, so that they never spell a status or a style out.
    @property
    def is_queued(self) -> bool:
        return self.status == Status.QUEUED

    @property
    def is_running(self) -> bool:
        return self.status == Status.RUNNING

    @property
    def is_error(self) -> bool:
        return self.status == Status.ERROR

    @property
    def is_cancelled(self) -> bool:
        return self.status == Status.CANCELLED

    @property
    def is_skipped(self) -> bool:
        return self.status == Status.SKIPPED

    @property
    def is_simulated(self) -> bool:
        return self.style == Style.SIMULATED

    @property
    def is_overridden(self) -> bool:
        return bool(self.original)


class Worker(models.Model):
    """A live worker process. A thread of its own beats (`beat_at`) every EVALSITE_WORKER_BEAT_SECONDS, whatever
    its conversations are doing; a worker whose beat has not changed for EVALSITE_WORKER_DEAD_SECONDS is dead,
    and the other workers take its running conversations over. A worker deletes its row when it stops."""

    name = models.CharField(max_length=200, unique=True)
    started_at = models.DateTimeField(auto_now_add=True)
    beat_at = models.DateTimeField()
    # Conversations it plays at once (its --concurrency), for the pages that say how many can play; 0 when it
    # did not say.
    slots = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return self.name


class Turn(models.Model):
    """One graded reply. Unique per (conversation, position): a redelivered task cannot write it twice."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="turns")
    position = models.PositiveIntegerField()
    record = models.JSONField(help_text="engine.results.TurnRecord")
    passed = models.BooleanField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["position"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "position"], name="turn_unique_position"),
        ]

    def __str__(self) -> str:
        return f"turn {self.position}"


def new_share_token() -> str:
    return secrets.token_urlsafe(32)


class ShareLinkQuerySet(models.QuerySet):
    def active(self) -> "ShareLinkQuerySet":
        """Links that open their run now: not revoked, and not past their expiry."""
        return self.filter(revoked_at__isnull=True).filter(
            models.Q(expires_at__isnull=True) | models.Q(expires_at__gt=timezone.now())
        )


class ShareLink(models.Model):
    """A read-only link to one run. The token is 256 random bits; revoking it ends access at once, and so
    does its expiry, when it was made with one."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="share_links")
    token = models.CharField(max_length=64, unique=True, default=new_share_token, editable=False)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    created_at = models.DateTimeField(auto_now_add=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: until revoked.")
    # Written at most once a minute (runs.services.link_used): a shared live run polls every second.
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = ShareLinkQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"share link for {self.run_id}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > timezone.now())


class Label(models.Model):
    """A reviewer's score for one conversation, on a scale of the judge's (engine.schema.SCALES): the human
    judgement a judge is calibrated against. One per reviewer and conversation; saving again replaces it."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="labels")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="labels")
    scale = models.CharField(max_length=10, help_text="The scale the score is on: 0-1, 0-100 or -3..3.")
    score = models.FloatField()
    reason = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["conversation", "created_by"], name="label_one_per_reviewer"),
        ]

    def __str__(self) -> str:
        return f"{self.score:g} on {self.scale} by {self.created_by_id}"


class ReviewAssignment(models.Model):
    """A project member asked to label a run's conversations, on the scale of the queue they are given: the
    review page counts each one's labels against the run's conversations."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="review_assignments")
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    scale = models.CharField(max_length=10, help_text="The queue's scale: 0-1, 0-100 or -3..3.")
    assigned_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.UniqueConstraint(fields=["run", "reviewer"], name="review_assignment_once_per_run"),
        ]

    def __str__(self) -> str:
        return f"{self.reviewer_id} reviews {self.run_id} on {self.scale}"


class Override(models.Model):
    """A reviewer's outcome for one check of one turn (`checks[i]`) or its ground-truth grade (`grade`), with
    a note: engine.overrides recomputes the conversation's verdict under a conversation's overrides. The turn's
    stored record keeps the check's own outcome. One per conversation, turn and outcome."""

    conversation = models.ForeignKey(Conversation, on_delete=models.CASCADE, related_name="overrides")
    turn = models.PositiveIntegerField()
    target = models.CharField(max_length=30)
    passed = models.BooleanField()
    note = models.TextField()
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["turn", "target"]
        constraints = [
            models.UniqueConstraint(
                fields=["conversation", "turn", "target"], name="override_one_per_outcome"
            ),
        ]

    def __str__(self) -> str:
        return f"turn {self.turn} {self.target} → {'passed' if self.passed else 'failed'}"


TOKEN_PREFIX = "evs_"


class ApiToken(models.Model):
    """A personal API token, for CI and scripts: `Authorization: Bearer evs_…` acts as its user, in its project
    only, with the user's role there (a user no longer a member of it finds the token refused).

    Only a SHA-256 digest is stored; the token is shown once, when it is made. A plain digest (no salt, no slow
    hash) is enough because the token is 256 random bits, not a password a person chose: there is nothing to
    guess. `hint` (the first characters) tells a user's tokens apart without revealing them.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    project = models.ForeignKey("projects.Project", on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100)
    digest = models.CharField(max_length=64, unique=True, editable=False)
    hint = models.CharField(max_length=12, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.hint}…)"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None


class LaunchKey(models.Model):
    """An `Idempotency-Key` a user sent with `POST /api/runs` or `POST /api/matrices`, and the run or matrix
    that launch made: a retried launch with the same key and the same body returns it instead of making
    another (runs/launch_keys.py). Kept until `expires_at`; an expired key may be used again."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=200)
    fingerprint = models.CharField(max_length=64)  # SHA-256 of the launch's body
    # One of the two is set in the transaction that stored the key, before it commits: both are empty only
    # while that launch runs.
    run = models.ForeignKey(Run, on_delete=models.CASCADE, null=True, related_name="+")
    matrix = models.ForeignKey(RunMatrix, on_delete=models.CASCADE, null=True, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()

    class Meta:
        constraints = [
            # One launch per key and user; its index serves the look-up of a retried launch. The key is
            # stored first, so a second launch racing the first with the same key waits here for the first
            # to commit, fails, and is answered with the first's run.
            models.UniqueConstraint(fields=["user", "key"], name="launch_key_once_per_user"),
        ]

    def __str__(self) -> str:
        made = f"matrix {self.matrix_id}" if self.matrix_id else f"run {self.run_id}"
        return f"{self.key} → {made}"
