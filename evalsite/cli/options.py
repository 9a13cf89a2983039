"""What `evalsite run` sets over its suite from the command line (engine.options): generation settings
(`--set`), the response cache (`--cache`, `--no-cache`) and the cost limit (`--max-cost`)."""

from __future__ import annotations

import argparse

import yaml
from pydantic import ValidationError

from engine.errors import error_words
from engine.options import RunOptions
from engine.schema.settings import ModelSettings
from engine.source import SuiteError, load_typed_yaml

from .common import UserError

# `--set judge.seed=1` sets judge_settings; a key without a role prefix is the model under test's.
SET_ROLES = {"model": "model_settings", "judge": "judge_settings", "user": "user_settings"}
MAPPING_KEYS = ("extra_body", "extra_headers")


def run_options(args: argparse.Namespace) -> RunOptions:
    """What the command line sets over the suite (engine.options): generation settings, the cache, the cost
    limit. A run here applies them to the suite it loads; a run on a server sends them with the launch."""
    given: dict = {
        "max_cost": getattr(args, "max_cost", None),
        **settings_set(getattr(args, "settings", None)),
    }
    if getattr(args, "cache", None) is not None:  # --cache: every role on, --no-cache: every role off
        given["cache"] = args.cache
    return RunOptions.model_validate(given)


def settings_set(assignments: list[str] | None) -> dict[str, ModelSettings]:
    """--set key=value, each value read as a YAML scalar or flow collection (`0.2`, `7`, `'["\\n"]'`), into
    each role's ModelSettings. `extra_body.KEY=V` and `extra_headers.NAME=V` set one entry of those. A value
    the settings refuse is a UserError naming the --set that gave it."""
    found: dict[str, dict] = {}
    given: dict[str, dict[str, str]] = {}
    for assignment in assignments or ():
        key, sep, text = assignment.partition("=")
        if not sep or not key.strip():
            raise UserError(
                f"--set {assignment}: write KEY=VALUE, e.g. --set temperature=0.2 or judge.seed=1"
            )
        parts = key.strip().split(".")
        role = SET_ROLES.get(parts[0]) if len(parts) > 1 and parts[0] in SET_ROLES else None
        parts = parts[1:] if role else parts
        role = role or "model_settings"
        if not text.strip():
            raise UserError(f"--set {assignment}: no value; leave the --set out to keep the suite's")
        try:
            value = load_typed_yaml(text)
        except SuiteError as exc:
            raise UserError(f"--set {assignment}: {exc.problems[0].message}") from None
        except yaml.YAMLError as exc:
            if text.lstrip().startswith(("[", "{")):  # meant as a list or a mapping, and not one
                problem = getattr(exc, "problem", None) or "not YAML"
                raise UserError(f"--set {assignment}: {problem}; write a list as [a, b]") from None
            value = text  # not YAML: the text as it is
        data = found.setdefault(role, {})
        if len(parts) == 2 and parts[0] in MAPPING_KEYS:
            data.setdefault(parts[0], {})[parts[1]] = value if parts[0] == "extra_body" else str(value)
        elif len(parts) == 1 and parts[0] in ModelSettings.model_fields:
            data[parts[0]] = value
        else:
            keys = ", ".join(ModelSettings.model_fields)
            raise UserError(f"--set {assignment}: no setting `{'.'.join(parts)}`; settings are {keys}")
        given.setdefault(role, {})[parts[0]] = assignment
    out = {}
    for role, data in found.items():
        try:
            out[role] = ModelSettings.model_validate(data)
        except ValidationError as exc:
            error = exc.errors()[0]
            key = str(error["loc"][0]) if error["loc"] else ""
            raise UserError(f"--set {given[role].get(key, key)}: {error_words(error)}") from None
    return out
