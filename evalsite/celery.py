"""The Celery app. Configuration comes from Django settings (CELERY_* names)."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalsite.settings")

# The worker imports the modules that hold tasks by name, once Django is set up.
app = Celery("evalsite", include=["runs.worker.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.steps["consumer"].add("runs.worker.tasks:ResendOnConnect")
