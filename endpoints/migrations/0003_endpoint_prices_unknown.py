"""An endpoint's prices may be empty, which is no price known; an endpoint whose prices were both 0 (the old
default, which meant the same) is stored empty."""

from django.db import migrations, models


def _zero_to_empty(apps, schema_editor):
    Endpoint = apps.get_model("endpoints", "Endpoint")
    Endpoint.objects.filter(price_input=0, price_output=0).update(price_input=None, price_output=None)


def _empty_to_zero(apps, schema_editor):
    Endpoint = apps.get_model("endpoints", "Endpoint")
    Endpoint.objects.filter(price_input__isnull=True).update(price_input=0)
    Endpoint.objects.filter(price_output__isnull=True).update(price_output=0)


class Migration(migrations.Migration):
    dependencies = [
        ("endpoints", "0002_endpoint_project"),
    ]

    operations = [
        migrations.AlterField(
            model_name="endpoint",
            name="price_input",
            field=models.DecimalField(
                blank=True,
                decimal_places=4,
                help_text="USD per million prompt tokens. Leave both prices empty when they are not known: runs on "
                "this endpoint then show their cost as unknown, not $0 (0 for both reads the same).",
                max_digits=10,
                null=True,
                verbose_name="input price",
            ),
        ),
        migrations.AlterField(
            model_name="endpoint",
            name="price_output",
            field=models.DecimalField(
                blank=True,
                decimal_places=4,
                help_text="USD per million completion tokens; empty: not known.",
                max_digits=10,
                null=True,
                verbose_name="output price",
            ),
        ),
        # Reversed, the empty prices are 0 again before the columns take NULL no more.
        migrations.RunPython(_zero_to_empty, _empty_to_zero),
    ]
