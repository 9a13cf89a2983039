"""Data made before projects existed moves into the default project, and every user joins it."""

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

BEFORE = [("runs", "0023_delete_endpoint"), ("suites", "0004_safe_file_names"), ("projects", "0001_initial")]
AFTER = [("runs", "0024_run_project")]


def migrate(targets):
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@pytest.mark.django_db(transaction=True)
def test_suites_runs_and_users_move_into_the_default_project():
    old = migrate(BEFORE)
    User = old.get_model("auth", "User")
    chief = User.objects.create(username="chief", is_superuser=True)
    writer = User.objects.create(username="writer")
    suites = {}
    for user in (chief, writer):
        suite = old.get_model("suites", "Suite").objects.create(name="s", owner_id=user.pk)
        version = old.get_model("suites", "SuiteVersion").objects.create(
            suite=suite, number=1, source="", sha256="x"
        )
        old.get_model("runs", "Run").objects.create(suite_version=version, created_by=user, model="mock")
        suites[user.username] = suite.pk
    try:
        new = migrate(AFTER)
        project = new.get_model("projects", "Project").objects.get(slug="default")
        roles = dict(
            new.get_model("projects", "Membership")
            .objects.filter(project=project)
            .values_list("user__username", "role")
        )
        assert roles == {"chief": "admin", "writer": "editor"}
        assert set(new.get_model("suites", "Suite").objects.values_list("project_id", flat=True)) == {
            project.pk
        }
        runs = new.get_model("runs", "Run").objects.filter(suite_version__suite_id__in=suites.values())
        assert list(runs.values_list("project_id", flat=True)) == [project.pk, project.pk]
    finally:  # back to the latest schema, for the tests after this one
        migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
