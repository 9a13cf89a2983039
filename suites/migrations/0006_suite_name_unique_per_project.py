"""A suite's name is unique in its project rather than for its owner. Suites of several owners that moved into
one project under the same name keep the oldest's name; each other one gets its owner's name after it."""

from django.db import migrations, models


def tell_apart(apps, schema_editor):
    Suite = apps.get_model("suites", "Suite")
    taken: set[tuple[int, str]] = set()
    for suite in Suite.objects.select_related("owner").order_by("created_at", "pk"):
        key = (suite.project_id, suite.name)
        if key not in taken:
            taken.add(key)
            continue
        base = f"{suite.name} ({suite.owner.username})"[:190]
        name, number = base, 1
        while (suite.project_id, name) in taken:
            number += 1
            name = f"{base} {number}"
        taken.add((suite.project_id, name))
        Suite.objects.filter(pk=suite.pk).update(name=name)


class Migration(migrations.Migration):
    dependencies = [
        ("suites", "0005_suite_project"),
    ]

    operations = [
        migrations.RemoveConstraint(model_name="suite", name="suite_unique_name_per_owner"),
        migrations.RunPython(tell_apart, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="suite",
            constraint=models.UniqueConstraint(fields=("project", "name"), name="suite_unique_name_per_project"),
        ),
    ]
