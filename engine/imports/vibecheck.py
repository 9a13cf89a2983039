"""vibecheck YAML → evalsite.

evalsite reads vibecheck's format natively (conversation trees), so this mostly normalises: `metadata`
becomes the top-level `name` / `model` / `system`, the object form `checks: {or: [...]}` becomes a
one-item list, the legacy object form `checks: {match: ..., min_tokens: ...}`, the typed form
`checks: [{type: string_contains, value: ...}]` and the first format's `conditionals` become check lists,
eval `name`s become ids, `{{var(...)}}` / `{{secret(...)}}` become evalsite's suite variables and secrets.
Whatever graded or drove a conversation and cannot be carried (an MCP server's tools, a check evalsite
cannot read) is reported as lost; the rest (threads, unknown keys vibecheck ignores) as left out.
"""

from __future__ import annotations

import re

from pydantic import ValidationError

from engine.schema import CHECK_KEYS, MAX_FOLLOWUP_DEPTH, JudgeSpec, SemanticSpec, Suite

from .. import patterns, suitevars
from .common import Converted, ImportProblem, Report, Section, as_count, as_text, short, unique_id

TEXT_CHECKS = ("match", "not_match", "regex", "contains", "equals")
TOKEN_CHECKS = ("min_tokens", "max_tokens")
# vibecheck's object form took a list of patterns, all of which must hold.
PATTERN_LISTS = ("match", "not_match")
SEMANTIC_KEYS = ("expected", "threshold", "model")
JUDGE_KEYS = ("criteria", "threshold", "model", "temperature")
# evalsite's own top-level keys pass through (a file may already be half evalsite).
NATIVE_TOP = [key for key in Suite.model_fields if key not in ("metadata", "evals")]
NATIVE_EVAL = ("id", "tags", "prompt", "checks")
# vibecheck's `{{var('name')}}` / `{{secret('name')}}` (quotes optional), and the `{{var:name}}` spelling.
TEMPLATE_REF = re.compile(
    r"""\{\{\s*(?P<kind>var|secret|env)\s*(?:\(\s*(?P<q>['"]?)(?P<name>[^'")}]*)(?P=q)\s*\)|:\s*(?P<name2>[^}]*?))\s*\}\}"""
)
# Left as written: the MCP server is lost as a whole; a model given as a variable is the launch's choice.
KEPT_METADATA = ("mcp_server", "model")
# The typed check form (`checks: [{type: ...}]` before vibecheck's glob DSL, and the first format's
# `conditionals`): each type's own keys; `operator` joins them.
TYPED_KEYS = {
    "string_contains": ("value",),
    "matches": ("value",),
    "semantic_similarity": ("expected", "threshold"),
    "llm_judge": ("criteria",),
    "token_length": ("min_tokens", "max_tokens"),
}


def convert(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    if not isinstance(data, dict):
        raise ImportProblem(
            f"{name} is not a vibecheck suite: expected a mapping with `metadata` and `evals`"
        )
    data, declared = _template_refs(data, report)
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
        if key == "model" and TEMPLATE_REF.search(value):
            # The model is looked up on vibecheck's server when the suite runs: in evalsite the model is
            # what a launch chooses anyway, so no variable is needed for it.
            report.skip(
                f"metadata.model: {short(value, 60)} is a vibecheck variable, filled in by vibecheck's server "
                "at run time; its value is not in the file, so the model is the one chosen when a run is "
                "launched (--model, or the run form), or set `model:`"
            )
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
        _mcp_server(metadata["mcp_server"], report)
    for key in metadata:
        if key not in ("name", "model", "system_prompt", "threads", "mcp_server"):
            report.skip(f"metadata.{key}: not a vibecheck field evalsite knows, left out")

    for key in NATIVE_TOP:
        if key in data and key not in top:
            top[key] = data[key]
            report.map(f"{key} → {key} (already evalsite)")
    if declared:
        own = top.get("vars") if isinstance(top.get("vars"), dict) else {}
        top["vars"] = {**{var: None for var in declared}, **own}
        needed = [var for var in declared if top["vars"][var] is None]
        if needed:
            report.map(
                f"vars: {', '.join(needed)} declared with no default: vibecheck's server held "
                f"{'their values' if len(needed) > 1 else 'its value'}, so give "
                f"{'them' if len(needed) > 1 else 'it'} when launching a run (`evalsite run … "
                + " ".join(f"--var {var}=…" for var in needed)
                + "`, or the run form)"
            )
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

    order = ["name", "description", "model", "judge", "vars", "system"]
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
    return header, sections, {}


def _mcp_server(server: object, report: Report) -> None:
    """The model's tools, served over MCP: the evals that use them cannot be played as written."""
    label = (server.get("name") or server.get("url")) if isinstance(server, dict) else server
    report.lose(
        f"metadata.mcp_server: vibecheck gives the model the tools of the MCP server {short(label)}; evalsite "
        "gives models no tools yet (tool calls come in a later release), so these evals run without them "
        "and an answer that needs a tool will fail"
        + (
            " (its authorization_token is not kept)"
            if isinstance(server, dict) and "authorization_token" in server
            else ""
        )
    )


def _convert_evals(raw: object, report: Report) -> list[dict]:
    if not isinstance(raw, list):
        report.lose(f"evals: expected a list of evals, found {short(raw)}; nothing converted")
        return []
    out: list[dict] = []
    taken: set[str] = set()
    for index, ev in enumerate(raw):
        where = f"evals[{index}]"
        if not isinstance(ev, dict):
            report.lose(f"{where}: not a mapping ({short(ev)}), left out")
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
        if prompt is None or not prompt.strip():
            report.lose(f"{where}: no `prompt` text, so nothing to send; left out")
            continue
        converted["prompt"] = prompt
        if "checks" in ev:
            checks = _checks(ev["checks"], f"{where}.checks", 0, report)
        elif "conditionals" in ev:
            checks = _typed_list(ev["conditionals"], f"{where}.conditionals", report)
        else:
            checks = []
        if not any(_is_check(item) for item in checks):
            report.lose(
                f"{where} ({short(prompt, 40)}): no check evalsite can run, so nothing grades it; left out"
            )
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


def _is_typed(item: object) -> bool:
    return isinstance(item, dict) and "type" in item


def _checks(raw: object, where: str, depth: int, report: Report) -> list[dict]:
    """A normalised checks list. `depth` is the follow-up level the list belongs to (0: the eval's)."""
    if isinstance(raw, dict):
        if _is_typed(raw):
            report.map(f"{where}: one typed check given as a mapping → a one-item list")
            return _typed_list([raw], where, report, indexed=False)
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
        return _typed_list([item], where, report, indexed=False)
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
    checks = _checks(item["checks"], f"{where}.checks", depth + 1, report)
    if not any(_is_check(check) for check in checks):
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
        if not any(_is_check(member) for member in members):
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


def _typed_list(raw: object, where: str, report: Report, *, indexed: bool = True) -> list[dict]:
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


def _template_refs(data: dict, report: Report) -> tuple[dict, list[str]]:
    """vibecheck fills `{{var('name')}}` and `{{secret('name')}}` in on its server when a suite runs, from
    values set with `vibe set var|secret`. They become evalsite's `{{var:name}}` (declared in `vars`, its
    value given at launch) and `{{secret:NAME}}` (read from the environment variable NAME where the model
    is called). The data comes back rewritten, with the variables in order of first use. The MCP server is
    left as it is (it is lost as a whole), and so is the model (a launch chooses it)."""
    declared: list[str] = []

    def rewrite(text: str, path: str) -> str:
        def one(found: re.Match) -> str:
            written = found.group("name") if found.group("name") is not None else found.group("name2")
            kind = found.group("kind")
            if kind == "var":
                var = re.sub(r"[^A-Za-z0-9_.\-]", "_", written.strip())
                if not suitevars.VAR_NAME.fullmatch(var):
                    var = f"v_{var}"[:64]
                if var not in declared:
                    declared.append(var)
                report.group(
                    f"{found.group(0)} → {{{{var:{var}}}}}, the suite variable {var!r} (vibecheck's "
                    "`vibe set var`), filled with the value given at launch",
                    path,
                    mapped=True,
                )
                return f"{{{{var:{var}}}}}"
            env = re.sub(r"[^A-Za-z0-9_]", "_", written.strip()).upper() or "SECRET"
            if env[0].isdigit():
                env = f"_{env}"
            if not suitevars.sent(_path_keys(path)):
                report.lose(
                    f"{path}: {found.group(0)} is compared or judged as vibecheck's secret; evalsite sends "
                    "secrets only to the model under test and redacts them from replies before checks read "
                    "them, so this text keeps the reference as written and no longer tests the secret"
                )
                return found.group(0)
            origin = "vibecheck's `vibe set secret`" if kind == "secret" else "an environment variable"
            report.group(
                f"{found.group(0)} → {{{{secret:{env}}}}}, read from the environment variable {env} where the "
                f"run calls the model ({origin}); never stored",
                path,
                mapped=True,
            )
            return f"{{{{secret:{env}}}}}"

        return TEMPLATE_REF.sub(one, text)

    def walk(value: object, path: str) -> object:
        if isinstance(value, str):
            return rewrite(value, path) if "{{" in value else value
        if isinstance(value, dict):
            return {
                key: item if path == "metadata" and key in KEPT_METADATA else walk(item, _join(path, key))
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [walk(item, f"{path}[{index}]") for index, item in enumerate(value)]
        return value

    return walk(data, ""), declared


def _path_keys(path: str) -> tuple:
    """`evals[1].checks[0].match` as the key path suitevars reads: ("evals", 1, "checks", 0, "match")."""
    keys: list[object] = []
    for part in path.split("."):
        name, *indexes = re.split(r"\[(\d+)\]", part)
        keys.append(name)
        keys.extend(int(index) for index in indexes if index)
    return tuple(keys)


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)
