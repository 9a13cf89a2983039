"""The audit log's URL, under a project's path (`/projects/<slug>/audit/`)."""

from django.urls import path

from .views.audit import audit_log

app_name = "audit"

urlpatterns = [
    path("", audit_log, name="log"),
]
