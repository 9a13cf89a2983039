"""Every suite belongs to a project: the ones made before projects existed move into the default project."""

import django.db.models.deletion
from django.db import migrations, models


def into_default(apps, schema_editor):
    Project = apps.get_model("projects", "Project")
    Suite = apps.get_model("suites", "Suite")
    project, _ = Project.objects.get_or_create(slug="default", defaults={"name": "Default"})
    Suite.objects.filter(project__isnull=True).update(project=project)


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0002_default_project"),
        ("suites", "0004_safe_file_names"),
    ]

    operations = [
        migrations.AddField(
            model_name="suite",
            name="project",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="suites",
                to="projects.project",
            ),
        ),
        migrations.RunPython(into_default, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="suite",
            name="project",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="suites", to="projects.project"
            ),
        ),
    ]
