from django.urls import path

from . import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("<uuid:run_id>/", views.detail, name="detail"),
    path("<uuid:run_id>/progress/", views.progress, name="progress"),
    path("<uuid:run_id>/calibration/", views.calibration, name="calibration"),
    path("<uuid:run_id>/review/", views.review, name="review"),
    path("<uuid:run_id>/review/assign/", views.assign, name="review_assign"),
    path("<uuid:run_id>/review/unassign/", views.unassign, name="review_unassign"),
    path("<uuid:run_id>/labels/to-set/", views.add_to_set, name="labels_to_set"),
    path("<uuid:run_id>/c/<int:index>/label/", views.label, name="label"),
    path("<uuid:run_id>/c/<int:index>/override/", views.override, name="override"),
    path(
        "<uuid:run_id>/c/<int:index>/override/<int:override_id>/remove/",
        views.remove_override,
        name="remove_override",
    ),
    path("<uuid:run_id>/cancel/", views.cancel, name="cancel"),
    path("<uuid:run_id>/delete/", views.delete_run, name="delete"),
    path("<uuid:run_id>/retry-errored/", views.retry_errored, name="retry_errored"),
    path("<uuid:run_id>/results.json", views.results_json, name="json"),
    path("<uuid:run_id>/results.<str:form>", views.results_export, name="export"),
    path("<uuid:run_id>/share/", views.share, name="share"),
    path("<uuid:run_id>/share/<int:link_id>/revoke/", views.revoke, name="revoke"),
    path("<uuid:run_id>/c/<int:index>/", views.conversation, name="conversation"),
    path("<uuid:run_id>/c/<int:index>/poll/", views.conversation_poll, name="conversation_poll"),
    path("<uuid:run_id>/compare/", views.compare_runs, name="compare"),
    path("<uuid:run_id>/compare/<uuid:other_id>/", views.compare_runs, name="compare_with"),
    path("<uuid:run_id>/compare/<uuid:other_id>/e/<path:eval_id>/", views.compare_eval, name="compare_eval"),
    path("<uuid:run_id>/pin/", views.pin, name="pin"),
    path("<uuid:run_id>/regrade/", views.regrade, name="regrade"),
]
