"""The audit log: one `record` call per change, made by the service that makes the change, inside its
transaction, so that a change rolled back leaves no event.

The target is any model instance; the event keeps its kind, id and label as text. A model may give a
better label than its `str` through an `audit_label` attribute.
"""

from __future__ import annotations

from django.apps import apps
from django.db import transaction
from django.db.models import Model

from .models import Action, AuditEvent

LABEL_LENGTH = AuditEvent._meta.get_field("target_label").max_length


def record(actor, project_id: int, action: Action, target: Model, **detail) -> AuditEvent:
    """Store one event; `actor` is the user who acted, or None for the system (a script, a migration)."""
    signed_in = actor is not None and actor.is_authenticated
    label = getattr(target, "audit_label", None) or str(target)
    return AuditEvent.objects.create(
        project_id=project_id,
        actor=actor if signed_in else None,
        actor_name=actor.get_username() if signed_in else "",
        action=action,
        target_kind=target._meta.label_lower,
        target_id=str(target.pk),
        target_label=label[:LABEL_LENGTH],
        detail=detail,
    )


def target_links(events: list[AuditEvent]) -> dict[tuple[str, str], str]:
    """Each target that still exists, by (kind, id): its page, or "" when it has none; one query per kind."""
    wanted: dict[str, set[str]] = {}
    for event in events:
        wanted.setdefault(event.target_kind, set()).add(event.target_id)
    links = {}
    for kind, ids in wanted.items():
        try:
            model = apps.get_model(kind)
        except (LookupError, ValueError):  # an app since removed
            continue
        has_page = hasattr(model, "get_absolute_url")
        for row in model._default_manager.filter(pk__in=ids):
            links[(kind, str(row.pk))] = row.get_absolute_url() if has_page else ""
    return links


class AuditedDeletes:
    """For a ModelAdmin of a model with a `project`: a deletion there records who deleted what, in the
    deletion's transaction (the label is read before the rows go)."""

    def delete_model(self, request, obj):
        with transaction.atomic():
            record(request.user, obj.project_id, Action.DELETED, obj, where="admin")
            super().delete_model(request, obj)

    def delete_queryset(self, request, queryset):
        with transaction.atomic():
            for obj in queryset:
                record(request.user, obj.project_id, Action.DELETED, obj, where="admin")
            super().delete_queryset(request, queryset)
