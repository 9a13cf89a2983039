"""Settings for the test suite: the real settings, in local-development mode, with a throwaway var dir.

Each pytest process gets its own var dir (database file, broker folder), so two test sessions on one
machine never share a database or steal each other's tasks. tests/conftest.py removes it at the end.
"""

import os

os.environ.setdefault("EVALSITE_DEV", "1")
os.environ.setdefault(
    "EVALSITE_VAR_DIR",
    os.path.join(os.path.dirname(os.path.dirname(__file__)), "var", "test", str(os.getpid())),
)

from evalsite.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"  # noqa: F405
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405  (whitenoise warns when it is missing)
