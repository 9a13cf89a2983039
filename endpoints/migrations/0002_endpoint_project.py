"""An endpoint may belong to one project; the existing ones stay shared by every project (no project)."""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("endpoints", "0001_initial"),
        ("projects", "0002_default_project"),
    ]

    operations = [
        migrations.AddField(
            model_name="endpoint",
            name="project",
            field=models.ForeignKey(
                blank=True,
                help_text="Empty: every project may use it. Set: only this project's suites and launches.",
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="endpoints",
                to="projects.project",
            ),
        ),
    ]
