# evalsite: `make run` serves the dashboard, `make test` runs every test.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
ADDR ?= 127.0.0.1:8000
# PostgreSQL and Redis for the production-path test pass; skipped with a note when unreachable. Each of its
# test processes takes a Redis database of its own: REDIS_URL's and the next (tests/settings.py), which no
# benchmark's default uses.
PG_URL ?= postgres://postgres@127.0.0.1:5432/evalsite
REDIS_URL ?= redis://127.0.0.1:6379/7
# axe-core for the browser tests' accessibility check, from the npm registry at the version its lock file pins.
AXE := tests/e2e/axe

.PHONY: run setup bytecode test test-fast test-pg check format bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[server,dev]'
	touch $@

# Without npm the accessibility test skips and says why; nothing else needs node.
$(AXE)/node_modules/.package-lock.json: $(AXE)/package-lock.json
	@if command -v npm >/dev/null; then npm ci --prefix $(AXE) --no-audit --no-fund --silent; \
	else echo "npm not found: the accessibility browser test will skip"; fi

# An editable install leaves the project's own modules uncompiled, and where PYTHONDONTWRITEBYTECODE is set (as
# in many containers and CI images) every `evalsite` command and worker would compile them again at start-up:
# they are compiled here, as pip compiles an installed package. Only what changed is compiled again.
bytecode: $(VENV)/.installed
	$(PY) -m compileall -q engine evalsite endpoints projects suites runs

setup: bytecode
	EVALSITE_DEV=1 $(PY) manage.py migrate --noinput -v0
	EVALSITE_DEV=1 $(PY) manage.py collectstatic --noinput -v0
	EVALSITE_DEV=1 $(PY) manage.py evalsetup

run: setup
	@echo "evalsite on http://$(ADDR)  (Ctrl-C stops the server and the workers)"
	EVALSITE_DEV=1 $(PY) manage.py evalserve $(ADDR)

# The SQLite pass in two processes, a test file each at a time (module fixtures start once): much of a test's
# time is waiting on a subprocess, a server or a worker. Each process has its own var dir (tests/settings.py).
TEST_PROCESSES ?= 2

test: bytecode $(AXE)/node_modules/.package-lock.json
	$(PY) -m pytest -n $(TEST_PROCESSES) --dist loadfile -m "not alone"
	$(PY) -m pytest -m alone -p no:cacheprovider
	@$(MAKE) --no-print-directory test-pg

# The end-to-end tests and those of database-specific SQL again, on PostgreSQL + Redis, in two processes too
# (most of their time is waiting on workers and servers), then those marked `alone` in one. Each process has
# its own test database (pytest-django) and Redis database (tests/settings.py).
PG_TEST_PROCESSES ?= 2

test-pg: bytecode
	@if $(PY) -m tests.live_services "$(PG_URL)" "$(REDIS_URL)"; then \
		export DATABASE_URL="$(PG_URL)" CELERY_BROKER_URL="$(REDIS_URL)"; \
		$(PY) -m pytest -n $(PG_TEST_PROCESSES) --dist loadfile -m "(e2e or sql) and not alone" -p no:cacheprovider \
		&& $(PY) -m pytest -m "(e2e or sql) and alone" -p no:cacheprovider; \
	else echo "PostgreSQL or Redis not reachable: skipped the PostgreSQL + Redis end-to-end pass"; fi

test-fast: $(VENV)/.installed
	$(PY) -m pytest -m "not e2e and not browser"

check: $(VENV)/.installed
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

format: $(VENV)/.installed
	$(VENV)/bin/ruff check --fix .
	$(VENV)/bin/ruff format .

bench: bytecode
	$(PY) bench/throughput.py

clean:
	rm -rf var/broker var/test var/staticfiles
