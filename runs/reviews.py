"""Reviewers' writes on a run's conversations: their labels (and labelled conversations added to a
calibration set as samples), who is asked to label, and overrides of a check's outcome, after which the
conversation's verdict and its finished run's status follow. Each is recorded in the project's audit log
(projects.audit) in the write's own transaction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import F

from engine import overrides
from engine.calibration import CalibrationSuite
from engine.drivers import Defaults, driver_for
from engine.outcomes import GRADED
from engine.results import GraderResult, TurnRecord
from engine.schema import SCALES
from engine.tools import exchange_messages
from projects import audit
from projects.models import Action
from suites.services import save_version, validate_source

from . import selectors, specs, worker
from .models import Conversation, Label, Override, ReviewAssignment, Run, Status

# --- Labels: people's scores, for calibrating judges -------------------------------------------------------

LABELS_FILE = "labels.jsonl"


class LabelRefused(ValueError):
    """A label or an export the user can fix; the message says how."""


def save_label(conversation, user, *, score: float, scale: str, reason: str = "") -> Label:
    """The reviewer's label for the conversation, replacing their earlier one."""
    if scale not in SCALES:
        raise LabelRefused(f"choose a scale: {', '.join(SCALES)}")
    low, high, _ = SCALES[scale]
    if not low <= score <= high:
        raise LabelRefused(f"a score on {scale} is between {low:g} and {high:g}")
    with transaction.atomic():
        label, _ = Label.objects.update_or_create(
            conversation=conversation,
            created_by=user,
            # A form sends a textarea's new lines as CRLF; the samples file and the pages want plain ones.
            defaults={"score": score, "scale": scale, "reason": reason.replace("\r\n", "\n")},
        )
        audit.record(
            user, conversation.run.project_id, Action.LABELLED, conversation, score=score, scale=scale
        )
    return label


def conversation_messages(conversation) -> list[dict]:
    """The conversation as the model saw it and answered: the system message, the given history, then each
    turn's user message, its rounds of tool calls (OpenAI's assistant `tool_calls` and `tool` messages) and its
    reply. What a labelled conversation becomes as a calibration sample, so that an agent's judge is
    calibrated on the trajectory it grades."""
    messages = [{"role": "system", "content": conversation.system}] if conversation.system else []
    messages += [_kept(message) for message in conversation.history]
    for turn in conversation.turns.order_by("position"):
        record = TurnRecord.model_validate(turn.record)
        if record.prompt:
            messages.append({"role": "user", "content": record.prompt})
        messages += exchange_messages(record)
    for message in messages:
        if message.get("role") == "tool" and not isinstance(message.get("content"), str):
            message["content"] = ""  # a call that got no answer: the judge reads "(no output)"
    return [message for message in messages if _says_something(message)]


def _kept(message: dict) -> dict:
    return {key: message[key] for key in ("role", "content", "tool_calls", "tool_call_id") if key in message}


def _says_something(message: dict) -> bool:
    """A message with text, an assistant's tool calls, or a tool's answer (which may be empty)."""
    content = message.get("content")
    if message.get("role") == "tool" or message.get("tool_calls"):
        return True
    return isinstance(content, str) and bool(content)


@dataclass
class LabelsAdded:
    """What adding a reviewer's labels to a set did, conversation by conversation (named by eval and
    iteration), so the page can say what went in and why the rest did not."""

    set_name: str
    set_scale: str
    added: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)  # added before: their sample id is in the file
    other_scale: dict[str, list[str]] = field(default_factory=dict)  # by the scale they were labelled on


def _conversation_name(conversation) -> str:
    return conversation.eval_id + (
        f" (iteration {conversation.iteration + 1})" if conversation.iteration else ""
    )


def add_labels_to_set(run: Run, user, target) -> LabelsAdded:
    """Append the user's labels on this run's conversations to a calibration set, as samples in its attached
    JSONL file (a new version of the set, none when nothing is added)."""
    latest = target.latest_version
    files = latest.file_map()
    spec = validate_source(latest.source, files=files)
    if not isinstance(spec, CalibrationSuite):
        raise LabelRefused(f"{target.name} is a suite, not a calibration set")
    calibration = spec.calibration.spec
    name = calibration.samples_file or LABELS_FILE
    if not name.endswith(".jsonl"):
        raise LabelRefused(f"{target.name} reads its samples from {name}; labels are added to a JSONL file")
    source = latest.source
    if not calibration.samples_file:
        source = source.rstrip("\n") + f"\nsamples_file: {LABELS_FILE}\n"
    existing = files.get(name, "")
    present = {json.loads(line).get("id") for line in existing.splitlines() if line.strip().startswith("{")}
    result = LabelsAdded(set_name=target.name, set_scale=calibration.all_judges[0].scale)
    lines = []
    labels = Label.objects.filter(conversation__run=run, created_by=user).select_related("conversation")
    for label in labels.order_by("conversation__index", "conversation__iteration"):
        conversation = label.conversation
        sample_id = f"run-{str(run.pk)[:8]}-{conversation.eval_id}-{conversation.iteration}"
        if label.scale != result.set_scale:
            result.other_scale.setdefault(label.scale, []).append(_conversation_name(conversation))
            continue
        if sample_id in present:
            result.present.append(_conversation_name(conversation))
            continue
        sample = {
            "id": sample_id,
            "messages": conversation_messages(conversation),
            "expected": {"score": label.score, "reason": label.reason},
        }
        lines.append(json.dumps(sample, ensure_ascii=False))
        result.added.append(_conversation_name(conversation))
    if not lines:
        return result
    files[name] = (existing.rstrip("\n") + "\n" if existing.strip() else "") + "\n".join(lines) + "\n"
    with transaction.atomic():
        save_version(
            suite=target,
            source=source,
            user=user,
            note=f"{len(lines)} labelled conversation{'s' if len(lines) != 1 else ''} from run {str(run.pk)[:8]}",
            files=files,
        )
        audit.record(
            user, target.project_id, Action.LABELS_ADDED, target, added=len(lines), run=run.audit_label
        )
    return result


def assign_reviewer(run: Run, reviewer, *, scale: str, by) -> ReviewAssignment:
    """Ask a member of the run's project to label its conversations on `scale` (asking again changes the
    scale). The caller has checked that the member may label."""
    if scale not in SCALES:
        raise LabelRefused(f"choose a scale: {', '.join(SCALES)}")
    assignment, _ = ReviewAssignment.objects.update_or_create(
        run=run, reviewer=reviewer, defaults={"scale": scale, "assigned_by": by}
    )
    return assignment


def unassign_reviewer(run: Run, reviewer_id: int) -> None:
    ReviewAssignment.objects.filter(run=run, reviewer_id=reviewer_id).delete()


# --- Overrides: a reviewer overturns one check's outcome ------------------------------------------------


class OverrideRefused(ValueError):
    """An override the reviewer can fix; the message says how."""


def override_outcome(conversation, user, *, turn: int, target: str, passed: bool, note: str) -> Override:
    """The reviewer's outcome for one check (or ground-truth grade) of one turn, with a note saying why; the
    conversation's verdict, and its finished run's status, follow (engine.overrides). Their own override of
    it is replaced; another member's is refused."""
    note = note.strip()
    if not note:
        raise OverrideRefused("say why in a note: it is kept with the override")
    if (conversation.original or {}).get("status", conversation.status) not in GRADED:
        raise OverrideRefused("only a conversation that passed or failed can be overridden")
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation.pk)
        try:
            overrides.check(selectors.turn_records(conversation), turn, target, passed)
        except overrides.OverrideError as exc:
            raise OverrideRefused(str(exc)) from exc
        given = conversation.overrides.filter(turn=turn, target=target).select_related("created_by").first()
        if given is not None and given.created_by_id != user.pk:
            # Replacing it would withdraw it, which is its author's or an admin's to do, on its own.
            raise OverrideRefused(
                f"{given.created_by.get_username()} overrode this outcome already: their override is withdrawn "
                "first, by them or by an admin"
            )
        item, _ = Override.objects.update_or_create(
            conversation=conversation,
            turn=turn,
            target=target,
            defaults={"passed": passed, "note": note, "created_by": user},
        )
        _review(conversation)
        audit.record(
            user, conversation.run.project_id, Action.OVERRODE, conversation,
            turn=turn, check=target, passed=passed, note=note,
        )  # fmt: skip
    return item


def remove_override(conversation, override_id: int, *, by=None) -> None:
    """Withdraw one override: the conversation's verdict follows the ones left, or the run's own."""
    with transaction.atomic():
        conversation = Conversation.objects.select_for_update().get(pk=conversation.pk)
        withdrawn = conversation.overrides.filter(pk=override_id).first()
        if withdrawn is not None:
            withdrawn.delete()
            audit.record(
                by, conversation.run.project_id, Action.OVERRIDE_WITHDRAWN, conversation,
                turn=withdrawn.turn, check=withdrawn.target,
            )  # fmt: skip
        _review(conversation)


VERDICT_FIELDS = ("status", "score", "verdict", "reason", "passed_on_turn", "turns_passed", "turns_total")


def _review(conversation: Conversation) -> None:
    """The conversation's verdict under its overrides; its run's status too, when the run has finished.

    `original` keeps the run's own verdict, and `reviewed_turns` the turns whose pass the overrides changed,
    so that the ✓✗ strips show the reviewed outcome without reading the overrides."""
    original = conversation.original or {name: getattr(conversation, name) for name in VERDICT_FIELDS}
    rows = list(conversation.overrides.select_related("created_by"))
    if rows:
        spec = specs.bound(conversation.run.suite_version, conversation.run.vars)
        ev = spec.evals[conversation.index]
        driver = driver_for(ev, conversation.index, Defaults.of(spec))
        stored = selectors.turn_records(conversation)
        reviewed = overrides.reverdict(
            driver,
            stored,
            [selectors.override_record(row) for row in rows],
            graders=[GraderResult.model_validate(item) for item in conversation.graders],
            pass_rule=ev.pass_rule if ev.pass_rule is not None else spec.pass_rule,
        )
        verdict = reviewed.verdict
        text = f"{verdict.text} (reviewed: {reviewed.note})" if reviewed.note else verdict.text
        tally = driver.tally(reviewed.turns)
        values = {
            "status": verdict.outcome,
            "score": verdict.score,
            "verdict": text[:300],
            "reason": verdict.reason[:300],
            "passed_on_turn": verdict.passed_on_turn,
            "turns_passed": tally[0] if tally is not None else original["turns_passed"],
            "turns_total": tally[1] if tally is not None else original["turns_total"],
        }
        own = {turn.turn: turn.passed for turn in stored}
        original = {
            **{name: original[name] for name in VERDICT_FIELDS},
            "reviewed_turns": {
                str(turn.turn): turn.passed for turn in reviewed.turns if turn.passed != own.get(turn.turn)
            },
        }
        conversation.original = original
    else:
        values = {name: original[name] for name in VERDICT_FIELDS}
        conversation.original = {}
    for name, value in values.items():
        setattr(conversation, name, value)
    conversation.save(update_fields=[*VERDICT_FIELDS, "original"])
    run = conversation.run
    changes = {"revision": F("revision") + 1}  # the run page's kept aggregates of this run are stale
    if run.status in (Status.PASSED, Status.FAILED, Status.ERROR):
        changes["status"] = worker.final_status(run)
    Run.objects.filter(pk=run.pk).update(**changes)
