"""Suite pages. The launch URLs under a suite are runs' views, added to this namespace by evalsite.urls."""

from django.urls import path

from . import views

app_name = "suites"
urlpatterns = [
    path("", views.suite_list, name="list"),
    path("new/", views.new, name="new"),
    path("validate/", views.validate, name="validate"),
    path("upload/", views.upload, name="upload"),
    path("import/", views.import_suite, name="import"),
    path("<uuid:public_id>/", views.detail, name="detail"),
    path("<uuid:public_id>/v/<int:number>/", views.version, name="version"),
    path("<uuid:public_id>/v/<int:number>/diff/<int:other>/", views.version_diff, name="version_diff"),
    path("<uuid:public_id>/delete/", views.delete_suite, name="delete"),
    path("<uuid:public_id>/files/", views.attach_files, name="attach_files"),
    path("<uuid:public_id>/files/remove/", views.remove_file, name="remove_file"),
    path("<uuid:public_id>/v/<int:number>/files/<str:name>", views.version_file, name="version_file"),
]
