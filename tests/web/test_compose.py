"""compose.yaml cannot be started here (no container runtime), so it is checked against the code instead:
its services, every command one the code accepts (gunicorn's own parser, Celery's worker
options, Django's management commands), every variable one the settings (or the default endpoint) read,
and the Dockerfile on the Python the project runs on. Renaming a setting's variable or a command fails it."""

from __future__ import annotations

import importlib
import re

import pytest
import yaml
from django.conf import settings

from engine.clients import default_endpoint_from_env
from runs.management.commands.evalserve import SYNC_TIMEOUT, web_command
from tests.conftest import ROOT

COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES = COMPOSE["services"]
# Variables the settings module reads, found in its source (env_int("X"), os.environ.get("X"), ...).
READ = set(re.findall(r"""(?:env_\w+|os\.environ\.get|os\.environ\[)\(?\s*["']([A-Z][A-Z0-9_]*)["']""",
                      (ROOT / "evalsite" / "settings.py").read_text()))  # fmt: skip
# The default endpoint's key is read by the engine, by the name its config holds.
READ.add(default_endpoint_from_env().api_key_env)


def test_the_services_of_the_layout_are_there():
    assert {"postgres", "redis", "migrate", "web", "worker"} <= set(SERVICES)
    assert SERVICES["postgres"]["image"].startswith("postgres:")
    assert SERVICES["redis"]["image"].startswith("redis:")
    assert SERVICES["worker"]["deploy"]["replicas"] >= 2
    for name in ("web", "worker"):
        after = SERVICES[name]["depends_on"]
        assert after["migrate"]["condition"] == "service_completed_successfully"


@pytest.mark.parametrize("service", ["migrate", "web", "worker"])
def test_every_variable_set_is_one_the_code_reads(service):
    env = SERVICES[service]["environment"]
    assert set(env) <= READ, f"{service} sets variables nothing reads: {sorted(set(env) - READ)}"
    assert {"SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "ALLOWED_HOSTS"} <= set(env)
    assert env["DATABASE_URL"].startswith("postgres://") and "@postgres:5432/" in env["DATABASE_URL"]
    assert env["CELERY_BROKER_URL"].startswith("redis://redis:")


def gunicorn_config(arguments: list[str]):
    """gunicorn's own reading of a command line's options (it exits on one it does not know), and the app."""
    from gunicorn.config import Config

    config = Config()
    parsed = config.parser().parse_args(arguments)
    for key, value in vars(parsed).items():
        if value is not None and key in config.settings:
            config.set(key, value)
    return config, parsed


def test_the_web_command_is_gunicorn_serving_our_wsgi_app():
    command = SERVICES["web"]["command"]
    assert command[0] == "gunicorn"
    config, parsed = gunicorn_config(command[1:])
    assert config.worker_class_str == "sync" and config.workers > 1
    assert config.timeout >= SYNC_TIMEOUT  # a sync worker past it is killed mid-request
    (app,) = parsed.args
    module, attribute = app.split(":")
    assert callable(getattr(importlib.import_module(module), attribute))


@pytest.mark.parametrize(("threads", "worker_class"), [(1, "sync"), (8, "gthread")])
def test_make_runs_web_command_is_one_gunicorn_reads(threads, worker_class):
    command = web_command("127.0.0.1:8000", 5, threads)
    config, parsed = gunicorn_config(command[3:])  # after `python -m gunicorn`
    assert command[1:3] == ["-m", "gunicorn"] and parsed.args == ["evalsite.wsgi:application"]
    assert (config.worker_class_str, config.workers, config.threads) == (worker_class, 5, threads)
    assert config.timeout >= (SYNC_TIMEOUT if threads == 1 else 0)
    assert config.control_socket == str(settings.VAR_DIR / "gunicorn.ctl")  # not shared with another checkout


def test_the_worker_command_is_a_celery_worker_of_our_app():
    from celery.bin.worker import worker

    command = SERVICES["worker"]["command"]
    assert command[:4] == ["celery", "-A", "evalsite", "worker"]
    assert importlib.import_module(command[2]).celery_app.main == "evalsite"
    known = {option for param in worker.params for option in param.opts}
    given = [part for part in command[4:] if part.startswith("-")]
    assert set(given) <= known, sorted(set(given) - known)
    assert command[command.index("--pool") + 1] == "threads"
    assert "%h" in command[command.index("--hostname") + 1]  # a name of its own per replica


def test_the_migrate_step_is_a_management_command():
    from django.core.management import get_commands

    command = SERVICES["migrate"]["command"]
    assert command[:2] == ["python", "manage.py"] and command[2] in get_commands()


def test_the_image_is_built_on_the_python_we_run_and_collects_static_files():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^FROM python:3\.11", dockerfile, re.MULTILINE)
    assert "pip install" in dockerfile and "collectstatic" in dockerfile
    for name in re.findall(r"\b([A-Z][A-Z0-9_]+)=", dockerfile):
        assert name in READ | {"PYTHONUNBUFFERED", "DJANGO_SETTINGS_MODULE"}, name


def test_the_deploy_guide_names_every_variable_a_deployer_must_set():
    guide = (ROOT / "docs" / "deploy.md").read_text()
    required = set(re.findall(r"\$\{([A-Z_]+):\?", (ROOT / "compose.yaml").read_text()))
    example = (ROOT / "deploy.env.example").read_text()
    for name in required:
        assert f"`{name}`" in guide or name in example, name
        assert f"{name}=" in example, name
