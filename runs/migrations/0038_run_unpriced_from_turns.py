"""Runs whose `unpriced` is empty (launched before runs said which endpoints have no prices, or since with every
endpoint priced) name their own endpoint when their stored turns prove that it had no prices then, so that their
pages say their cost is unknown, or a lower bound, rather than a dollar figure.

The proof is a call of the model under test, whose calls all go to the run's endpoint, that used prompt and
completion tokens and cost nothing, not answered from the response cache: an endpoint with any price charges
such a call something. A run on the mock, a re-grade (which replays replies it never asked for) and a reply given
in the suite make no such call. Judges' and simulated users' calls may go to other endpoints, which their turns
do not name: they are not guessed at.
"""

from django.db import migrations


def name_unpriced_endpoints(apps, schema_editor):
    Run = apps.get_model("runs", "Run")
    Turn = apps.get_model("runs", "Turn")
    runs = Run.objects.filter(is_mock=False).only("pk", "unpriced", "endpoint_name")
    for run in runs.iterator(chunk_size=2000):
        if run.unpriced:
            continue
        free = Turn.objects.filter(
            conversation__run_id=run.pk,
            record__cost=0,
            record__usage__prompt_tokens__gt=0,
            record__usage__completion_tokens__gt=0,
        ).values_list("record", flat=True)
        # Read in Python: a turn stored before the response cache has no `cached` to filter on.
        if any(not record.get("cached") for record in free.iterator(chunk_size=200)):
            Run.objects.filter(pk=run.pk).update(unpriced=[run.endpoint_name])


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0037_cached_answer"),
    ]

    operations = [
        # Reversed, nothing is undone: the names it wrote are true of the runs either way.
        migrations.RunPython(name_unpriced_endpoints, migrations.RunPython.noop, elidable=True),
    ]
