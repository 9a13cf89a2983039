"""vibecheck YAML → evalsite.

evalsite reads vibecheck's format natively (conversation trees), so this mostly normalises: `metadata`
becomes the top-level `name` / `model` / `system`, the object form `checks: {or: [...]}` becomes a
one-item list, the legacy object form `checks: {match: ..., min_tokens: ...}`, the typed form
`checks: [{type: string_contains, value: ...}]` and the first format's `conditionals` become check lists,
eval `name`s become ids, `{{var(...)}}` / `{{secret(...)}}` become evalsite's suite variables and secrets.
`metadata.mcp_server` becomes the suite's `tools: [{mcp: {url, headers}}]`, its token read from the
environment. Whatever graded or drove a conversation and cannot be carried (a check evalsite cannot read)
is reported as lost; the rest (threads, unknown keys vibecheck ignores) as left out.
`checks` reads the check forms, `variables` the template references, `mcp` the MCP server.
"""

from __future__ import annotations

import re

from engine.schema import Suite

from ..common import Converted, ImportProblem, Report, Section, as_text, short, unique_id
from .checks import checks_of, is_check, typed_list
from .mcp import mcp_server
from .variables import TEMPLATE_REF, template_refs

# evalsite's own top-level keys pass through (a file may already be half evalsite).
NATIVE_TOP = [key for key in Suite.model_fields if key not in ("metadata", "evals")]
NATIVE_EVAL = ("id", "tags", "prompt", "checks")


def convert(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    if not isinstance(data, dict):
        raise ImportProblem(
            f"{name} is not a vibecheck suite: expected a mapping with `metadata` and `evals`"
        )
    data, declared = template_refs(data, report)
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
        server = mcp_server(metadata["mcp_server"], report)
        if server is not None:
            own = data.get("tools") if isinstance(data.get("tools"), list) else []
            top["tools"] = [*own, server]
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

    order = ["name", "description", "model", "judge", "vars", "system", "tools"]
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
            checks = checks_of(ev["checks"], f"{where}.checks", 0, report)
        elif "conditionals" in ev:
            checks = typed_list(ev["conditionals"], f"{where}.conditionals", report)
        else:
            checks = []
        if not any(is_check(item) for item in checks):
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
