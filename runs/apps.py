from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"
    verbose_name = "Runs"

    def ready(self) -> None:
        from django.contrib.auth import get_user_model
        from django.db.models.signals import post_save

        # The Celery app, configured from the settings, before any task is sent: `shared_task` binds to it.
        from evalsite import celery  # noqa: F401
        from projects.services import member_removed

        from . import services

        # Share links end with their maker's access: a member removed, a user deactivated.
        member_removed.connect(services.member_removed, dispatch_uid="runs.share_links.member_removed")
        post_save.connect(services.user_saved, sender=get_user_model(), dispatch_uid="runs.share_links.user")
