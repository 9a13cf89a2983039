from django.conf import settings
from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from runs import launch_urls
from runs.views import response_cache
from runs.views.links import project_links, revoke_project_link
from runs.views.tokens import revoke_token, tokens
from suites import urls as suite_urls

from .api import api

# A suite's launch URLs are runs' views (suites does not import runs), under the suite's path and namespace.
suite_pages = (suite_urls.urlpatterns + launch_urls.urlpatterns, suite_urls.app_name)

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="suites:list", permanent=False)),
    path(
        "accounts/login/",
        auth_views.LoginView.as_view(
            extra_context={"sso_name": settings.EVALSITE_OIDC_NAME if settings.EVALSITE_OIDC else ""}
        ),
        name="login",
    ),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("admin/response-cache/", response_cache.page, name="admin_response_cache"),
    path("admin/", admin.site.urls),
    path("api/", api.urls),
    path("tokens/", tokens, name="tokens"),
    path("tokens/<int:token_id>/revoke/", revoke_token, name="token_revoke"),
    path("suites/", include(suite_pages)),
    path("runs/", include("runs.urls")),
    path("matrices/", include("runs.matrix_urls")),
    # A project's share links are runs' rows (projects does not import runs), under the project's path.
    path("projects/<slug:slug>/links/", project_links, name="project_share_links"),
    path(
        "projects/<slug:slug>/links/<int:link_id>/revoke/",
        revoke_project_link,
        name="project_share_link_revoke",
    ),
    path("projects/", include("projects.urls")),
    path("s/", include("runs.share_urls")),
]

if settings.EVALSITE_OIDC:  # single sign-on: its sign-in, callback and logout, only when configured
    urlpatterns.append(path("oidc/", include("mozilla_django_oidc.urls")))

handler400 = "evalsite.middleware.bad_request"
handler500 = "evalsite.middleware.server_error"
