from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        # The Celery app, configured from the settings, before any task is sent: `shared_task` binds to it.
        from evalsite import celery  # noqa: F401
