from django import forms
from django.contrib import admin

from engine.loader import load_suite
from engine.source import SuiteError
from projects.audit import AuditedDeletes

from .models import Suite, SuiteVersion
from .services import save_version


class SuiteVersionInline(admin.TabularInline):
    model = SuiteVersion
    fields = ("number", "note", "created_by", "created_at", "sha256")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Suite)
class SuiteAdmin(AuditedDeletes, admin.ModelAdmin):
    list_display = ("name", "owner", "updated_at")
    list_filter = ("owner",)
    search_fields = ("name", "description")
    readonly_fields = ("public_id", "created_at", "updated_at")
    inlines = [SuiteVersionInline]


@admin.register(SuiteVersion)
class SuiteVersionAdmin(admin.ModelAdmin):
    """Versions are immutable: the admin shows them and can add new ones, never edit old ones."""

    list_display = ("suite", "number", "note", "created_by", "created_at")
    list_filter = ("suite",)
    search_fields = ("suite__name", "note")

    def get_readonly_fields(self, request, obj=None):
        if obj is not None:
            return ("suite", "number", "source", "sha256", "note", "created_by", "created_at")
        return ("number", "sha256", "created_by", "created_at")

    def save_model(self, request, obj, form, change):
        if change:
            return
        save_version(suite=obj.suite, source=obj.source, user=request.user, note=obj.note)

    def get_form(self, request, obj=None, **kwargs):
        form = super().get_form(request, obj, **kwargs)
        if obj is None:
            base_clean = form.clean

            def clean(self):
                data = base_clean(self)
                source = data.get("source") or ""
                try:
                    load_suite(source)
                except SuiteError as exc:
                    raise forms.ValidationError([str(problem) for problem in exc.problems]) from None
                return data

            form.clean = clean
        return form
