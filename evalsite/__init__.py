"""The evalsite project: settings, URLs, the Celery app and the `evalsite` command.

The Celery app is loaded when Django starts (runs.apps), not on import of this package: `evalsite run
--server` imports the package from a client install, which has no Celery. `celery -A evalsite` finds the app
in evalsite.celery by itself; `evalsite.celery_app` still names it.
"""


def __getattr__(name: str):
    if name == "celery_app":
        from .celery import app

        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
