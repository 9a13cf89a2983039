"""Read-only views of a run through a share link, at /s/<token>/. No login; a revoked token is a 404."""

from django.urls import path

from . import views

app_name = "share"
urlpatterns = [
    path("<str:token>/", views.shared_run, name="run"),
    path("<str:token>/progress/", views.shared_progress, name="progress"),
    path("<str:token>/results.json", views.shared_json, name="json"),
    path("<str:token>/results.<str:form>", views.shared_export, name="export"),
    path("<str:token>/calibration/", views.shared_calibration, name="calibration"),
    path("<str:token>/c/<int:index>/", views.shared_conversation, name="conversation"),
    path("<str:token>/c/<int:index>/poll/", views.shared_conversation_poll, name="conversation_poll"),
]
