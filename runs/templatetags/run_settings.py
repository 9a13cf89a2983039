"""The run header's "Settings" line: the generation settings the run sends, per role."""

from __future__ import annotations

import json

from django import template

from engine.clients.settings import settings_report
from engine.cost import money

from .. import selectors

register = template.Library()

ROLE_NAMES = {"model": "model", "judge": "judge", "user": "simulated user"}


def _shown(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(", ", ": "))


@register.simple_tag
def run_settings(run) -> list[tuple[str, list[str]]]:
    """[(role, ["key=value", …])] for each role with settings: the suite's with the launch's over them (read
    from the suite's stored facts, so no request parses the suite)."""
    facts = selectors.suite_facts(run)
    report = settings_report((facts.settings if facts is not None else None) or {}, run.options) or {}
    return [
        (ROLE_NAMES[role], [f"{key}={_shown(value)}" for key, value in settings.items()])
        for role, settings in report.items()
    ]


@register.filter
def launch_settings(run, key: str) -> str:
    """What the launch set for `key` (model_settings, judge_settings) as the launch form takes it: JSON, or ""
    when it set nothing, so "Run again" launches with the same settings."""
    value = (run.options or {}).get(key)
    return json.dumps(value, ensure_ascii=False) if value else ""


@register.filter
def launch_cache(run) -> bool | None:
    """What the launch set for the response cache, as the launch form's box takes it: on or off for every
    role, or None when it set nothing (or roles apart, which the box cannot say: the suite's then stand)."""
    roles = (run.options or {}).get("cache")
    if not isinstance(roles, dict):
        return None
    turned = {bool(roles.get(role)) for role in ("model", "judge", "simulated_user")}
    return turned.pop() if len(turned) == 1 else None


@register.simple_tag
def run_limits(run) -> list[str]:
    """What the run may spend and what the response cache answers, as launched (over the suite's): "cost limit
    $500.00", "response cache: model, judge"; nothing for a run with neither."""
    facts = selectors.suite_facts(run)
    options = run.options or {}
    shown = []
    limit = options.get("max_cost") or (facts.max_cost if facts is not None else None)
    if limit:
        shown.append(f"cost limit {money(limit)}")
    roles = options.get("cache") or (facts.cache if facts is not None else None)
    if isinstance(roles, dict):
        answered = [CACHE_ROLE_NAMES[role] for role in CACHE_ROLE_NAMES if roles.get(role)]
        if answered:
            shown.append(f"response cache: {', '.join(answered)}")
        elif "cache" in options:
            shown.append("response cache: off")
    return shown


CACHE_ROLE_NAMES = {"model": "model", "judge": "judges", "simulated_user": "simulated user"}
