"""Projects pages, under /projects/."""

from django.urls import path

from . import views

app_name = "projects"
urlpatterns = [
    path("", views.project_list, name="list"),
    path("new/", views.create, name="create"),
    path("switch/", views.switch, name="switch"),
    path("<slug:slug>/members/", views.members, name="members"),
    path("<slug:slug>/audit/", views.audit_log, name="audit"),
]
