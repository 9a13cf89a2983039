from django.urls import path

from . import views

app_name = "suites"
urlpatterns = [
    path("", views.suite_list, name="list"),
    path("new/", views.new, name="new"),
    path("validate/", views.validate, name="validate"),
    path("upload/", views.upload, name="upload"),
    path("<uuid:public_id>/", views.detail, name="detail"),
    path("<uuid:public_id>/v/<int:number>/", views.version, name="version"),
    path("<uuid:public_id>/launch/", views.launch, name="launch"),
]
