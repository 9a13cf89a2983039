"""What counts as the database being away (runs.outage.unavailable), on the real database: a schema that does
not match the code is an error to show, not an outage to wait out. Workers and pages wait out only outages."""

from __future__ import annotations

import pytest
from django.db import DatabaseError, OperationalError, connection

from runs import outage

pytestmark = pytest.mark.django_db


def raised_by(sql: str) -> DatabaseError:
    with pytest.raises(DatabaseError) as caught, connection.cursor() as cursor:
        cursor.execute(sql)
    return caught.value


@pytest.mark.parametrize(
    "sql",
    [
        "SELECT * FROM runs_not_migrated_yet",
        "SELECT no_such_column FROM runs_worker",
        "INSERT INTO runs_worker (name, beat_at, no_such_column) VALUES ('w', '2026-01-01', 1)",
    ],
)
def test_a_database_behind_the_code_is_not_an_outage(sql):
    # SQLite says so with an OperationalError, PostgreSQL with a ProgrammingError: neither is waited out.
    assert not outage.unavailable(raised_by(sql))


def test_a_lost_connection_is_an_outage():
    assert outage.unavailable(OperationalError("server closed the connection unexpectedly"))
    assert outage.unavailable(OperationalError("database is locked"))
