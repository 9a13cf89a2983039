"""Settings for the test suite: the real settings, in local-development mode, with a throwaway var dir.

Each pytest process gets its own var dir (database file, broker folder), so two test sessions on one
machine, or two pytest-xdist workers of one session, never share a database or steal each other's tasks; a
pytest-xdist worker on a Redis broker takes a Redis database of its own too.
tests/conftest.py removes it at the end.
"""

import os
from urllib.parse import urlsplit

os.environ.setdefault("EVALSITE_DEV", "1")
_own_var_dir = os.path.join(os.path.dirname(os.path.dirname(__file__)), "var", "test", str(os.getpid()))
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER")
if _xdist_worker and os.environ.get("TESTS_XDIST_WORKER") != _xdist_worker:
    # A pytest-xdist worker inherits the environment of the process that started it, var dir included: it
    # takes a var dir of its own. The processes it starts (Celery workers, servers) inherit this one.
    os.environ["EVALSITE_VAR_DIR"] = _own_var_dir
    os.environ["TESTS_XDIST_WORKER"] = _xdist_worker
    # So does a Redis broker: each worker takes the database its index after the given one (gw0 the given
    # one, gw1 the next), or one process's Celery workers would take the other's tasks and a test's purge
    # would drop them. PostgreSQL needs nothing: pytest-django gives each its own test database.
    _broker = urlsplit(os.environ.get("CELERY_BROKER_URL", ""))
    if _broker.scheme in ("redis", "rediss"):
        _db = int(_broker.path.strip("/") or 0) + int(_xdist_worker.removeprefix("gw"))
        os.environ["CELERY_BROKER_URL"] = _broker._replace(path=f"/{_db}").geturl()
else:
    os.environ.setdefault("EVALSITE_VAR_DIR", _own_var_dir)

from evalsite.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405  (whitenoise warns when it is missing)
