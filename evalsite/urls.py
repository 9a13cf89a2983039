from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from runs.views.tokens import revoke_token, tokens

from .api import api

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="suites:list", permanent=False)),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("tokens/", tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", revoke_token, name="token_revoke"),
    path("suites/", include("suites.urls")),
    path("runs/", include("runs.urls")),
    path("s/", include("runs.share_urls")),
]

handler400 = "evalsite.middleware.bad_request"
handler500 = "evalsite.middleware.server_error"
