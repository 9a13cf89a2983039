"""Launching a run of a suite: runs' views at URLs under the suite's, in the `suites` namespace (evalsite.urls)."""

from django.urls import path

from .views.launch import launch, launch_routes

urlpatterns = [
    path("<uuid:public_id>/launch/", launch, name="launch"),
    path("<uuid:public_id>/launch/routes/", launch_routes, name="launch_routes"),
]
