"""Generation settings from the tools that have them: a promptfoo provider's `config`, an AgentV target's own keys,
as evalsite's `model_settings` (or `judge_settings` for the grading provider), every key mapped or said to be
left out in the import report."""

from __future__ import annotations

from pydantic import ValidationError

from ..schema.settings import ModelSettings
from .common import ImportProblem, non_finite, parse_yaml, short

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


def provider_settings(config: dict, where: str, report) -> dict | None:
    """`config`'s generation settings as a ModelSettings mapping (None when it has none); `passthrough` goes
    into extra_body and `headers` into extra_headers. A value evalsite refuses is reported, not kept."""
    found: dict = {}
    for key, value in config.items():
        if key in SETTING_NAMES:
            found[SETTING_NAMES[key]] = value
            report.map(f"{where}.{key} → {SETTING_NAMES[key]}")
        elif key in BODY_NAMES:
            found.setdefault("extra_body", {})[key] = value
            report.map(f"{where}.{key} → extra_body.{key} (sent as it is)")
        elif key == "passthrough" and isinstance(value, dict):
            found.setdefault("extra_body", {}).update(value)
            report.map(f"{where}.passthrough → extra_body")
        elif key == "headers" and isinstance(value, dict):
            found["extra_headers"] = {str(name): str(text) for name, text in value.items()}
            report.map(f"{where}.headers → extra_headers")
    if not found:
        return None
    if non_finite(found):
        report.skip(
            f"{where}: a value that is not a finite number (NaN or an infinity); no settings were taken"
        )
        return None
    try:
        return ModelSettings.model_validate(found).model_dump(exclude_none=True)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(map(str, error["loc"]))
        report.skip(f"{where}: {key} {short(found.get(key), 40)} — {error['msg']}; no settings were taken")
        return None


def providers_settings(listed: list, key: str, report) -> dict | None:
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
        taken = provider_settings(config, where, report)
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
            return provider_settings(entry, f"{path} targets[{number}] ({target})", report)
    return None
