"""The Endpoint model belongs to the endpoints app: runs forgets it, the table stays (endpoints 0001)."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('endpoints', '0001_initial'),
        ('runs', '0022_run_vars'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name='Endpoint')]),
    ]
