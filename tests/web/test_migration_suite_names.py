"""Suites that moved into one project under one name (made by different people) are told apart when names
become unique per project: the oldest keeps its name, each other one gets its owner's name after it."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("suites", "0005_suite_project")]
AFTER = [("suites", "0006_suite_name_unique_per_project")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_same_named_suites_of_several_owners_keep_apart_in_their_project():
    old = migrate(BEFORE)
    User = old.get_model("auth", "User")
    Project = old.get_model("projects", "Project")
    Suite = old.get_model("suites", "Suite")
    default, _ = Project.objects.get_or_create(slug="default", defaults={"name": "Default"})
    elsewhere = Project.objects.create(slug="elsewhere", name="Elsewhere")
    made = []
    for username in ("first", "second", "third"):
        owner = User.objects.create(username=username)
        made.append(Suite.objects.create(name="tutor", owner=owner, project=default).pk)
    fourth = User.objects.create(username="fourth")
    alone = Suite.objects.create(name="tutor", owner=fourth, project=elsewhere).pk
    try:
        new = migrate(AFTER)
        names = dict(
            new.get_model("suites", "Suite").objects.filter(pk__in=[*made, alone]).values_list("pk", "name")
        )
        assert [names[pk] for pk in made] == ["tutor", "tutor (second)", "tutor (third)"]
        assert names[alone] == "tutor"  # another project's suite of that name is no clash
    finally:  # back to the latest schema, for the tests after this one
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
