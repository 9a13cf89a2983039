"""evalsite settings, driven by environment variables.

Defaults are the embedded, no-server setup of `make run`: SQLite in WAL mode and Celery's filesystem broker
under ./var. Production sets DATABASE_URL=postgres://... and CELERY_BROKER_URL=redis://..., a SECRET_KEY and
DEBUG=0.
"""

import hashlib
import math
import os
import secrets
from datetime import timedelta
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from evalsite import oidc, terminal

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("EVALSITE_VAR_DIR", BASE_DIR / "var"))
# A terminal command only reads what is there (evalsite/terminal.py): the database if one was set up.
TERMINAL = terminal.active
if not TERMINAL:
    VAR_DIR.mkdir(parents=True, exist_ok=True)


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value in (None, ""):
        return default
    try:
        return int(value)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={value!r}: expected a whole number") from None


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    """A number from the environment; one that is not a finite number (or is below `minimum`) is refused
    with the variable's name, not a traceback."""
    value = os.environ.get(name)
    if value in (None, ""):
        return default
    try:
        number = float(value)
    except ValueError:
        number = math.nan
    if not math.isfinite(number):
        raise ImproperlyConfigured(f"{name}={value!r}: expected a number") from None
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name}={value!r}: expected a number of at least {minimum:g}")
    return number


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    return default if value is None else [item.strip() for item in value.split(",") if item.strip()]


def source_digest(*modules: str) -> str:
    """A short digest of these modules' source (a module's file, or every file of a package): it changes
    with the code that wrote what a cache keeps."""
    digest = hashlib.blake2s(digest_size=6)
    for module in modules:
        path = BASE_DIR / module
        files = [path.with_suffix(".py")] if path.with_suffix(".py").is_file() else sorted(path.rglob("*.py"))
        if not files:
            raise ImproperlyConfigured(f"source_digest: no module or package {module}")
        for file in files:
            digest.update(file.read_bytes())
    return digest.hexdigest()


DEBUG = env_bool("DEBUG", False)
SECRET_KEY = os.environ.get("SECRET_KEY", "")
if not SECRET_KEY and TERMINAL:
    # Nothing the terminal commands do is signed; a throwaway key keeps Django content.
    SECRET_KEY = secrets.token_urlsafe(50)
elif not SECRET_KEY:
    if not (DEBUG or env_bool("EVALSITE_DEV", False)):
        raise ImproperlyConfigured("Set SECRET_KEY (or DEBUG=1 / EVALSITE_DEV=1 for a local setup).")
    # A per-checkout key for local use: stable across restarts, never shared.
    key_file = VAR_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    SECRET_KEY = key_file.read_text().strip()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django.contrib.humanize",
    "django_htmx",
    "template_partials",
    "axes",  # login throttling
    "csp",  # the Content-Security-Policy header
    "ninja",  # serves Swagger UI's assets from our static files, not a CDN (works offline)
    "projects",
    "endpoints",
    "suites",
    "runs",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "csp.middleware.CSPMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "evalsite.middleware.RefuseNulCharacters",
    "evalsite.middleware.DatabaseUnavailable",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # After the middleware that only reads headers, so its refusal is a page like any other; before every
    # view, and so before anything reads the body (CSRF's check included, which runs with the view).
    "evalsite.middleware.LimitRequestBody",
    # Last, as django-axes asks: it turns a locked-out sign-in into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "evalsite.urls"
WSGI_APPLICATION = "evalsite.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "projects.context_processors.projects",
            ],
        },
    },
]

DATABASE_URL = os.environ.get("DATABASE_URL", f"sqlite:///{VAR_DIR / 'evalsite.sqlite3'}")
# Persistent connections: a worker runs thousands of short tasks, and a new PostgreSQL connection per task
# costs more than the task's own queries.
DATABASES = {
    "default": dj_database_url.parse(
        DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 300), conn_health_checks=True
    )
}
# On PostgreSQL every process draws its connections from a pool (Django's, psycopg_pool underneath). A worker
# thread holds one only while it reads or writes, not while its conversation waits on the model, so a few
# serve a process's many threads, where a connection per thread would run PostgreSQL out of them (its
# max_connections) with a couple of busy workers. A process opens at most
# EVALSITE_DB_POOL_MAX (and never more than its threads need); sizing is in the README (Production).
# A thread that finds none free waits up to EVALSITE_DB_POOL_TIMEOUT seconds for one: a process's threads
# rarely outnumber its pool, so a wait that long means the server is away (restarting, unreachable), and
# then a page answers 503 at once (evalsite.middleware) and a worker waits the outage out (runs.outage).
# EVALSITE_DB_POOL_MAX=0 turns the pool off: each thread keeps its own connection for DB_CONN_MAX_AGE.
EVALSITE_DB_POOL_MAX = env_int("EVALSITE_DB_POOL_MAX", 20)
EVALSITE_DB_POOL_TIMEOUT = env_float("EVALSITE_DB_POOL_TIMEOUT", 1.5)
# A server that does not even refuse the connection (a host gone from the network) is given up on after
# this long: the least libpq accepts.
EVALSITE_DB_CONNECT_TIMEOUT = env_int("EVALSITE_DB_CONNECT_TIMEOUT", 2)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", EVALSITE_DB_CONNECT_TIMEOUT)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and EVALSITE_DB_POOL_MAX > 0:
    DATABASES["default"]["CONN_MAX_AGE"] = 0  # Django's pool requires it: closing hands the connection back
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": min(2, EVALSITE_DB_POOL_MAX),
        "max_size": EVALSITE_DB_POOL_MAX,
        "timeout": EVALSITE_DB_POOL_TIMEOUT,
        # psycopg_pool replaces a broken connection in the background, waiting twice as long before each
        # try, for this long; after a long outage its next try could be as far away. Kept short, the pool
        # gives up on it, and the next thread that asks for a connection has the pool try again at once.
        "reconnect_timeout": 5.0,
    }
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    DATABASES["default"]["ENGINE"] = "evalsite.sqlite"  # Django's, with writer threads queued in-process
    DATABASES["default"]["OPTIONS"] = {
        # WAL lets the web server read while workers write; IMMEDIATE makes every transaction take the write
        # lock up front, so the run dispatcher's count-then-claim cannot interleave between processes.
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 30,
    }
    # The e2e tests run a real worker in another process, so the test database must be a file, not :memory:.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-evalsite.sqlite3")}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
# The most a request body may be, read into memory whole: a suite at its limit as a form, with its escapes. A
# larger body is refused before anything reads it (evalsite.middleware).
EVALSITE_MAX_REQUEST_BYTES = env_int("EVALSITE_MAX_REQUEST_BYTES", 4_000_000)
# What carries attached files may be larger: a suite with one file at its limit, as a multipart upload
# (the files wait in temporary files) or as the API's JSON launch with its escapes.
EVALSITE_MAX_UPLOAD_BYTES = env_int("EVALSITE_MAX_UPLOAD_BYTES", 25_000_000)
# A multipart upload's form fields (the suite's text, not its files) are held in memory: the smaller limit.
DATA_UPLOAD_MAX_MEMORY_SIZE = EVALSITE_MAX_REQUEST_BYTES
# An uploaded file past this waits in a temporary file, not in memory, until its view reads what it needs.
FILE_UPLOAD_MAX_MEMORY_SIZE = 2_500_000

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
# django-axes refuses a sign-in before any password is checked once a username has failed too often from
# one address. Keyed on the pair, so a mistyping colleague behind the same proxy is not locked out with them;
# and once an address has failed too often whatever the usernames (password spraying): evalsite.lockout.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
EVALSITE_LOGIN_FAILURE_LIMIT = env_int("EVALSITE_LOGIN_FAILURE_LIMIT", 5)
# Failed sign-ins from one address, whatever the usernames, each username's counted up to the limit above.
EVALSITE_LOGIN_ADDRESS_FAILURE_LIMIT = env_int("EVALSITE_LOGIN_ADDRESS_FAILURE_LIMIT", 20)
# Wrong API bearer tokens, counted per client address (not per user: a token names no one until it matches).
# A CI job with a revoked token retries a few times; a guesser sends hundreds.
EVALSITE_TOKEN_FAILURE_LIMIT = env_int("EVALSITE_TOKEN_FAILURE_LIMIT", 20)
AXES_FAILURE_LIMIT = "evalsite.lockout.failure_limit"
# One cool-off for sign-ins and tokens: axes deletes every attempt older than the cool-off of whichever
# request it is handling, so a shorter one for tokens would lift sign-in lockouts early.
AXES_COOLOFF_TIME = timedelta(minutes=env_float("EVALSITE_LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_HANDLER = "evalsite.lockout.Handler"  # adds the address's limit
AXES_RESET_ON_SUCCESS = True
AXES_ENABLE_ACCESS_FAILURE_LOG = True  # each failed sign-in, with its time and address, in the admin
AXES_LOCKOUT_CALLABLE = "evalsite.lockout.lockout_response"
AXES_VERBOSE = False  # its start-up line would land in every worker's and command's output
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "suites:list"
LOGOUT_REDIRECT_URL = "login"

# Single sign-on through an OpenID Connect provider (mozilla-django-oidc; docs/deploy.md), off unless a client
# id is set: then the sign-in page offers it beside the password form, which stays for the local admin.
EVALSITE_OIDC_CLIENT_ID = os.environ.get("EVALSITE_OIDC_CLIENT_ID", "").strip()
EVALSITE_OIDC = bool(EVALSITE_OIDC_CLIENT_ID)
EVALSITE_OIDC_NAME = os.environ.get("EVALSITE_OIDC_NAME", "").strip() or "single sign-on"
# A first sign-in joins the default project with this role (viewer, reviewer, editor); empty joins none.
EVALSITE_OIDC_DEFAULT_ROLE = os.environ.get("EVALSITE_OIDC_DEFAULT_ROLE", "").strip().lower()
if EVALSITE_OIDC_DEFAULT_ROLE not in {"", "viewer", "reviewer", "editor"}:
    raise ImproperlyConfigured("EVALSITE_OIDC_DEFAULT_ROLE is one of viewer, reviewer, editor, or empty")
if EVALSITE_OIDC:
    AUTHENTICATION_BACKENDS.append("projects.oidc.Backend")
    OIDC_RP_CLIENT_ID = EVALSITE_OIDC_CLIENT_ID
    OIDC_RP_CLIENT_SECRET = os.environ.get("EVALSITE_OIDC_CLIENT_SECRET", "")
    OIDC_RP_SCOPES = os.environ.get("EVALSITE_OIDC_SCOPES", "openid email profile")
    OIDC_RP_SIGN_ALGO = os.environ.get("EVALSITE_OIDC_SIGN_ALGO", "RS256")
    # The provider's endpoints: each named, or read from the issuer's discovery document (evalsite.oidc).
    OIDC_OP_AUTHORIZATION_ENDPOINT, OIDC_OP_TOKEN_ENDPOINT, OIDC_OP_USER_ENDPOINT, OIDC_OP_JWKS_ENDPOINT = (
        oidc.endpoints(os.environ.get("EVALSITE_OIDC_ISSUER", ""), os.environ)
    )
    OIDC_RP_IDP_SIGN_KEY = os.environ.get("EVALSITE_OIDC_SIGN_KEY") or None  # a PEM key instead of JWKS
    OIDC_USE_NONCE = True
    OIDC_USE_PKCE = True  # the code is worth nothing to whoever intercepts it without the session's verifier
    OIDC_TIMEOUT = 10  # seconds the token and userinfo calls may take
    LOGIN_REDIRECT_URL_FAILURE = "/accounts/login/?sso_failed=1"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT", VAR_DIR / "staticfiles"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}
if DEBUG:
    STORAGES["staticfiles"]["BACKEND"] = "django.contrib.staticfiles.storage.StaticFilesStorage"

# `rows`: the rendered rows of run pages, in each web process's memory, keyed by a digest of what each row
# shows (runs.display.row_key), so nothing is ever invalidated: a changed row has a new key. Rendering a row
# through the template engine is most of a run page's CPU, and the rows of a finished run do not change.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "rows": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "run-rows",
        "OPTIONS": {"MAX_ENTRIES": env_int("EVALSITE_ROW_CACHE_ROWS", 20_000)},
    },
    # A finished run's conversation table as a page shows it (runs.page_cache.table_key), in each web
    # process's memory: the page of a large finished run then reads and renders no row.
    "tables": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "run-tables",
        "OPTIONS": {"MAX_ENTRIES": env_int("EVALSITE_TABLE_CACHE_PAGES", 200)},
    },
    # A finished run's counts, gates and repeated evals' statistics (runs.page_cache): a large run costs a
    # scan of all its conversations per page otherwise (and its gates a parse of its suite). In
    # files under var/, so that every web process of the host reads what one of them worked out, with no
    # server to run. Nothing in it goes stale: each key names the run's state and revision.
    "aggregates": {
        "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
        "LOCATION": str(VAR_DIR / "cache" / "aggregates"),
        "OPTIONS": {"MAX_ENTRIES": 5_000},
        # The files outlive the processes: what other code wrote, in the shapes it had, is never read.
        "KEY_PREFIX": source_digest(
            "engine/results",
            "engine/gates",
            "engine/stats",
            "runs/display",
            "runs/selectors",
            "runs/page_cache",
            "runs/run_page",
            "runs/run_table",
        ),
    },
}

# The response cache (engine.cache, runs.response_cache): model answers every worker shares. In the database by
# default (runs.models.CachedAnswer), in Redis with EVALSITE_CACHE_URL=redis://…, where the `responses` cache
# gives the connection and the key prefix. The broker's Redis is not taken on its own: a broker is usually kept
# with no eviction, where a growing cache would block the queue.
EVALSITE_CACHE_URL = os.environ.get("EVALSITE_CACHE_URL", "").strip()
EVALSITE_CACHE_TTL = env_int("EVALSITE_CACHE_TTL", 30 * 24 * 3600)
EVALSITE_CACHE_MAX_ENTRIES = env_int("EVALSITE_CACHE_MAX_ENTRIES", 100_000)
# The table of Django's DatabaseCache that runs migration 0032 makes and 0037 drops, the answers now in their own.
RESPONSE_CACHE_TABLE = "evalsite_response_cache"
if EVALSITE_CACHE_URL.startswith(("redis://", "rediss://", "unix://")):
    CACHES["responses"] = {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": EVALSITE_CACHE_URL,
        "KEY_PREFIX": "evalsite-responses",
        # A cache that is away costs a miss (engine.cache.GuardedStore), never a worker held on it.
        "OPTIONS": {"socket_connect_timeout": 5, "socket_timeout": 5},
    }

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie, but the admin JS may.
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"  # shared-link tokens must not leak through Referer headers
if env_bool("EVALSITE_HTTPS", False):
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # TLS usually ends at a reverse proxy, which must set (not pass on) X-Forwarded-Proto; without this
    # header Django would see every request as plain HTTP and the redirect below would loop.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("EVALSITE_SSL_REDIRECT", True)
    # Browsers then refuse plain HTTP to this host for that long: start lower while trying HTTPS out.
    SECURE_HSTS_SECONDS = env_int("EVALSITE_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("EVALSITE_HSTS_INCLUDE_SUBDOMAINS", True)
    # Preloading commits the whole registrable domain, not just this site, to HTTPS in every browser for
    # good: a decision for the domain's owner, so it is opt-in and its deploy check is not a warning here.
    SECURE_HSTS_PRELOAD = env_bool("EVALSITE_HSTS_PRELOAD", False)
    if not SECURE_HSTS_PRELOAD:
        SILENCED_SYSTEM_CHECKS = ["security.W021"]

# No inline script anywhere (static/js holds it all), and nothing from other hosts. style-src has no
# 'unsafe-inline' either: the templates carry no style attributes (the progress bar uses width classes).
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "font-src": ["'self'"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "frame-ancestors": ["'none'"],
        "form-action": ["'self'"],
        "base-uri": ["'self'"],
    }
}

# --- Celery -----------------------------------------------------------------------------------------------
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", "filesystem://")
CELERY_BROKER_TRANSPORT_OPTIONS: dict = {}
if CELERY_BROKER_URL.startswith("filesystem://"):
    # Our subclass writes each message atomically, so several worker processes can share the folder.
    CELERY_BROKER_TRANSPORT = "evalsite.broker:Transport"
    if not TERMINAL:
        for sub in ("queue", "processed", "control"):
            (BROKER_DIR / sub).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "control_folder": str(BROKER_DIR / "control"),
        "store_processed": False,
        # The filesystem transport polls. A worker's own messages (the next conversation of a run, sent as
        # one ends) wake its consumer at once (evalsite/broker.py), so polling only finds messages from other
        # processes: polling more often costs idle workers CPU and gains no throughput.
        "polling_interval": env_float("EVALSITE_BROKER_POLL_SECONDS", 0.02),
    }
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # Redelivery after a crash is handled by our own sweeper (runs/worker/recovery.py), so the broker's
        # visibility timeout only needs to exceed the longest conversation. A task that goes on to play the
        # conversations handed over to its thread may outlive it: the message delivered again then finds
        # its conversation finished and does nothing.
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600),
        # A Redis that restarts or vanishes must show up as a connection error, which Celery recovers from,
        # never as a call that waits forever: bounded socket operations, keepalive, and redis-py's and
        # kombu's checks of idle connections (kombu also drops a BRPOP whose reply is overdue).
        "socket_timeout": env_float("EVALSITE_REDIS_SOCKET_TIMEOUT", 15.0),
        "socket_connect_timeout": env_float("EVALSITE_REDIS_SOCKET_TIMEOUT", 15.0),
        "socket_keepalive": True,
        "retry_on_timeout": True,
        "health_check_interval": 10,
    }
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_TASK_IGNORE_RESULT = True
CELERY_RESULT_BACKEND = None
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery is held below 5.7 (pyproject.toml): on a lost broker connection, 5.7.0's consumer closes the
# connection it has just collected; on Redis that close restores the messages of running tasks (acks_late)
# through a transport whose connection is gone, and the worker exits with "Unrecoverable error:
# AttributeError: 'NoneType' object has no attribute 'hostname'" (kombu's _connparams). 5.6 only collects.
# A worker whose broker goes away keeps trying to reconnect, however long it takes (Celery's default gives up
# after some tries and the worker exits); its conversations keep running meanwhile.
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# The conversations a worker is playing when the broker connection drops go on: their state is in the
# database, not the broker, and a duplicate delivery of their message is a no-op (the claim is conditional).
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# Sending the next conversation's task rides out a broker restart of a few seconds (Celery's default gives up
# within a second); a message that still cannot be sent is sent again when a worker (re)connects.
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 10,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 1,
}
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# Celery's Django fixup closes every database connection before and after every task unless this is set; a
# conversation task would then open a new connection each time (a new server process on PostgreSQL). With it,
# the fixup closes a thread's connection only every this-many tasks; runs.worker.tasks checks connections before each
# task as Django does per request (CONN_MAX_AGE, health checks).
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 1000)

# --- evalsite ---------------------------------------------------------------------------------------------
# The default endpoint: any model id without a known "endpoint/" prefix goes here.
OPENAI_BASE_URL = os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1")
# Environment variables a suite run on this server may send to its model as `{{secret:NAME}}` (a gateway's
# key, a tracker token): none unless listed, as a suite anyone with edit rights writes could otherwise send
# the server's own (its database's URL, an endpoint's key) to any endpoint.
EVALSITE_SUITE_SECRETS = env_list("EVALSITE_SUITE_SECRETS", [])
EVALSITE_DEFAULT_PRICE_INPUT = env_float(
    "EVALSITE_DEFAULT_PRICE_INPUT", 0.0, minimum=0
)  # USD per million tokens
EVALSITE_DEFAULT_PRICE_OUTPUT = env_float("EVALSITE_DEFAULT_PRICE_OUTPUT", 0.0, minimum=0)
EVALSITE_DEFAULT_CONCURRENCY = env_int("EVALSITE_DEFAULT_CONCURRENCY", 10)
# The most conversations one run may have in flight (the launch form's limit). Beyond the default, a
# PostgreSQL server with its default max_connections needs the pool (EVALSITE_DB_POOL_MAX): see the README.
EVALSITE_MAX_RUN_CONCURRENCY = env_int("EVALSITE_MAX_RUN_CONCURRENCY", 100)
# What the editor's Save & run calls with the version just saved: runs launches it (suites does not import runs).
EVALSITE_SAVE_AND_RUN = "runs.views.launch.launch_saved"
# How long the launch routes remember an Idempotency-Key: a retry within it returns the first launch's run or matrix.
EVALSITE_IDEMPOTENCY_HOURS = env_float("EVALSITE_IDEMPOTENCY_HOURS", 24)
# Seconds one model request may take before it is abandoned and retried (a timeout is retried like a 503):
# the default endpoint's, and a named endpoint's unless the admin sets its own.
EVALSITE_REQUEST_TIMEOUT = env_float("EVALSITE_REQUEST_TIMEOUT", 60.0)
# The run page (and the CLI) says "N calls waiting on the model for 45 s" of calls out longer than four
# times the run's median latency so far, and never of calls out less than this.
EVALSITE_SLOW_CALL_SECONDS = env_float("EVALSITE_SLOW_CALL_SECONDS", 10.0)
# Code checks (`code:` in a suite) run programs and Python from the suite's files on the workers; a server
# runs them only when its deployer allows it. The CLI always runs them.
EVALSITE_CODE_GRADERS = env_bool("EVALSITE_CODE_GRADERS", False)
# One model call keeps retrying rate limits, 5xx answers, 200s that are no chat completion, timeouts and
# dropped connections for this long (named endpoints can set their own in the admin), each wait at most
# EVALSITE_RETRY_MAX_WAIT.
EVALSITE_RETRY_SECONDS = env_float("EVALSITE_RETRY_SECONDS", 300.0)
EVALSITE_RETRY_MAX_WAIT = env_float("EVALSITE_RETRY_MAX_WAIT", 60.0)
# Deprecated: an optional cap on the number of retries as well; unset, only the time budget counts.
_max_retries = os.environ.get("EVALSITE_MAX_RETRIES", "").strip()
EVALSITE_MAX_RETRIES = int(_max_retries) if _max_retries else None
# How long a worker uses the endpoints it read (admin edits reach running workers within this); 0 reads
# them for every conversation.
EVALSITE_ENDPOINTS_REUSE_SECONDS = env_float("EVALSITE_ENDPOINTS_REUSE_SECONDS", 1.0)
# A running conversation holds a lease that its worker renews; an expired lease means the worker died and
# the sweeper hands the conversation to another worker, which resumes after the last stored turn.
EVALSITE_LEASE_SECONDS = env_float("EVALSITE_LEASE_SECONDS", 60.0)
EVALSITE_SWEEP_SECONDS = env_float("EVALSITE_SWEEP_SECONDS", 10.0)
# Each worker process beats from a thread of its own, whatever its conversations are doing; one whose beat
# has not changed for EVALSITE_WORKER_DEAD_SECONDS (as seen by the other workers' own clocks) is dead, and
# its conversations are taken over then instead of after the lease.
EVALSITE_WORKER_BEAT_SECONDS = env_float("EVALSITE_WORKER_BEAT_SECONDS", 1.0)
EVALSITE_WORKER_DEAD_SECONDS = env_float("EVALSITE_WORKER_DEAD_SECONDS", 5.0)
# On PostgreSQL, workers commit turns without waiting for the WAL flush: the durability SQLite's WAL mode
# with synchronous=NORMAL gives the embedded setup. A killed worker still loses nothing (the database has
# every commit); a crash of the database server itself can lose its last moment of turn writes, which the
# sweeper replays as a resumed conversation. "on" makes workers wait for every flush. The web never relaxes.
EVALSITE_WORKER_SYNCHRONOUS_COMMIT = os.environ.get("EVALSITE_WORKER_SYNCHRONOUS_COMMIT", "off")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    # Every record is redacted before it is written: endpoints may echo API keys in error text.
    "filters": {"redact": {"()": "engine.redact.RedactingFilter"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["redact"]}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "INFO")},
    "loggers": {"httpx2": {"level": "WARNING"}, "httpx": {"level": "WARNING"}},
}
