"""The Endpoint model, whose table the runs app created: the state moves here, the table and its rows stay."""

import django.core.validators
from django.db import migrations, models


def _rename_content_type(apps, schema_editor, old: str, new: str) -> None:
    """Keep the model's content type row, so permissions granted on it and admin history still apply."""
    content_types = apps.get_model("contenttypes", "ContentType")
    database = schema_editor.connection.alias
    content_types.objects.using(database).filter(app_label=old, model="endpoint").update(app_label=new)


def _to_endpoints(apps, schema_editor):
    _rename_content_type(apps, schema_editor, "runs", "endpoints")


def _to_runs(apps, schema_editor):
    _rename_content_type(apps, schema_editor, "endpoints", "runs")


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('contenttypes', '0002_remove_content_type_name'),
        ('runs', '0022_run_vars'),
    ]

    create = migrations.CreateModel(
        name='Endpoint',
        fields=[
            ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
            ('name', models.SlugField(help_text='Used as the prefix in model references: "name/model-id". "mock" and "default" are reserved.', unique=True)),
            ('base_url', models.URLField(help_text='e.g. https://openrouter.ai/api/v1', max_length=500)),
            ('api_key_env', models.CharField(blank=True, default='OPENAI_API_KEY', help_text='The NAME of the environment variable holding the key (empty for an endpoint that needs none, e.g. a local server). Keys never live in the database.', max_length=100, validators=[django.core.validators.RegexValidator('^[A-Z_][A-Z0-9_]*$', 'An environment variable name, e.g. OPENROUTER_API_KEY')], verbose_name='API key variable')),
            ('max_concurrency', models.PositiveIntegerField(default=10, help_text='Conversations in flight at once, across runs.', validators=[django.core.validators.MinValueValidator(1)])),
            ('price_input', models.DecimalField(decimal_places=4, default=0, help_text='USD per million prompt tokens', max_digits=10, verbose_name='input price')),
            ('price_output', models.DecimalField(decimal_places=4, default=0, help_text='USD per million completion tokens', max_digits=10, verbose_name='output price')),
            ('timeout', models.FloatField(default=60.0, help_text="Seconds one request may take before it is abandoned and retried (within its retry budget). A suite's request_timeout, and `evalsite run --timeout`, override it for their runs.", validators=[django.core.validators.MinValueValidator(0.1), django.core.validators.MaxValueValidator(3600)])),
            ('string_only', models.BooleanField(default=False, help_text='Send the conversation as one [Role]: transcript string instead of a messages array.')),
            ('retry_seconds', models.FloatField(blank=True, help_text='Seconds one model call keeps retrying rate limits, 5xx answers, timeouts and dropped connections, waits included, before its conversation errors. Empty: EVALSITE_RETRY_SECONDS (300 unless set).', null=True, validators=[django.core.validators.MinValueValidator(0)], verbose_name='retry for')),
        ],
        options={
            'db_table': 'runs_endpoint',
            'ordering': ['name'],
            'constraints': [models.CheckConstraint(condition=models.Q(('name__in', ['mock', 'default']), _negated=True), name='endpoint_name_not_reserved')],
        },
    )

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[create]),
        migrations.RunPython(_to_endpoints, _to_runs),
    ]
