"""Matchers on a tool call's arguments (and on its result): what `responses: [{when: ...}]` and the tool
checks (`tool_called: {args: ...}`) compare a value with.

A matcher is a plain value (equal, with numbers compared as numbers), `{regex: ...}`, `{contains: ...}`,
`{any: true}`, a JSON Schema (a mapping with `type`, `enum`, `const`, `pattern`, ... at its top), or, in
checks only, `{llm_judge: criteria}`: a judge decides, through the `judge` callable the check passes in.
Stubs pass none, so a stub never calls out.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .. import patterns

MISSING = object()
SCHEMA_KEYS = frozenset(
    {"type", "enum", "const", "pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
     "minLength", "maxLength", "items", "properties", "required", "anyOf", "oneOf", "allOf", "not", "format",
     "minItems", "maxItems", "additionalProperties", "$schema"}
)  # fmt: skip


def is_schema(matcher: Any) -> bool:
    return isinstance(matcher, dict) and bool(matcher) and set(matcher) <= SCHEMA_KEYS and (
        "type" in matcher or "enum" in matcher or "const" in matcher or "$schema" in matcher
        or "anyOf" in matcher or "oneOf" in matcher or "allOf" in matcher or "not" in matcher
    )  # fmt: skip


# Whether a value meets an `{llm_judge: criteria}` matcher's criteria, and why not: (criteria, value) -> (ok, why).
Judge = Callable[[str, Any], tuple[bool, str]]


def is_judged(matcher: Any) -> bool:
    """Whether a matcher (or one nested in it) is an `{llm_judge}` matcher: checking it calls a judge."""
    if isinstance(matcher, dict):
        return set(matcher) == {"llm_judge"} or any(is_judged(inner) for inner in matcher.values())
    return False


def matches(matcher: Any, value: Any = MISSING, judge: Judge | None = None) -> tuple[bool, str]:
    """Whether `value` (MISSING: the argument was not given) satisfies `matcher`, and why not, in words."""
    if isinstance(matcher, dict) and set(matcher) == {"llm_judge"}:
        if value is MISSING:
            return False, "not given"
        if judge is None:
            return False, "an llm_judge matcher is judged only in checks"
        return judge(str(matcher["llm_judge"]), value)
    if isinstance(matcher, dict) and set(matcher) == {"any"}:
        if value is MISSING:
            return False, "not given"
        return True, ""
    if value is MISSING:
        return False, "not given"
    if isinstance(matcher, dict) and set(matcher) == {"regex"}:
        text = value if isinstance(value, str) else json.dumps(value)
        try:
            found = patterns.search(str(matcher["regex"]), text)
        except patterns.RegexFailure as exc:
            return False, str(exc)
        return (True, "") if found else (False, f"{show(value)} does not match /{matcher['regex']}/")
    if isinstance(matcher, dict) and set(matcher) == {"contains"}:
        text = value if isinstance(value, str) else json.dumps(value)
        wanted = str(matcher["contains"])
        return (
            (True, "")
            if wanted.lower() in text.lower()
            else (False, f"{show(value)} does not contain {wanted!r}")
        )
    if is_schema(matcher):
        import jsonschema  # at the first schema matcher: most suites have none

        errors = sorted(jsonschema.Draft202012Validator(matcher).iter_errors(value), key=lambda e: e.path)
        return (True, "") if not errors else (False, f"{show(value)}: {errors[0].message}")
    if isinstance(matcher, dict) and isinstance(value, dict):
        for key, inner in matcher.items():
            ok, why = matches(inner, value.get(key, MISSING), judge)
            if not ok:
                return False, f"{key}: {why}"
        return True, ""
    if _equal(matcher, value):
        return True, ""
    return False, f"{show(value)} is not {show(matcher)}"


def matches_all(
    matchers: dict[str, Any] | None, arguments: dict | None, judge: Judge | None = None
) -> tuple[bool, str]:
    """Every named argument satisfies its matcher (arguments not named are ignored)."""
    arguments = arguments or {}
    for key, matcher in (matchers or {}).items():
        ok, why = matches(matcher, arguments.get(key, MISSING), judge)
        if not ok:
            return False, f"{key}: {why}"
    return True, ""


def _equal(expected: Any, value: Any) -> bool:
    if isinstance(expected, bool) or isinstance(value, bool):
        return expected is value if isinstance(expected, bool) and isinstance(value, bool) else False
    if isinstance(expected, int | float) and isinstance(value, int | float):
        return float(expected) == float(value)
    if isinstance(expected, str) and not isinstance(value, str) and value is not None:
        return expected == json.dumps(value) or expected == str(value)
    return expected == value


def show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 60 else text[:59] + "…"
