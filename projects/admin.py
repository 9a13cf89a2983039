from django.contrib import admin

from . import audit, services
from .models import Action, AuditEvent, Membership, Project


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 1
    autocomplete_fields = ("user",)


@admin.register(Project)
class ProjectAdmin(admin.ModelAdmin):
    list_display = ("name", "slug", "created_at")
    search_fields = ("name", "slug")
    prepopulated_fields = {"slug": ("name",)}
    inlines = [MembershipInline]

    def save_formset(self, request, form, formset, change):
        """Members added, given another role or removed here are in the project's audit log; a removal ends
        what the member's access kept open, as on the members page (services.member_removed)."""
        if formset.model is not Membership:
            return super().save_formset(request, form, formset, change)
        saved = formset.save()  # fills new_objects, changed_objects and deleted_objects
        for action, memberships in (
            (Action.MEMBER_ADDED, formset.new_objects),
            (Action.MEMBER_CHANGED, [m for m, _ in formset.changed_objects]),
            (Action.MEMBER_REMOVED, formset.deleted_objects),
        ):
            for membership in memberships:
                removed = action == Action.MEMBER_REMOVED
                ended = services.ended_with(membership, by=request.user) if removed else {}
                audit.record(
                    request.user, form.instance.pk, action, membership.user, role=membership.role, **ended
                )
        return saved


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    """The log is written by the services that make the changes; here it is only read."""

    list_display = ("created_at", "project", "actor_name", "action", "target_label")
    list_filter = ("action", "project")
    search_fields = ("actor_name", "target_label", "target_id")
    date_hierarchy = "created_at"

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
