"""vibecheck YAML → evalsite.

evalsite reads vibecheck's format natively (conversation trees), so this mostly normalises: `metadata`
becomes the top-level `name` / `model` / `system`, the object form `checks: {or: [...]}` becomes a
one-item list, the legacy object form `checks: {match: ..., min_tokens: ...}` and legacy `conditionals`
become check lists, eval `name`s become ids. What evalsite has no place for (threads, an MCP server, unknown keys,
`{{var:...}}` references) is reported and left out.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

from engine.schema import CHECK_KEYS, MAX_FOLLOWUP_DEPTH, JudgeSpec, SemanticSpec, Suite

from .common import Converted, ImportProblem, Report, Section, as_count, as_number, as_text, short, unique_id

TEXT_CHECKS = ("match", "not_match", "regex", "contains", "equals")
TOKEN_CHECKS = ("min_tokens", "max_tokens")
SEMANTIC_KEYS = ("expected", "threshold", "model")
JUDGE_KEYS = ("criteria", "threshold", "model", "temperature")
# evalsite's own top-level keys pass through (a file may already be half evalsite).
NATIVE_TOP = [key for key in Suite.model_fields if key not in ("metadata", "evals")]
NATIVE_EVAL = ("id", "tags", "prompt", "checks")
TEMPLATE_REF = re.compile(r"\{\{\s*(var|secret|env)\s*:[^}]*\}\}")


def convert(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    if not isinstance(data, dict):
        raise ImportProblem(
            f"{name} is not a vibecheck suite: expected a mapping with `metadata` and `evals`"
        )
    sections: list[Section] = []
    header = [
        f"Imported from vibecheck {name} by evalsite.",
    ]
    top: dict[str, object] = {}

    metadata = data.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        report.skip("metadata: not a mapping, ignored")
        metadata = {}
    metadata = metadata or {}
    for meta_key, key in (("name", "name"), ("model", "model"), ("system_prompt", "system")):
        if meta_key not in metadata:
            continue
        value = as_text(metadata[meta_key])
        if value is None:
            report.skip(f"metadata.{meta_key}: not text, ignored")
            continue
        own = data.get(key)
        if own is not None and own != value:
            report.skip(f"metadata.{meta_key} ({short(value, 40)!s}) disagrees with `{key}`; kept `{key}`")
            continue
        top[key] = value
        note = ""
        if key == "model":
            note = " (a model reference: a default-endpoint model id, or endpoint/model)"
        report.map(f"metadata.{meta_key} → {key}{note}")
    if "threads" in metadata:
        report.skip(
            f"metadata.threads ({short(metadata['threads'])}): concurrency is chosen when a run is launched"
        )
    if "mcp_server" in metadata:
        server = metadata["mcp_server"]
        label = server.get("name") or server.get("url") if isinstance(server, dict) else server
        report.skip(f"metadata.mcp_server ({short(label)}): evalsite does not connect models to MCP tools")
    for key in metadata:
        if key not in ("name", "model", "system_prompt", "threads", "mcp_server"):
            report.skip(f"metadata.{key}: not a vibecheck field evalsite knows, left out")

    for key in NATIVE_TOP:
        if key in data and key not in top:
            top[key] = data[key]
            report.map(f"{key} → {key} (already evalsite)")
    for key in data:
        if key not in ("metadata", "evals", *NATIVE_TOP):
            report.skip(f"{key}: unknown top-level key, left out")
    if not top.get("name"):
        stem = re.sub(r"\.(ya?ml)$", "", name, flags=re.IGNORECASE) or "imported-suite"
        top["name"] = stem[:200]
        report.map(f"(no metadata.name) → name: {stem} (from the file name)")

    evals = _convert_evals(data.get("evals"), report)
    if not evals:
        raise ImportProblem(
            f"{name} has no eval evalsite can run: {'; '.join(report.problems()) or 'no evals'}"
        )

    order = ["name", "description", "model", "judge", "system"]
    for key in order + [k for k in top if k not in order]:
        if key in top:
            sections.append(Section(key, top[key]))
    sections.append(Section("evals", evals, blank_before=True, item_comments=[[] for _ in evals]))
    followups = sum(_followup_count(ev["checks"]) for ev in evals)
    report.map(
        f"evals: {len(evals)} conversation{'s' if len(evals) != 1 else ''} (prompt + checks"
        + (f", {followups} follow-up prompt{'s' if followups != 1 else ''}" if followups else "")
        + ") → evals, same checks and follow-ups"
    )
    _template_refs(evals, top, report)
    return header, sections, {}


def _convert_evals(raw: object, report: Report) -> list[dict]:
    if not isinstance(raw, list):
        report.skip("evals: not a list")
        return []
    out: list[dict] = []
    taken: set[str] = set()
    for index, ev in enumerate(raw):
        where = f"evals[{index}]"
        if not isinstance(ev, dict):
            report.skip(f"{where}: not a mapping, left out")
            continue
        converted: dict[str, object] = {}
        wanted_id = ev.get("id") if ev.get("id") is not None else ev.get("name")
        if wanted_id is not None:
            text = as_text(wanted_id)
            if text:
                converted["id"] = unique_id(text, taken, report, where)
                if "id" not in ev:
                    report.map(f"{where}.name → id")
        if isinstance(ev.get("tags"), list):
            converted["tags"] = [str(tag) for tag in ev["tags"]]
        prompt = as_text(ev.get("prompt"))
        if prompt is None:
            report.skip(f"{where}: no `prompt`, left out")
            continue
        converted["prompt"] = prompt
        if "checks" in ev:
            checks = _checks(ev["checks"], f"{where}.checks", 0, report)
        elif "conditionals" in ev:
            checks = _conditionals(ev["conditionals"], f"{where}.conditionals", report)
        else:
            checks = []
        if not any(_is_check(item) for item in checks):
            report.skip(f"{where} ({short(prompt, 40)}): no check evalsite can run, left out")
            continue
        converted["checks"] = checks
        for key in ev:
            if key not in (*NATIVE_EVAL, "name", "conditionals"):
                report.skip(f"{where}.{key}: unknown key, left out")
        out.append(converted)
    return out


def _followup_count(items: list[dict]) -> int:
    count = 0
    for item in items:
        if "prompt" in item:
            count += 1 + _followup_count(item["checks"])
        if isinstance(item.get("or"), list):
            count += _followup_count(item["or"])
    return count


def _is_check(item: dict) -> bool:
    return any(key in item for key in CHECK_KEYS)


def _checks(raw: object, where: str, depth: int, report: Report) -> list[dict]:
    """A normalised checks list. `depth` is the follow-up level the list belongs to (0: the eval's)."""
    if isinstance(raw, dict):
        if set(raw) == {"or"}:
            report.map(f"{where}: {{or: [...]}} → a one-item list")
            items = [raw]
        else:
            report.map(
                f"{where}: legacy object form (several checks in one mapping) → one list item per check"
            )
            items = [{key: value} for key, value in raw.items()]
    elif isinstance(raw, list):
        items = raw
    else:
        report.skip(f"{where}: not a list of checks, left out")
        return []
    out: list[dict] = []
    for index, item in enumerate(items):
        out.extend(_item(item, f"{where}[{index}]", depth, report))
    return out


def _item(item: object, where: str, depth: int, report: Report) -> list[dict]:
    if not isinstance(item, dict):
        report.skip(f"{where}: not a check, left out")
        return []
    checks: list[dict] = []
    for key in CHECK_KEYS:
        if key in item:
            converted = _check_value(key, item[key], f"{where}.{key}", depth, report)
            if converted is not None:
                checks.append({key: converted})
    for key in item:
        if key not in (*CHECK_KEYS, "prompt", "checks"):
            report.lose(f"{where}.{key}: unknown check, left out")
    followup = _followup(item, where, depth, report)
    if len(checks) > 1:
        report.map(f"{where}: {len(checks)} checks in one item → {len(checks)} items (all must pass)")
        return checks + ([followup] if followup else [])
    if checks:
        return [{**checks[0], **(followup or {})}]
    return [followup] if followup else []


def _followup(item: dict, where: str, depth: int, report: Report) -> dict | None:
    if "prompt" not in item and "checks" not in item:
        return None
    prompt = as_text(item.get("prompt"))
    if prompt is None or "checks" not in item:
        report.skip(f"{where}: a follow-up needs both `prompt` and `checks`; left out")
        return None
    if depth + 1 > MAX_FOLLOWUP_DEPTH:
        report.skip(
            f"{where}.prompt: follow-ups nest at most {MAX_FOLLOWUP_DEPTH} levels; this level-{depth + 1} "
            "follow-up was left out"
        )
        return None
    checks = _checks(item["checks"], f"{where}.checks", depth + 1, report)
    if not any(_is_check(check) for check in checks):
        report.skip(f"{where}: the follow-up has no check evalsite can run; left out")
        return None
    return {"prompt": prompt, "checks": checks}


def _check_value(key: str, value: object, where: str, depth: int, report: Report) -> object | None:
    if key in TEXT_CHECKS:
        text = as_text(value)
        if text is None:
            report.lose(f"{where}: expected text, left out")
        elif not isinstance(value, str):
            report.map(f"{where}: {value!r} → the text {text!r}")
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
            report.skip(f"{where}: expected a list of options, left out")
            return None
        members: list[dict] = []
        for index, member in enumerate(value):
            members.extend(_item(member, f"{where}[{index}]", depth, report))
        if not any(_is_check(member) for member in members):
            report.skip(f"{where}: no option evalsite can run, left out")
            return None
        return members
    return None


def _spec(value: object, keys: tuple[str, ...], required: str, where: str, report: Report) -> dict | None:
    if not isinstance(value, dict) or not isinstance(value.get(required), str):
        report.skip(f"{where}: needs `{required}` text, left out")
        return None
    spec = {key: value[key] for key in keys if key in value and value[key] is not None}
    for key in value:
        if key not in keys:
            report.skip(f"{where}.{key}: not an option evalsite has, left out")
    model = SemanticSpec if required == "expected" else JudgeSpec
    while True:
        try:
            model.model_validate(spec)
            return spec
        except ValidationError as exc:
            error = exc.errors()[0]
            key = error["loc"][0] if error["loc"] else None
            if key == required or key not in spec:
                report.skip(f"{where}: {error['msg']}, left out")
                return None
            report.skip(
                f"{where}.{key}: {short(spec.pop(key))} — {error['msg'].lower()}; left out (the default applies)"
            )


def _conditionals(raw: object, where: str, report: Report) -> list[dict]:
    """vibecheck's first format: `conditionals: [{type, ..., operator: and|or}]`."""
    if not isinstance(raw, list):
        report.skip(f"{where}: not a list, left out")
        return []
    required: list[dict] = []
    options: list[dict] = []
    for index, cond in enumerate(raw):
        here = f"{where}[{index}]"
        if not isinstance(cond, dict):
            report.skip(f"{here}: not a mapping, left out")
            continue
        kind = cond.get("type")
        checks: list[dict] = []
        if kind == "string_contains" and isinstance(cond.get("value"), str):
            checks = [{"contains": cond["value"]}]
            report.map(f"{here} (string_contains) → contains (case-insensitive)")
        elif kind == "semantic_similarity" and isinstance(cond.get("expected"), str):
            spec = {"expected": cond["expected"]}
            if as_number(cond.get("threshold")) is not None:
                spec["threshold"] = cond["threshold"]
            elif "threshold" in cond:
                report.skip(f"{here}.threshold: {short(cond['threshold'])} is not a number, left out")
            checks = [{"semantic": spec}]
            report.map(f"{here} (semantic_similarity) → semantic")
        elif kind == "llm_judge" and isinstance(cond.get("criteria"), str):
            checks = [{"llm_judge": {"criteria": cond["criteria"]}}]
            report.map(f"{here} (llm_judge) → llm_judge")
        elif kind == "token_length":
            checks = [
                {key: as_count(cond[key])} for key in TOKEN_CHECKS if as_count(cond.get(key)) is not None
            ]
            for key in TOKEN_CHECKS:
                if key in cond and as_count(cond[key]) is None:
                    report.skip(
                        f"{here}.{key}: expected a whole number of tokens, got {short(cond[key])}; left out"
                    )
            report.map(f"{here} (token_length) → {', '.join(k for c in checks for k in c) or 'nothing'}")
        else:
            report.skip(f"{here}: conditional type {short(kind)} is not one evalsite has, left out")
            continue
        (options if cond.get("operator") == "or" else required).extend(checks)
    if options:
        report.map(
            f"{where}: conditionals with operator `or` → one `or` block; those with `and` must all pass"
        )
        required.append({"or": options})
    return required


def _template_refs(evals: list[dict], top: dict, report: Report) -> None:
    found: set[str] = set()

    def walk(value: object) -> None:
        if isinstance(value, str):
            found.update(match.group(0) for match in TEMPLATE_REF.finditer(value))
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(evals)
    walk(top)
    for ref in sorted(found):
        report.skip(f"{ref}: vibecheck fills variables and secrets in; evalsite sends the text as written")
