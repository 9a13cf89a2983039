"""A project's members: everyone in it sees the list; admins add a user by username, change a role or remove
a member (never the last admin; the share links they made to the project's runs are revoked with them)."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_http_methods

from .. import services
from ..access import check, needs
from ..forms import AddMemberForm, RoleForm
from ..models import Membership, Project
from ..roles import ORDER, Can, Role, allows


@needs(Can.VIEW, to_post=Can.MANAGE)
@login_required
@require_http_methods(["GET", "POST"])
def members(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project, slug=slug)
    role = check(request.user, project.pk, Can.VIEW)
    form = AddMemberForm()
    status = 200
    if request.method == "POST":
        check(request.user, project.pk, Can.MANAGE)
        outcome = _change(request, project)
        if outcome is None:
            return redirect("projects:members", slug=project.slug)
        form, status = outcome
    rows = list(Membership.objects.filter(project=project).select_related("user").order_by("user__username"))
    rows.sort(key=lambda row: -ORDER.index(Role(row.role)))
    context = {
        "project": project,
        "rows": rows,
        "form": form,
        "my_role": role,
        "can_manage": allows(role, Can.MANAGE),
        "roles": Role.choices,
    }
    return render(request, "projects/members.html", context, status=status)


def _change(request: HttpRequest, project: Project) -> tuple[AddMemberForm, int] | None:
    """Applies the posted change; None when done (or refused with a message), else the form to show again."""
    action = request.POST.get("action", "add")
    if action == "add":
        form = AddMemberForm(request.POST)
        if not form.is_valid():
            return form, 400
        try:
            services.add_member(project, form.user, Role(form.cleaned_data["role"]), by=request.user)
        except services.MembershipRefused as exc:
            form.add_error("username", str(exc))
            return form, 400
        messages.success(request, f"Added {form.user.get_username()} as {form.cleaned_data['role']}.")
        return None
    member = request.POST.get("member", "")
    membership = get_object_or_404(Membership, project=project, pk=int(member) if member.isdigit() else 0)
    name = membership.user.get_username()
    try:
        if action == "remove":
            ended = services.remove_member(membership, by=request.user)
            said = "; ".join(f"{key.replace('_', ' ')}: {value}" for key, value in ended.items())
            messages.success(request, f"Removed {name} from {project.name}{f' ({said})' if said else ''}.")
        else:
            form = RoleForm(request.POST)
            if form.is_valid():
                services.change_role(membership, Role(form.cleaned_data["role"]), by=request.user)
                messages.success(request, f"{name} is now {form.cleaned_data['role']}.")
            else:
                messages.error(
                    request, f"Role of {name} unchanged: choose viewer, reviewer, editor or admin."
                )
    except services.MembershipRefused as exc:
        messages.error(request, str(exc))
    return None
