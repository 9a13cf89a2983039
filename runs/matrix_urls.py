from django.urls import path

from .views import matrix

app_name = "matrices"
urlpatterns = [
    path("<uuid:matrix_id>/", matrix.detail, name="detail"),
    path("<uuid:matrix_id>/poll/", matrix.poll, name="poll"),
    path("<uuid:matrix_id>/compare/", matrix.compare, name="compare"),
    path("<uuid:matrix_id>/export.<str:form>", matrix.export, name="export"),
]
