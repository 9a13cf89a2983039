"""A project's active share links, for its admins: who made each, to which run, when, when it was last used
and when it expires; any of them revoked from here."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET, require_POST

from projects.access import check, needs
from projects.models import Project
from projects.roles import Can

from .. import selectors, services
from ..models import ShareLink


@needs(Can.MANAGE)
@never_cache  # the page holds every link's whole URL
@login_required
@require_GET
def project_links(request: HttpRequest, slug: str) -> HttpResponse:
    project = get_object_or_404(Project, slug=slug)
    check(request.user, project.pk, Can.MANAGE)
    links = selectors.project_share_links(project.pk)
    for link in links:
        link.url = request.build_absolute_uri(reverse("share:run", args=[link.token]))
    return render(request, "projects/share_links.html", {"project": project, "links": links})


@needs(Can.MANAGE)
@login_required
@require_POST
def revoke_project_link(request: HttpRequest, slug: str, link_id: int) -> HttpResponse:
    project = get_object_or_404(Project, slug=slug)
    check(request.user, project.pk, Can.MANAGE)
    link = get_object_or_404(ShareLink.objects.select_related("run"), pk=link_id, run__project=project)
    if link.is_active:
        services.revoke_share_link(link, by=request.user)
        messages.success(request, "Share link revoked. It no longer opens its run.")
    else:
        messages.info(request, "That link was already revoked, or has expired.")
    return redirect("project_share_links", slug=project.slug)
