"""Generation settings from the tools that have them: a promptfoo provider's `config`, an AgentV target's own keys,
as evalsite's `model_settings` (or `judge_settings` for the grading provider), every key mapped or said to be
left out in the import report."""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import ValidationError

from ..schema.settings import ModelSettings
from .common import ImportProblem, find_file, non_finite, parse_yaml, short

# The tools' names for each setting (promptfoo writes OpenAI's, some providers camelCase; AgentV targets
# write max_output_tokens).
SETTING_NAMES = {
    "temperature": "temperature",
    "max_tokens": "max_tokens",
    "maxTokens": "max_tokens",
    "max_output_tokens": "max_tokens",
    "maxOutputTokens": "max_tokens",
    "max_completion_tokens": "max_completion_tokens",
    "top_p": "top_p",
    "topP": "top_p",
    "seed": "seed",
    "stop": "stop",
    "response_format": "response_format",
    "reasoning_effort": "reasoning_effort",
    "reasoningEffort": "reasoning_effort",
}
# OpenAI request fields evalsite has no setting of its own for: sent as they are, through extra_body.
BODY_NAMES = ("frequency_penalty", "presence_penalty", "logit_bias", "user", "parallel_tool_calls", "top_k")


def provider_settings(
    config: dict, where: str, report, files: Mapping[str, str] | None = None, into: str = "model_settings"
) -> dict | None:
    """`config`'s generation settings as a ModelSettings mapping (None when it has none); `passthrough` goes
    into extra_body and `headers` into extra_headers. Each value is checked on its own: one evalsite refuses
    is reported and left out, the others are kept. A `file://` value (promptfoo's response_format schema) is
    read from the uploaded files."""
    found: dict = {}
    for key, value in config.items():
        if isinstance(value, str) and value.startswith("file://") and key in SETTING_NAMES:
            value = _from_file(value, files or {}, f"{where}.{key}", report)
            if value is None:
                continue
        if key in SETTING_NAMES:
            taken = _checked(SETTING_NAMES[key], value, f"{where}.{key}", report)
            if taken is not None:
                found[SETTING_NAMES[key]] = taken
                report.map(f"{where}.{key} → {into}.{SETTING_NAMES[key]}")
        elif key in BODY_NAMES:
            if _checked("extra_body", {key: value}, f"{where}.{key}", report) is not None:
                found.setdefault("extra_body", {})[key] = value
                report.map(f"{where}.{key} → {into}.extra_body.{key} (sent as it is)")
        elif key == "passthrough" and isinstance(value, dict):
            if _checked("extra_body", value, f"{where}.passthrough", report) is not None:
                found.setdefault("extra_body", {}).update(value)
                report.map(f"{where}.passthrough → {into}.extra_body")
        elif key == "headers" and isinstance(value, dict):
            for name, text in value.items():  # each on its own: a key in clear is left out, said
                header = {str(name): str(text)}
                if _checked("extra_headers", header, f"{where}.headers.{name}", report) is not None:
                    found.setdefault("extra_headers", {}).update(header)
                    report.map(f"{where}.headers.{name} → {into}.extra_headers.{name}")
    return ModelSettings.model_validate(found).model_dump(exclude_none=True) if found else None


def _checked(name: str, value, where: str, report):
    """The value when ModelSettings takes it as `name`, else None, reported with the reason (a header's
    value is not repeated: it may be a key)."""
    shown = "" if name == "extra_headers" else f" {short(value, 40)}"
    if non_finite(value):
        report.skip(f"{where}:{shown} — not a finite number (NaN or an infinity); not taken")
        return None
    try:
        ModelSettings.model_validate({name: value})
    except ValidationError as exc:
        error = exc.errors()[0]
        report.skip(f"{where}:{shown} — {error['msg'].removeprefix('Value error, ')}; not taken")
        return None
    return value


def _from_file(reference: str, files: Mapping[str, str], where: str, report):
    """A `file://` setting's value: the named file's JSON or YAML, when it was given with the config."""
    found = find_file(files, reference)
    if found is None:
        report.skip(f"{where}: {reference} — the file was not given with the config; not taken")
        return None
    path, text = found
    try:
        return parse_yaml(path, text)  # JSON is YAML
    except ImportProblem as exc:
        report.skip(f"{where}: {path}: {exc}; not taken")
        return None


def providers_settings(listed: list, key: str, report, files: Mapping[str, str] | None = None) -> dict | None:
    """The model under test's settings from a `providers` (or `targets`) list: the first provider that has
    any (evalsite tests one model a run; the others' are reported, not taken)."""
    taken = None
    for number, provider in enumerate(listed):
        if not isinstance(provider, dict):
            continue
        where = f"{key}[{number}]" if len(listed) > 1 else key
        config = provider.get("config")
        config, where = (config, f"{where}.config") if isinstance(config, dict) else (provider, where)
        if taken is not None:
            if any(name in config for name in (*SETTING_NAMES, *BODY_NAMES, "passthrough", "headers")):
                report.skip(f"{where}: settings of another model — evalsite tests one model a run; launch it "
                            "with its own settings (`--set`, the launch form)")  # fmt: skip
            continue
        taken = provider_settings(config, where, report, files)
    return taken


def agentv_target_settings(target: object, files: dict[str, str], report) -> dict | None:
    """The settings of the AgentV target an eval file names (`execution.target: azure_base`), read from the
    project's `.agentv/targets.yaml` when it was given: its own keys (temperature, max_output_tokens, …)."""
    if not isinstance(target, str):
        return None
    path = next((path for path in files if path.rsplit("/", 1)[-1] == "targets.yaml"), None)
    if path is None:
        return None
    text = files[path]  # read through the mapping: the importer counts it as used
    try:
        data = parse_yaml(path, text)
    except ImportProblem as exc:
        report.skip(f"{path}: {exc} — its targets' settings were not read")
        return None
    listed = data.get("targets") if isinstance(data, dict) else None
    for number, entry in enumerate(listed if isinstance(listed, list) else ()):
        if isinstance(entry, dict) and entry.get("name") == target:
            return provider_settings(entry, f"{path} targets[{number}] ({target})", report, files)
    return None
