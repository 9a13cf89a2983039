from django.contrib import admin

from .models import Conversation, Endpoint, Run, ShareLink, Turn


@admin.register(Endpoint)
class EndpointAdmin(admin.ModelAdmin):
    list_display = (
        "name",
        "base_url",
        "api_key_env",
        "max_concurrency",
        "price_input",
        "price_output",
        "string_only",
    )
    search_fields = ("name", "base_url")


class ConversationInline(admin.TabularInline):
    model = Conversation
    fields = ("index", "iteration", "eval_id", "status", "verdict", "turn_count", "cost")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
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


class TurnInline(admin.StackedInline):
    model = Turn
    fields = ("position", "passed", "record", "created_at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Conversation)
class ConversationAdmin(admin.ModelAdmin):
    list_display = ("eval_id", "run", "status", "verdict", "turn_count", "attempt")
    list_filter = ("status",)
    readonly_fields = [field.name for field in Conversation._meta.fields]
    inlines = [TurnInline]


@admin.register(ShareLink)
class ShareLinkAdmin(admin.ModelAdmin):
    list_display = ("run", "created_by", "created_at", "revoked_at")
    readonly_fields = ("token", "created_at")
