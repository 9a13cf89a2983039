"""agtlantis's cases: `defaults` merged into each as agtlantis's loader merges them, `personas`, and each
case as an eval (multi-turn cases as `simulate`)."""

from __future__ import annotations

import json

from ..common import Report, as_count, as_name, as_text, non_finite, short, unique_id
from .judge import Judge

MAX_TURNS = 10  # agtlantis's default, and evalsite's
EVALSITE_MAX_TURNS = 200


OUTCOMES = ("pass", "fail")


DEFAULT_KEYS = ("maxTurns", "endWhen", "onConditionMet", "onMaxTurnsReached", "tags")
CASE_KEYS = (
    "id",
    "name",
    "description",
    "tags",
    "input",
    "persona",
    "maxTurns",
    "endWhen",
    "onConditionMet",
    "onMaxTurnsReached",
    "expectedOutput",
    "expect",
    "multiTurn",
)
MERGED = ("maxTurns", "endWhen", "onConditionMet", "onMaxTurnsReached")


# --- defaults and personas ---------------------------------------------------------------------------------


def defaults_of(raw: object, report: Report) -> dict:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        report.lose(f"defaults: {short(raw, 40)} — not a mapping (agtlantis refuses the file), left out")
        return {}
    for key in raw:
        if key not in DEFAULT_KEYS:
            report.skip(f"defaults.{key}: not a default agtlantis applies, left out")
    report.map(
        "defaults → applied to each case as agtlantis does (the case's own maxTurns, endWhen, onConditionMet "
        "and onMaxTurnsReached win; tags are the defaults' then the case's)"
    )
    return {key: raw[key] for key in DEFAULT_KEYS if key in raw}


def personas_of(raw: object, report: Report) -> dict[str, object]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        report.lose(f"personas: {short(raw, 40)} — not a mapping of personas, left out")
        return {}
    report.map("personas → each case's `simulate.persona` (the persona's systemPrompt)")
    return {str(key): value for key, value in raw.items()}


def _persona(
    ref: object, personas: dict[str, object], where: str, report: Report
) -> tuple[str, list[str]] | None:
    """The simulated user's persona text and the comment lines naming it, or None (reported)."""
    if isinstance(ref, str):
        if ref not in personas:
            listed = ", ".join(personas) or "none"
            report.lose(
                f"{where}: {ref!r} is not in `personas` ({listed}) — agtlantis refuses the file; the case "
                "has no simulated user"
            )
            return None
        persona, label = personas[ref], f"personas.{ref}"
    else:
        persona, label = ref, where
    if not isinstance(persona, dict):
        report.lose(f"{label}: not a persona mapping (name, systemPrompt) — the case has no simulated user")
        return None
    text = as_text(persona.get("systemPrompt"))
    if not text or not text.strip():
        report.lose(
            f"{label}: no systemPrompt — agtlantis refuses the persona; the case has no simulated user"
        )
        return None
    notes = []
    name = as_text(persona.get("name"))
    if name:
        notes.append(f"persona: {name}" + (f" ({label})" if label != where else ""))
    description = as_text(persona.get("description"))
    if description:
        notes.append(f"persona description: {' '.join(description.split())}")
    for key in persona:
        if key not in ("name", "description", "systemPrompt"):
            report.skip(f"{label}.{key}: not a persona key agtlantis reads, left out")
    return text.strip(), notes


# --- cases ---------------------------------------------------------------------------------------------------


def convert_case(
    case: object,
    where: str,
    defaults: dict,
    personas: dict[str, object],
    judge: Judge,
    taken: set[str],
    report: Report,
) -> tuple[dict, list[str]] | None:
    if not isinstance(case, dict):
        report.lose(f"{where}: {short(case, 40)} — not a test case, left out")
        return None
    raw_input = case.get("input")
    if not isinstance(raw_input, dict):
        report.lose(
            f"{where}.input: {short(raw_input, 40)} — agtlantis needs an object here (the agent's input); "
            "case left out"
        )
        return None
    if non_finite(raw_input):
        report.lose(f"{where}.input: holds NaN or an infinity, which JSON cannot send; case left out")
        return None
    out: dict[str, object] = {}
    notes: list[str] = []
    wanted = as_text(case.get("id")) or as_text(case.get("name")) or f"case-{where[6:-1]}"
    out["id"] = unique_id(wanted, taken, report, where)
    title = as_text(case.get("name")) or as_text(case.get("description"))
    if title:
        notes.append(" ".join(title.split()))
    if as_text(case.get("name")) and as_text(case.get("description")):
        notes.append(" ".join(as_text(case["description"]).split()))

    merged = _merged(case, defaults, where, report)
    tags = [as_text(tag) for tag in merged["tags"] if as_text(tag)]
    if tags:
        out["tags"] = list(dict.fromkeys(tags))
    out["prompt"] = json.dumps(raw_input, ensure_ascii=False)

    simulate = _simulate(case, merged, personas, where, notes, report)
    if simulate is not None:
        out["simulate"] = simulate
    else:
        for key in ("maxTurns", "onConditionMet", "onMaxTurnsReached"):
            if merged.get(key) is not None:
                report.group(
                    f"{key} without a persona or endWhen: agtlantis runs such a case as one turn and ignores it",
                    where,
                )

    expected = case.get("expectedOutput")
    if expected is not None and non_finite(expected):
        report.lose(f"{where}.expectedOutput: holds NaN or an infinity — not given to the judge")
        expected = None
    out["checks"] = [judge.check(expected)]
    if expected is not None:
        report.group("expectedOutput → the judge's reference answer, in each criterion", where, mapped=True)
    _expect(case.get("expect"), where, report)
    for key in case:
        if key not in CASE_KEYS:
            report.skip(f"{where}.{key}: not a key of agtlantis's test case (agtlantis ignores it), left out")
    return out, notes


def _merged(case: dict, defaults: dict, where: str, report: Report) -> dict:
    """The case with the defaults applied, as agtlantis's mergeWithDefaults does. The `multiTurn:` block of
    agtlantis's CLI guide is read as the same keys, the case's flat keys winning."""
    own = dict(case)
    nested = case.get("multiTurn")
    if isinstance(nested, dict):
        for key in MERGED:
            if key in nested and own.get(key) is None:
                own[key] = nested[key]
        for key in nested:
            if key not in MERGED:
                report.skip(f"{where}.multiTurn.{key}: not a multi-turn key agtlantis's YAML has, left out")
        report.map(f"{where}.multiTurn ({', '.join(map(str, nested))}) → read as the case's own keys")
    elif nested is not None:
        report.skip(f"{where}.multiTurn: not a mapping, left out")
    merged = {key: own.get(key) if own.get(key) is not None else defaults.get(key) for key in MERGED}
    tags: list = []
    for source in (defaults.get("tags"), case.get("tags")):
        if isinstance(source, list):
            tags += source
        elif source is not None:
            report.skip(f"{where}.tags: not a list, left out")
    merged["tags"] = tags
    return merged


def _simulate(
    case: dict, merged: dict, personas: dict, where: str, notes: list[str], report: Report
) -> dict | None:
    """`simulate` for agtlantis's multi-turn case (a persona or an endWhen), or None for a one-turn case."""
    if case.get("persona") is None and merged["endWhen"] is None:
        return None
    simulate: dict[str, object] = {}
    if case.get("persona") is not None:
        found = _persona(case["persona"], personas, f"{where}.persona", report)
        if found is not None:
            simulate["persona"] = found[0]
            notes.extend(found[1])
            report.group("persona → simulate.persona (a simulated user)", where, mapped=True)
    max_turns = MAX_TURNS
    if merged["maxTurns"] is not None:
        count = as_count(merged["maxTurns"])
        if not count:
            report.lose(
                f"{where}.maxTurns: {short(merged['maxTurns'], 20)} — not a positive whole number; "
                f"agtlantis refuses it, the default {MAX_TURNS} is used"
            )
        elif count > EVALSITE_MAX_TURNS:
            report.lose(f"{where}.maxTurns: {count} — evalsite runs at most {EVALSITE_MAX_TURNS} turns")
            max_turns = EVALSITE_MAX_TURNS
        else:
            max_turns = count
    simulate["max_turns"] = max_turns
    if merged["endWhen"] is not None:
        condition = _condition(merged["endWhen"], f"{where}.endWhen", report)
        if condition is not None:
            simulate["stop_when"] = condition
    for key, target in (("onConditionMet", "on_condition_met"), ("onMaxTurnsReached", "on_max_turns")):
        value = merged[key]
        if value is None:
            continue
        if value in OUTCOMES:
            simulate[target] = value
        else:
            report.lose(
                f"{where}.{key}: {short(value, 20)} — agtlantis takes pass or fail; its default is used"
            )
    if "persona" not in simulate:
        report.group(
            "no simulated user: the case ends after its first reply (condition met, max turns, or inputs "
            "exhausted — a failure — as in agtlantis)",
            where,
            mapped=True,
        )
    return simulate


def _condition(raw: object, where: str, report: Report) -> dict | None:
    """agtlantis's endWhen → a stop condition: naturalLanguage first, as its loader checks it first."""
    if not isinstance(raw, dict):
        report.lose(
            f"{where}: {short(raw, 40)} — not a condition (field / equals / naturalLanguage), left out"
        )
        return None
    for key in raw:
        if key not in ("field", "equals", "naturalLanguage"):
            report.skip(f"{where}.{key}: not an endWhen key agtlantis reads, left out")
    question = as_text(raw.get("naturalLanguage"))
    if question:
        if raw.get("field") is not None:
            report.skip(f"{where}.field: agtlantis uses naturalLanguage when both are given, so is evalsite")
        report.group(
            "endWhen.naturalLanguage → stop_when.natural_language (the judge answers yes/no)",
            where,
            mapped=True,
        )
        return {"natural_language": {"prompt": question}}
    path = as_name(raw.get("field"))
    if not path:
        report.lose(f"{where}: neither field nor naturalLanguage — agtlantis refuses it; no stop condition")
        return None
    if "equals" in raw and raw["equals"] is not None:
        if non_finite(raw["equals"]):
            report.lose(f"{where}.equals: NaN or an infinity cannot be compared; no stop condition")
            return None
        report.group(
            "endWhen {field, equals} → stop_when.field_equals (on the JSON reply)", where, mapped=True
        )
        return {"field_equals": {"path": path, "value": raw["equals"]}}
    report.group("endWhen {field} → stop_when.field_is_set (on the JSON reply)", where, mapped=True)
    return {"field_is_set": path}


def _expect(raw: object, where: str, report: Report) -> None:
    if raw is None:
        return
    if not isinstance(raw, dict):
        report.skip(f"{where}.expect: not a mapping, left out")
        return
    for key in raw:
        report.skip(
            f"{where}.expect.{key}: {short(raw[key], 20)} — agtlantis reads it but its runner does not apply it "
            "(cases pass on the judge's passThreshold and the ending), so neither does the import"
        )
