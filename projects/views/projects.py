"""The projects list (mine, with my role), creating a project and switching the current one."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from .. import services
from ..access import check, needs, projects_for, roles_of
from ..current import current_project, switch_to
from ..forms import ProjectForm
from ..models import Project
from ..roles import Can


@needs(Can.VIEW)
@login_required
@require_GET
def project_list(request: HttpRequest) -> HttpResponse:
    roles = roles_of(request.user)
    rows = [(project, roles[project.pk]) for project in projects_for(request.user)]
    context = {"rows": rows, "form": ProjectForm(), "current": current_project(request)}
    return render(request, "projects/list.html", context)


@needs(Can.VIEW)  # any signed-in user may start a project of their own
@login_required
@require_POST
def create(request: HttpRequest) -> HttpResponse:
    form = ProjectForm(request.POST)
    if not form.is_valid():
        roles = roles_of(request.user)
        rows = [(project, roles[project.pk]) for project in projects_for(request.user)]
        context = {"rows": rows, "form": form, "current": current_project(request)}
        return render(request, "projects/list.html", context, status=400)
    project = services.create_project(name=form.cleaned_data["name"], creator=request.user)
    switch_to(request, project)
    messages.success(request, f"Created “{project.name}”: you are its admin. Add members below.")
    return redirect("projects:members", slug=project.slug)


@needs(Can.VIEW)
@login_required
@require_POST
def switch(request: HttpRequest) -> HttpResponse:
    """The navigation's project switcher: back to the page it was on (a list page then shows the project)."""
    project = get_object_or_404(Project, slug=request.POST.get("project", ""))
    check(request.user, project.pk, Can.VIEW)
    switch_to(request, project)
    back = request.POST.get("next", "")
    if not url_has_allowed_host_and_scheme(back, allowed_hosts={request.get_host()}):
        back = "suites:list"
    return redirect(back)
