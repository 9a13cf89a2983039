"""vibecheck's check forms as evalsite checks: the glob DSL's items and follow-ups, the object form, the typed
form (`type: string_contains`, …) and the first format's `conditionals`."""

from __future__ import annotations

from pydantic import ValidationError

from engine.schema import CHECK_KEYS, MAX_FOLLOWUP_DEPTH, JudgeSpec, SemanticSpec

from ... import patterns
from ..common import Report, as_count, as_text, short

TEXT_CHECKS = ("match", "not_match", "regex", "contains", "equals")
TOKEN_CHECKS = ("min_tokens", "max_tokens")
# vibecheck's object form took a list of patterns, all of which must hold.
PATTERN_LISTS = ("match", "not_match")
SEMANTIC_KEYS = ("expected", "threshold", "model")
JUDGE_KEYS = ("criteria", "threshold", "model", "temperature")


# The typed check form (`checks: [{type: ...}]` before vibecheck's glob DSL, and the first format's
# `conditionals`): each type's own keys; `operator` joins them.
TYPED_KEYS = {
    "string_contains": ("value",),
    "matches": ("value",),
    "semantic_similarity": ("expected", "threshold"),
    "llm_judge": ("criteria",),
    "token_length": ("min_tokens", "max_tokens"),
}


def is_check(item: dict) -> bool:
    return any(key in item for key in CHECK_KEYS)


def _is_typed(item: object) -> bool:
    return isinstance(item, dict) and "type" in item


def checks_of(raw: object, where: str, depth: int, report: Report) -> list[dict]:
    """A normalised checks list. `depth` is the follow-up level the list belongs to (0: the eval's)."""
    if isinstance(raw, dict):
        if _is_typed(raw):
            report.map(f"{where}: one typed check given as a mapping → a one-item list")
            return typed_list([raw], where, report, indexed=False)
        if set(raw) == {"or"}:
            report.map(f"{where}: {{or: [...]}} → a one-item list")
            items = [raw]
        else:
            report.map(
                f"{where}: legacy object form (several checks in one mapping) → one list item per check"
            )
            return _item(raw, where, depth, report)
    elif isinstance(raw, list):
        items = raw
    else:
        report.lose(f"{where}: not a list of checks ({short(raw)}), left out")
        return []
    if any(_is_typed(item) for item in items):
        return _mixed(items, where, depth, report)
    out: list[dict] = []
    for index, item in enumerate(items):
        out.extend(_item(item, f"{where}[{index}]", depth, report))
    return out


def _mixed(items: list, where: str, depth: int, report: Report) -> list[dict]:
    """A checks list in the typed form (`- type: string_contains`), possibly beside today's checks."""
    required: list[dict] = []
    options: list[dict] = []
    for index, item in enumerate(items):
        here = f"{where}[{index}]"
        if _is_typed(item):
            _typed_into(item, here, required, options, report)
        else:
            required.extend(_item(item, here, depth, report))
    return _joined(required, options, where, report)


def _item(item: object, where: str, depth: int, report: Report) -> list[dict]:
    if not isinstance(item, dict):
        report.lose(f"{where}: not a check ({short(item)}), left out")
        return []
    if _is_typed(item):
        return typed_list([item], where, report, indexed=False)
    checks: list[dict] = []
    for key in CHECK_KEYS:
        if key not in item:
            continue
        if key in PATTERN_LISTS and isinstance(item[key], list):
            checks.extend(_pattern_list(key, item[key], f"{where}.{key}", depth, report))
            continue
        converted = _check_value(key, item[key], f"{where}.{key}", depth, report)
        if converted is not None:
            checks.append({key: converted})
    for key in item:
        if key not in (*CHECK_KEYS, "prompt", "checks"):
            report.lose(f"{where}.{key}: {short(item[key], 40)} is not a check evalsite has, left out")
    followup = _followup(item, where, depth, report)
    if len(checks) > 1:
        report.map(f"{where}: {len(checks)} checks in one item → {len(checks)} items (all must pass)")
        return checks + ([followup] if followup else [])
    if checks:
        return [{**checks[0], **(followup or {})}]
    return [followup] if followup else []


def _pattern_list(key: str, patterns_: list, where: str, depth: int, report: Report) -> list[dict]:
    """`match: ["*a*", "*b*"]` (vibecheck's object form): every pattern must hold, one check each."""
    checks = []
    for index, pattern in enumerate(patterns_):
        converted = _check_value(key, pattern, f"{where}[{index}]", depth, report)
        if converted is not None:
            checks.append({key: converted})
    if not patterns_:
        report.lose(f"{where}: an empty list of patterns, left out")
    else:
        report.map(f"{where}: a list of {len(patterns_)} patterns → one {key} check each (all must hold)")
    return checks


def _followup(item: dict, where: str, depth: int, report: Report) -> dict | None:
    if "prompt" not in item and "checks" not in item:
        return None
    prompt = as_text(item.get("prompt"))
    if prompt is None or "checks" not in item:
        report.lose(f"{where}: a follow-up needs both `prompt` and `checks`; left out")
        return None
    if depth + 1 > MAX_FOLLOWUP_DEPTH:
        report.lose(
            f"{where}.prompt: follow-ups nest at most {MAX_FOLLOWUP_DEPTH} levels; this level-{depth + 1} "
            "follow-up was left out"
        )
        return None
    checks = checks_of(item["checks"], f"{where}.checks", depth + 1, report)
    if not any(is_check(check) for check in checks):
        report.lose(f"{where}: the follow-up has no check evalsite can run; left out")
        return None
    return {"prompt": prompt, "checks": checks}


def _check_value(key: str, value: object, where: str, depth: int, report: Report) -> object | None:
    if key in TEXT_CHECKS:
        text = as_text(value)
        if text is None:
            report.lose(f"{where}: expected text, found {short(value)}; left out")
        elif not isinstance(value, str):
            report.map(f"{where}: {value!r} → the text {text!r}")
        if text is not None and key == "regex" and not _compiles(text, where, report):
            return None
        return text
    if key in TOKEN_CHECKS:
        tokens = as_count(value)
        if tokens is None:
            report.lose(f"{where}: expected a whole number of tokens, got {short(value)}; left out")
        return tokens
    if key == "semantic":
        return _spec(value, SEMANTIC_KEYS, "expected", where, report)
    if key == "llm_judge":
        if isinstance(value, str):
            report.map(f"{where}: criteria given as text → {{criteria: ...}}")
            return {"criteria": value}
        return _spec(value, JUDGE_KEYS, "criteria", where, report)
    if key == "or":
        if isinstance(value, dict):
            value = [{k: v} for k, v in value.items()]
        if not isinstance(value, list):
            report.lose(f"{where}: expected a list of options, found {short(value)}; left out")
            return None
        members: list[dict] = []
        for index, member in enumerate(value):
            members.extend(_item(member, f"{where}[{index}]", depth, report))
        if not any(is_check(member) for member in members):
            report.lose(f"{where}: no option evalsite can run, left out")
            return None
        return members
    report.lose(f"{where}: a {key} check cannot be imported from vibecheck, left out")
    return None


def _compiles(pattern: str, where: str, report: Report) -> bool:
    try:
        patterns.validate(pattern)
    except patterns.InvalidPattern as exc:
        report.lose(
            f"{where}: {short(pattern, 40)} is not a regular expression evalsite can run ({exc}); left out"
        )
        return False
    return True


def _spec(value: object, keys: tuple[str, ...], required: str, where: str, report: Report) -> dict | None:
    if not isinstance(value, dict) or not isinstance(value.get(required), str):
        report.lose(f"{where}: needs `{required}` text, found {short(value)}; left out")
        return None
    spec = {key: value[key] for key in keys if key in value and value[key] is not None}
    for key in value:
        if key not in keys:
            report.lose(f"{where}.{key}: {short(value[key], 40)} is not an option evalsite has, left out")
    model = SemanticSpec if required == "expected" else JudgeSpec
    while True:
        try:
            model.model_validate(spec)
            return spec
        except ValidationError as exc:
            error = exc.errors()[0]
            key = error["loc"][0] if error["loc"] else None
            if key == required or key not in spec:
                report.lose(f"{where}: {error['msg']}, left out")
                return None
            report.lose(
                f"{where}.{key}: {short(spec.pop(key))} — {error['msg'].lower()}; left out (the default applies)"
            )


def typed_list(raw: object, where: str, report: Report, *, indexed: bool = True) -> list[dict]:
    """Typed checks (`{type, ..., operator: and|or}`), as `conditionals` or a lone typed check."""
    if not isinstance(raw, list):
        report.lose(f"{where}: not a list of checks ({short(raw)}), left out")
        return []
    required: list[dict] = []
    options: list[dict] = []
    for index, cond in enumerate(raw):
        here = f"{where}[{index}]" if indexed else where
        if not isinstance(cond, dict):
            report.lose(f"{here}: not a check ({short(cond)}), left out")
            continue
        _typed_into(cond, here, required, options, report)
    return _joined(required, options, where, report)


def _typed_into(cond: dict, here: str, required: list[dict], options: list[dict], report: Report) -> None:
    """One typed check, added to the checks that must all pass (`operator: and`, the default) or to the
    options of which one must (`operator: or`)."""
    checks = _typed(cond, here, report)
    operator = cond.get("operator")
    if operator not in (None, "and", "or"):
        report.skip(f"{here}.operator: {short(operator)} is neither `and` nor `or`; read as `and`")
    (options if operator == "or" else required).extend(checks)


def _joined(required: list[dict], options: list[dict], where: str, report: Report) -> list[dict]:
    if not options:
        return required
    if len(options) == 1:
        report.map(f"{where}: the one check with operator `or` must pass, as the others")
        return [*required, *options]
    report.map(f"{where}: checks with operator `or` → one `or` check; those with `and` must all pass")
    return [*required, {"or": options}]


def _typed(cond: dict, here: str, report: Report) -> list[dict]:
    kind = cond.get("type")
    own = TYPED_KEYS.get(kind) if isinstance(kind, str) else None
    if own is None:
        report.lose(
            f"{here}: check type {short(kind)} is not one vibecheck had (string_contains, matches, "
            "semantic_similarity, llm_judge, token_length); left out"
        )
        return []
    for key in cond:
        if key not in (*own, "type", "operator"):
            # vibecheck's typed checks ignored keys of other types.
            report.skip(f"{here}.{key}: not a {kind} option, left out")
    if kind in ("string_contains", "matches"):
        text = as_text(cond.get("value"))
        if text is None:
            report.lose(f"{here} ({kind}): needs `value` text, found {short(cond.get('value'))}; left out")
            return []
        if kind == "string_contains":
            report.map(f"{here} (string_contains) → contains (case-insensitive)")
            return [{"contains": text}]
        if not _compiles(text, f"{here}.value", report):
            return []
        report.map(f"{here} (matches) → regex (the value read as a regular expression)")
        return [{"regex": text}]
    if kind == "token_length":
        checks = []
        for key in TOKEN_CHECKS:
            if key in cond and cond[key] is not None:
                count = as_count(cond[key])
                if count is None:
                    report.lose(
                        f"{here}.{key}: expected a whole number of tokens, got {short(cond[key])}; left out"
                    )
                else:
                    checks.append({key: count})
        if not checks and not any(key in cond for key in TOKEN_CHECKS):
            report.skip(f"{here} (token_length): no min_tokens or max_tokens, so it bounds nothing; left out")
        if checks:
            report.map(f"{here} (token_length) → {', '.join(k for c in checks for k in c)}")
        return checks
    fields = {key: cond[key] for key in own if key in cond}
    if kind == "semantic_similarity":
        spec = _spec(fields, SEMANTIC_KEYS, "expected", here, report)
        if spec is None:
            return []
        report.map(f"{here} (semantic_similarity) → semantic")
        return [{"semantic": spec}]
    spec = _spec(fields, JUDGE_KEYS, "criteria", here, report)
    if spec is None:
        return []
    report.map(f"{here} (llm_judge) → llm_judge")
    return [{"llm_judge": spec}]
