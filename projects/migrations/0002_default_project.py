"""Makes the default project, which every suite, run, endpoint and token made before projects existed moves
into (their own migrations), and makes every user a member of it: superusers as admins, everyone else as
editors (an editor does all they did before, but delete)."""

from django.conf import settings
from django.db import migrations

DEFAULT_SLUG = "default"


def forwards(apps, schema_editor):
    Project = apps.get_model("projects", "Project")
    Membership = apps.get_model("projects", "Membership")
    User = apps.get_model(*settings.AUTH_USER_MODEL.split("."))
    project, _ = Project.objects.get_or_create(slug=DEFAULT_SLUG, defaults={"name": "Default"})
    Membership.objects.bulk_create(
        [
            Membership(project=project, user_id=pk, role="admin" if superuser else "editor")
            for pk, superuser in User.objects.values_list("pk", "is_superuser")
        ],
        ignore_conflicts=True,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("projects", "0001_initial"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [migrations.RunPython(forwards, migrations.RunPython.noop)]
