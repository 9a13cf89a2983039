"""What a page shows a member: controls their role allows, and for the others the role they would need (the
view checks again: projects.access)."""

from __future__ import annotations

from django import template

from ..access import role_of
from ..roles import LEAST_ROLE, Can, allows

register = template.Library()


@register.simple_tag(takes_context=True)
def allowed(context, project_id: int, can: str) -> bool:
    """`{% allowed run.project_id "edit" as can_edit %}`: whether the signed-in user's role allows it."""
    request = context.get("request")
    if request is None or not request.user.is_authenticated:
        return False
    return allows(role_of(request.user, project_id), Can(can))


@register.filter
def role_needed(can: str) -> str:
    """`{{ "edit"|role_needed }}`: the sentence a disabled control's title gives."""
    return f"Needs the {LEAST_ROLE[Can(can)].label.lower()} role in this project"
