from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0029_run_project_ref_index"),
    ]

    operations = [
        migrations.AddField(
            model_name="conversation",
            name="tools_called",
            field=models.TextField(blank=True, default=""),
        ),
    ]
