"""Writes for runs: launch, cancel, retry errored conversations, share links; each recorded in the
project's audit log (projects.audit) in the write's own transaction.

Each write hands the run to runs.worker once it commits: a launch or a retry dispatches its first
conversations, a cancel frees its endpoint's slots for other runs.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, F, OuterRef
from django.utils import timezone
from pydantic import ValidationError

from endpoints.routes import endpoint_refusal
from engine import bounds, suitevars
from engine.clients import MOCK
from engine.codegrade import policy as code_policy
from engine.errors import first_error
from engine.history import build_history
from engine.loader import conversation_count
from engine.options import RunOptions, apply
from engine.runner import build_context
from projects import audit
from projects.deleting import DeleteRefused
from projects.models import Action
from suites.models import SuiteFile, SuiteVersion

from . import concurrency as caps
from . import selectors, specs, worker
from .endpoints import build_registry
from .models import ACTIVE, Conversation, Run, RunMatrix, ShareLink, Status

MAX_CONCURRENCY = caps.MAX_CONCURRENCY


class LaunchError(Exception):
    """The run cannot start; the message says why."""


class ConcurrencyRefused(LaunchError):
    """The concurrency asked is more than the run's endpoint allows (or than any run may have): a refusal of
    the launch's `concurrency` field, which the form shows beside it."""

    field = "concurrency"


@transaction.atomic
def _secrets_refusal(version: SuiteVersion, options: RunOptions | None) -> str | None:
    """Why the run may not start: the secrets its suite, its attached files or its launch options would send
    that this server does not lend to suites (EVALSITE_SUITE_SECRETS); None when it may."""
    texts = [version.source, *SuiteFile.objects.filter(version=version).values_list("content", flat=True)]
    if options is not None:
        texts.append(options.model_dump_json())
    unlent = suitevars.not_lent(texts, settings.EVALSITE_SUITE_SECRETS)
    if not unlent:
        return None
    listed = ", ".join(unlent)
    return (
        f"the suite sends the secret{'s' if len(unlent) > 1 else ''} {listed}, which this server does not lend "
        f"to suites: an admin adds {listed} to EVALSITE_SUITE_SECRETS (the variables a run may send its model)"
    )


def create_run(
    *,
    version: SuiteVersion,
    user,
    model: str | None = None,
    concurrency: int | None = None,
    regraded_from: Run | None = None,
    vars: dict[str, str] | None = None,
    ref: str | None = None,
    options: RunOptions | None = None,
    matrix: RunMatrix | None = None,
) -> Run:
    """`vars`: values for the suite's variables, over their defaults; every variable without a default
    needs one (engine.suitevars). `ref`: the CI ref it was launched from (default: its version's).
    `options`: what the launch sets over the suite (engine.options); `matrix`: the matrix it is a column of.
    `concurrency`: what the launch asks, refused when its endpoint allows fewer (runs.concurrency); None for
    the default, held to the endpoint's cap. A re-grade keeps its source's, held to the cap as it is now."""
    # Stored versions were validated when saved; a text that no longer validates still raises SuiteError.
    spec = specs.suite(version)
    try:
        values = suitevars.values(spec.vars or {}, vars)
        spec = specs.bound(version, values)
    except ValidationError as exc:
        where, message = first_error(exc)
        raise LaunchError(f"with the variables given, {where}: {message}") from None
    except ValueError as exc:
        raise LaunchError(str(exc)) from None
    spec = apply(spec, options)
    model_ref = (model or "").strip() or spec.model
    if not model_ref:
        raise LaunchError("the suite names no model; choose one to run against")
    registry = build_registry()
    try:
        _, endpoint_name = build_context(spec, registry, model_ref)
    except Exception as exc:  # an unknown endpoint and the like: say so before anything is stored
        raise LaunchError(str(exc)) from None
    project_id = version.suite.project_id
    if refusal := endpoint_refusal(spec, project_id, model_ref, model_called=regraded_from is None):
        raise LaunchError(refusal)
    if not settings.EVALSITE_CODE_GRADERS and (refusal := code_policy.launch_refusal(spec)):
        raise LaunchError(refusal)
    if refusal := _secrets_refusal(version, options):
        raise LaunchError(refusal)
    total = conversation_count(spec)
    if total > bounds.MAX_CONVERSATIONS_PER_RUN:  # saved under a higher cap: nothing is created
        raise LaunchError(
            f"v{version.number} would play {total:,} conversations; at most "
            f"{bounds.MAX_CONVERSATIONS_PER_RUN:,} are allowed a run (EVALSITE_MAX_CONVERSATIONS_PER_RUN). "
            "Lower `iterations` or split the evals or the dataset."
        )
    if concurrency is None or regraded_from is not None:
        concurrency = caps.unasked(registry, endpoint_name, concurrency or caps.DEFAULT_CONCURRENCY)
    elif refusal := caps.refusal(concurrency, registry, endpoint_name):
        raise ConcurrencyRefused(refusal)
    run = Run.objects.create(
        suite_version=version,
        project_id=project_id,
        created_by=user,
        model=model_ref,
        endpoint_name=endpoint_name,
        is_mock=endpoint_name == MOCK,
        concurrency=concurrency,
        regraded_from=regraded_from,
        vars=values,
        ref=version.ref if ref is None else ref,
        options=options.stored() if options is not None else {},
        matrix=matrix,
    )
    worker.insert_conversations(run.pk, _conversation_rows(spec, _history_files(version, spec)))
    selectors.suite_facts(run)  # stored for the run page's every process, while the suite is parsed here
    if regraded_from is None:
        audit.record(user, run.project_id, Action.LAUNCHED, run, model=model_ref)
    else:
        audit.record(user, run.project_id, Action.REGRADED, run, source=regraded_from.audit_label)
    transaction.on_commit(lambda: worker.dispatch(run.pk))
    return run


def _history_files(version: SuiteVersion, spec) -> dict[str, str]:
    """The attached files the evals' histories embed (guidelines, snippets), read once for the launch."""
    named = {
        part.value
        for ev in spec.evals
        for message in ev.messages or ()
        if isinstance(message.content, list)  # an assistant message that only calls tools has none
        for part in message.content
        if part.type == "file"
    }
    return dict(version.files.filter(name__in=named).values_list("name", "content")) if named else {}


def _given(system: str | None, messages, files: dict[str, str]) -> tuple[str, list[dict]]:
    """The system message (empty when none is sent) and the given history, as build_history makes them."""
    sent, history = build_history(system, messages, files)
    return (sent[0]["content"] if len(sent) > len(history) else ""), history


def _conversation_rows(spec, files: dict[str, str]) -> Iterator[dict]:
    """A new run's conversations, one at a time: every iteration of an eval is its own conversation. What
    the model is sent before the live turns (the system message with any guidelines, then the given history)
    is built here, once per eval, and stored on each conversation: the worker sends it and the transcript
    shows it as stored."""
    no_history = _given(spec.system, None, files)  # most evals (every dataset row) share this one
    for index, ev in enumerate(spec.evals):
        system, history = _given(spec.system, ev.messages, files) if ev.messages else no_history
        common = {
            "index": index,
            "eval_id": spec.eval_id(index),
            "prompt": ev.first_text,
            "style": ev.style,
            "system": system,
            "history": history,
        }
        for iteration in range(ev.iterations or spec.iterations):
            yield {**common, "iteration": iteration}


@transaction.atomic
def cancel(run: Run, *, by=None) -> bool:
    now = timezone.now()
    updated = Run.objects.filter(pk=run.pk, status__in=ACTIVE).update(
        status=Status.CANCELLED, finished_at=now
    )
    if updated:
        # Running conversations see the run's status before their next turn and stop there.
        worker.cancel_queued(run.pk, now)
        transaction.on_commit(lambda: worker.dispatch_endpoint(run.endpoint_name))
        audit.record(by, run.project_id, Action.CANCELLED, run)
    return bool(updated)


class RetryRefused(Exception):
    """The run's errored conversations cannot be retried now; the message says why."""


DIVERGED_ONLY = (
    "its errors are conversations that diverged from the source run, which a retry would replay unchanged; "
    "re-grade under another version or launch a fresh run"
)


def retry_errored(run: Run, *, by=None) -> int:
    """Send a finished run's errored conversations back to the queue; each resumes after its last stored
    turn (a later claim replays the stored turns). The run is running again until they end, when finalize
    gives it its status afresh. Returns how many were queued."""
    if run.status == Status.CANCELLED:
        raise RetryRefused("a cancelled run is not resumed; run it again instead")
    with transaction.atomic():
        # The run first: of two retries at once, only the one that moved it back to running goes on.
        reopened = Run.objects.filter(
            pk=run.pk, status__in=(Status.PASSED, Status.FAILED, Status.ERROR)
        ).update(status=Status.RUNNING, finished_at=None, revision=F("revision") + 1)
        if not reopened:
            raise RetryRefused("the run is still going; wait for it to finish")
        # A re-grade's divergence would only diverge again: the same stored turns are all it can replay.
        count = run.conversations.filter(status=Status.ERROR, diverged_at__isnull=True).update(
            status=Status.QUEUED,
            error="",
            verdict="",
            reason="",
            score=None,
            passed_on_turn=None,
            termination="",
            termination_kind="",
            termination_detail="",
            turns_passed=None,
            turns_total=None,
            dispatched_at=None,
            finished_at=None,
            lease_expires_at=None,
            waiting_until=None,
            waiting_reason="",
        )
        if not count:  # raising rolls the reopening back
            if run.conversations.filter(status=Status.ERROR).exists():
                raise RetryRefused(DIVERGED_ONLY)
            raise RetryRefused("the run has no errored conversations")
        audit.record(by, run.project_id, Action.RETRIED, run, conversations=count)
        transaction.on_commit(lambda: worker.dispatch(run.pk))
    run.refresh_from_db(fields=["status", "finished_at"])
    return count


# The lifetimes a new share link may have, by what the share form sends: until revoked, or so many days.
LINK_LIFETIMES = {"": None, "7": timedelta(days=7), "30": timedelta(days=30)}
# last_used_at is written at most this often per link: a shared live run's page polls every second.
LINK_USED_RESOLUTION = timedelta(minutes=1)


@transaction.atomic
def create_share_link(run: Run, user, *, lifetime: timedelta | None = None) -> ShareLink:
    """A new link to the run; `lifetime`: how long it opens the run (None: until revoked)."""
    expires_at = timezone.now() + lifetime if lifetime is not None else None
    link = ShareLink.objects.create(run=run, created_by=user, expires_at=expires_at)
    detail = {"expires": expires_at.isoformat(timespec="minutes")} if expires_at is not None else {}
    audit.record(user, run.project_id, Action.SHARED, run, link=link.pk, **detail)
    return link


def link_used(link: ShareLink) -> None:
    """Note that the link opened its run now (for its project's admins' list of links)."""
    now = timezone.now()
    if link.last_used_at is None or now - link.last_used_at >= LINK_USED_RESOLUTION:
        ShareLink.objects.filter(pk=link.pk).update(last_used_at=now)


@transaction.atomic
def revoke_share_link(link: ShareLink, *, by=None) -> None:
    revoked = ShareLink.objects.filter(pk=link.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    if revoked:
        audit.record(by, link.run.project_id, Action.REVOKED, link.run, link=link.pk)


@transaction.atomic
def revoke_links_made_by(user_id: int, *, project_id: int | None = None, by=None, why: str) -> int:
    """Revoke every active link the user made (to the runs of `project_id`, or of every project when None),
    each recorded with `why`: a link lasts no longer than its maker's access. How many were revoked."""
    links = ShareLink.objects.filter(created_by_id=user_id, revoked_at__isnull=True).select_related("run")
    if project_id is not None:
        links = links.filter(run__project_id=project_id)
    now, revoked = timezone.now(), 0
    for link in links:
        # One at a time, so that a link revoked meanwhile by someone else is not recorded twice.
        if ShareLink.objects.filter(pk=link.pk, revoked_at__isnull=True).update(revoked_at=now):
            audit.record(by, link.run.project_id, Action.REVOKED, link.run, link=link.pk, why=why)
            revoked += 1
    return revoked


def member_removed(sender, membership, by=None, **kwargs) -> dict:
    """projects.services.member_removed: the links the member made to the project's runs end with them."""
    count = revoke_links_made_by(
        membership.user_id, project_id=membership.project_id, by=by, why="its maker left the project"
    )
    return {"share_links_revoked": count} if count else {}


def user_saved(sender, instance, **kwargs) -> None:
    """post_save of a user: a deactivated user's links end in every project (a script or the admin did it,
    so the audit log names no one)."""
    if not instance.is_active:
        revoke_links_made_by(instance.pk, why="its maker was deactivated")


# Why a run cannot be deleted while it plays.
STILL_GOING = "the run is still going: cancel it first"


@transaction.atomic
def delete_run(run: Run, *, by) -> None:
    """Delete a finished run with its conversations, turns, labels, overrides and share links; the audit log
    keeps its name."""
    if Run.objects.select_for_update().filter(pk=run.pk, status__in=ACTIVE).exists():
        raise DeleteRefused(STILL_GOING)
    audit.record(by, run.project_id, Action.DELETED, run)
    run.delete()


@transaction.atomic
def pin_baseline(run: Run, *, by=None) -> None:
    """Make `run` the baseline of its suite (whoever launched it): the one other runs compare with."""
    Run.objects.filter(suite_version__suite=run.suite_version.suite, pinned_at__isnull=False).exclude(
        pk=run.pk
    ).update(pinned_at=None)
    run.pinned_at = timezone.now()
    run.save(update_fields=["pinned_at"])
    audit.record(by, run.project_id, Action.PINNED, run)


@transaction.atomic
def unpin_baseline(run: Run, *, by=None) -> None:
    if Run.objects.filter(pk=run.pk, pinned_at__isnull=False).update(pinned_at=None):
        audit.record(by, run.project_id, Action.UNPINNED, run)
    run.pinned_at = None


class RegradeRefused(Exception):
    """The run cannot be re-graded now; the message says why."""


def regrade(run: Run, *, version: SuiteVersion, user) -> Run:
    """A new run that grades `run`'s stored conversations again under `version`'s checks (the same version,
    or an edited one of the same suite), calling no model but judges. Conversations are matched by eval id
    and iteration; each that would need a turn the source never had ends "diverged at turn N", and those of
    evals the source never played (added by `version`) are skipped: not in the source run."""
    if run.is_active:
        raise RegradeRefused("the run is still going: re-grade it once it has finished")
    if version.suite_id != run.suite_version.suite_id:
        raise RegradeRefused("re-grade with a version of the same suite")
    # The same variables: only those the edited version still declares.
    declared = specs.suite(version).vars or {}
    with transaction.atomic():
        new = create_run(
            version=version, user=user, model=run.model, concurrency=run.concurrency, regraded_from=run,
            vars={name: value for name, value in (run.vars or {}).items() if name in declared},
        )  # fmt: skip
        _skip_added(new, run)
        if not new.conversations.filter(status=Status.QUEUED).exists():  # nothing to re-grade: it ends now
            now = timezone.now()
            Run.objects.filter(pk=new.pk).update(
                status=worker.final_status(new), started_at=now, finished_at=now
            )
            new.refresh_from_db()
    return new


NOT_IN_SOURCE = "not in the source run"


def _skip_added(new: Run, source: Run) -> None:
    """Skip the conversations of `new` that `source` never played (evals, or iterations, that the re-graded
    version added): there is no stored reply to grade, so they end before any worker sees them. They are
    updated before the launch commits, so the dispatcher, which sends queued conversations only, never
    sends them."""
    played = Conversation.objects.filter(
        run=source, eval_id=OuterRef("eval_id"), iteration=OuterRef("iteration")
    )
    now = timezone.now()
    new.conversations.filter(~Exists(played)).update(
        status=Status.SKIPPED, verdict=NOT_IN_SOURCE, reason=NOT_IN_SOURCE, started_at=now, finished_at=now
    )
