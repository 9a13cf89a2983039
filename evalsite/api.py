"""The one NinjaAPI. Each app contributes a Router. Session auth; ninja enforces CSRF on its unsafe methods."""

from ninja import NinjaAPI
from ninja.security import django_auth

api = NinjaAPI(title="evalsite API", version="1", auth=django_auth, urls_namespace="api")


def _mount() -> None:
    from runs.api import router as runs_router
    from suites.api import router as suites_router

    api.add_router("/suites", suites_router)
    api.add_router("/runs", runs_router)


_mount()
