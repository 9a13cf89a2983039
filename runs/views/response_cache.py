"""The admin's page of the response cache (runs.response_cache): how much it holds, and a purge."""

from __future__ import annotations

from django.contrib import admin, messages
from django.shortcuts import redirect
from django.template.response import TemplateResponse
from django.views.decorators.http import require_http_methods

from engine.text import plural

from .. import response_cache


@require_http_methods(["GET", "POST"])
def response_cache_page(request):
    if request.method == "POST":
        if request.POST.get("confirm") != "yes":
            messages.error(request, "Nothing was purged: tick the box to confirm.")
        else:
            purged = response_cache.purge()
            messages.success(request, f"Purged {plural(purged, 'cached answer')}.")
        return redirect("admin_response_cache")
    context = {
        **admin.site.each_context(request),
        "title": "Response cache",
        "size": response_cache.size(),
    }
    return TemplateResponse(request, "admin/response_cache.html", context)


page = admin.site.admin_view(response_cache_page)
