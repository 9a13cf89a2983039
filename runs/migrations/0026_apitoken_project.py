"""Every API token belongs to a project: the ones made before projects existed act in the default project."""

import django.db.models.deletion
from django.db import migrations, models


def into_default(apps, schema_editor):
    Project = apps.get_model("projects", "Project")
    ApiToken = apps.get_model("runs", "ApiToken")
    if not ApiToken.objects.filter(project__isnull=True).exists():
        return
    project, _ = Project.objects.get_or_create(slug="default", defaults={"name": "Default"})
    ApiToken.objects.filter(project__isnull=True).update(project=project)


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0002_default_project"),
        ("runs", "0025_review_assignment"),
    ]

    operations = [
        migrations.AddField(
            model_name="apitoken",
            name="project",
            field=models.ForeignKey(
                null=True,
                on_delete=django.db.models.deletion.CASCADE,
                related_name="api_tokens",
                to="projects.project",
            ),
        ),
        migrations.RunPython(into_default, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="apitoken",
            name="project",
            field=models.ForeignKey(
                on_delete=django.db.models.deletion.CASCADE, related_name="api_tokens", to="projects.project"
            ),
        ),
    ]
