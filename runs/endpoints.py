"""The endpoint registry runs call models through: the endpoints app's, with pauses every worker shares."""

import math
import time
from pathlib import Path

from django.db import DEFAULT_DB_ALIAS, DatabaseError, connections

from endpoints.models import Endpoint
from endpoints.registry import assemble, default_endpoint, named_endpoints
from engine.clients import EndpointRegistry

from . import pauses

_cached: tuple[tuple, EndpointRegistry] | None = None
_read_at = -math.inf
# Seconds a process may use the registry it last read without reading the rows again; 0 (web processes,
# the CLI) reads them every time. Workers set it at startup (runs.worker.tasks): they ask twice per conversation.
reuse_for = 0.0


def build_registry() -> EndpointRegistry:
    """The registry as the admin and settings define it now (in a worker: as of at most `reuse_for` ago).

    The rows are read, so an endpoint edited in the admin applies to the next conversation (in a worker,
    to those starting a second later), but the registry is rebuilt only when they changed.
    """
    global _cached, _read_at
    cached = _cached
    if cached is not None and time.monotonic() - _read_at < reuse_for:
        return cached[1]
    key = (default_endpoint(), named_endpoints())
    if cached is not None and cached[0] == key:
        _read_at = time.monotonic()
        return cached[1]
    registry = assemble(*key, pauses=pauses.DATABASE_PAUSES)
    _cached = (key, registry)
    _read_at = time.monotonic()
    return registry


def terminal_registry() -> tuple[EndpointRegistry, str | None]:
    """The registry for a terminal command, and why it has no named endpoints (None when it has them).

    The named endpoints are read only from a database that was set up: a missing SQLite file is not
    created (connecting would create it), and an unmigrated or unreachable database is reported, not
    raised. The default endpoint and `mock` need no database.
    """
    database = connections[DEFAULT_DB_ALIAS]
    name = str(database.settings_dict["NAME"])
    try:
        if database.vendor == "sqlite" and name != ":memory:" and not Path(name).is_file():
            return EndpointRegistry(default=default_endpoint()), f"there is no database at {name}"
        if Endpoint._meta.db_table not in database.introspection.table_names():
            return EndpointRegistry(default=default_endpoint()), "the database is not migrated"
        return build_registry(), None
    except DatabaseError as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return EndpointRegistry(default=default_endpoint()), f"the database cannot be read ({first_line})"
    finally:
        database.close()
