"""What the signed-in user may do in a project, for a page that offers an action only to those who may take it
(the view checks again: projects.access)."""

from __future__ import annotations

from django import template

from .. import access
from ..roles import Can, allows

register = template.Library()


@register.simple_tag(takes_context=True)
def may(context, action: str, project_id: int) -> bool:
    """`{% may "manage" run.project_id as can_manage %}`."""
    user = getattr(context.get("request"), "user", None)
    return user is not None and allows(access.role_of(user, project_id), Can(action))
