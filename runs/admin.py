from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected as delete_with_confirmation
from django.contrib.admin.utils import unquote
from django.db import models
from django.http import Http404, HttpResponseNotAllowed
from django.shortcuts import redirect
from django.urls import path

from endpoints.models import Endpoint
from endpoints.registry import current_registry
from engine import endpoint_checks
from engine.text import plural
from projects.audit import AuditedDeletes

from . import selectors
from .models import ACTIVE, Conversation, Label, Run, ShareLink, Turn


def probe(endpoint: Endpoint) -> endpoint_checks.ProbeResult:
    """Test an admin-defined endpoint; a model a run used on it stands in when it serves no /models."""
    last = selectors.last_model_on(endpoint)
    model = current_registry().resolve(last)[1] if last is not None else None
    return endpoint_checks.probe(endpoint.to_config(), model=model)


# Registered here rather than in the endpoints app: testing one asks runs which model it last served.


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "project_or_shared",
        "base_url",
        "api_key_env",
        "max_concurrency",
        "prices",
        "string_only",
    )
    search_fields = ("name", "base_url")
    list_filter = (("project", admin.RelatedOnlyFieldListFilter),)
    list_select_related = ("project",)
    # A URL typed without a scheme means https (Django 6 makes this the default; 5.2 warns until told).
    formfield_overrides = {models.URLField: {"assume_scheme": "https"}}
    actions = ["test_connection"]
    change_form_template = "admin/endpoints/endpoint/change_form.html"

    @admin.display(description="project", ordering="project__name", empty_value="shared by every project")
    def project_or_shared(self, endpoint: Endpoint):
        return endpoint.project

    @admin.display(description="prices")
    def prices(self, endpoint: Endpoint) -> str:
        # "no prices" rather than two zeros: runs on it cannot say what they cost.
        return endpoint.prices

    @admin.action(description="Test connection (asks the endpoint for its models)")
    def test_connection(self, request, queryset):
        for endpoint in queryset:
            self._report(request, endpoint)

    def _report(self, request, endpoint: Endpoint) -> None:
        result = probe(endpoint)
        level = messages.SUCCESS if result.ok else messages.ERROR
        self.message_user(request, f"Endpoint {endpoint.name}: {result.message}", level)

    def get_urls(self):
        test = path(
            "<path:object_id>/test-connection/",
            self.admin_site.admin_view(self.test_connection_view),
            name="endpoints_endpoint_test_connection",
        )
        return [test, *super().get_urls()]

    def test_connection_view(self, request, object_id):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        endpoint = self.get_object(request, unquote(object_id))
        if endpoint is None or not self.has_view_permission(request, endpoint):
            raise Http404("no such endpoint")
        self._report(request, endpoint)
        return redirect("admin:endpoints_endpoint_change", endpoint.pk)


class ConversationInline(admin.TabularInline):
    model = Conversation
    fields = ("index", "iteration", "eval_id", "status", "verdict", "turn_count", "cost")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


class LaunchedOnly:
    """Runs, conversations and turns are made by launching a suite, never by hand: the admin shows them.

    An added or edited row would bypass what launching sets up (the conversations, the dispatch, the
    endpoint it resolved) and what workers rely on while they write results.
    """

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(Run)
class RunAdmin(AuditedDeletes, LaunchedOnly, admin.ModelAdmin):
    """Read-only; a finished run may be deleted (with its conversations, turns and share links)."""

    list_display = ("id", "suite_version", "model", "status", "created_by", "created_at", "finished_at")
    list_filter = ("status", "endpoint_name", "is_mock")
    search_fields = ("model", "suite_version__suite__name")
    readonly_fields = (
        "id",
        "suite_version",
        "created_by",
        "endpoint_name",
        "is_mock",
        "created_at",
        "started_at",
        "finished_at",
    )
    inlines = [ConversationInline]

    def has_delete_permission(self, request, obj=None):
        # Workers still write to an active run's rows: cancel it first.
        return super().has_delete_permission(request, obj) and (obj is None or not obj.is_active)

    def get_deleted_objects(self, objs, request):
        deleted, counts, perms_needed, protected = super().get_deleted_objects(objs, request)
        # Conversations cannot be deleted on their own (see ConversationAdmin), but they go with their run.
        perms_needed.discard(Conversation._meta.verbose_name)
        return deleted, counts, perms_needed, protected

    @admin.action(permissions=["delete"], description="Delete selected finished runs")
    def delete_selected(self, request, queryset):
        active = queryset.filter(status__in=ACTIVE).count()
        if active:
            self.message_user(
                request,
                f"Nothing deleted: {plural(active, 'selected run')} still active; cancel "
                f"{'it' if active == 1 else 'them'} first.",
                messages.WARNING,
            )
            return None
        return delete_with_confirmation(self, request, queryset)

    def get_actions(self, request):
        actions = super().get_actions(request)
        if "delete_selected" in actions:
            actions["delete_selected"] = self.get_action("delete_selected")
        return actions


class TurnInline(admin.StackedInline):
    model = Turn
    fields = ("position", "passed", "record", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Conversation)
class ConversationAdmin(LaunchedOnly, admin.ModelAdmin):
    list_display = ("eval_id", "run", "status", "verdict", "turn_count", "attempt")
    list_filter = ("status",)
    readonly_fields = [field.name for field in Conversation._meta.fields]
    inlines = [TurnInline]

    def has_delete_permission(self, request, obj=None):
        return False  # one conversation less would leave its run's results with a hole


@admin.register(ShareLink)
class ShareLinkAdmin(admin.ModelAdmin):
    list_display = ("run", "created_by", "created_at", "expires_at", "last_used_at", "revoked_at")
    readonly_fields = ("token", "created_at", "last_used_at")


@admin.register(Label)
class LabelAdmin(admin.ModelAdmin):
    list_display = ("conversation", "created_by", "score", "scale", "updated_at")
    list_filter = ("scale",)
    search_fields = ("reason", "created_by__username")
    raw_id_fields = ("conversation",)
