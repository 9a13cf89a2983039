"""Every run keeps its suite's project, for the runs list's index."""

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def from_suite(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    Suite = apps.get_model("suites", "Suite")
    project = Suite.objects.filter(versions=OuterRef("suite_version_id")).values("project_id")[:1]
    Run.objects.filter(project__isnull=True).update(project_id=Subquery(project))


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0002_default_project"),
        ("runs", "0023_delete_endpoint"),
        ("suites", "0005_suite_project"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="project",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="runs",
                to="projects.project",
            ),
        ),
        migrations.RunPython(from_suite, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="run",
            name="project",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="runs", to="projects.project"
            ),
        ),
        migrations.AddIndex(
            model_name="run",
            index=models.Index(fields=["project", "-created_at"], name="run_project_recent"),
        ),
    ]
