"""Where a promptfoo / AgentV file's prompts and tests come from: inline, prompt files, tests files (CSV,
YAML, JSON, JSONL, globs) and scenarios."""

from __future__ import annotations

import csv
import io
import json
import re

from ..common import (
    ImportProblem,
    as_number,
    as_text,
    basename,
    find_file,
    glob_files,
    is_glob,
    parse_yaml,
    short,
)
from .messages import chat_or_text, is_chat
from .render import uses_conversation


class Sources:
    """Reading prompts and tests (a part of the reader)."""

    def prompts(self) -> list[tuple[str, object]]:
        """(label, template) for each prompt: a template is text or a chat list of {role, content}."""
        raw = self.data.get("prompts")
        if raw is None:
            self.report.map("(no prompts) → each test's `input` variable is the prompt")
            return [("", None)]
        if isinstance(raw, (str, dict)) and not (isinstance(raw, dict) and ("raw" in raw or "id" in raw)):
            raw = [raw] if isinstance(raw, str) else [{"id": k, "label": v} for k, v in raw.items()]
        if not isinstance(raw, list):
            raw = [raw]
        out: list[tuple[str, object]] = []
        for number, item in enumerate(raw):
            where = f"prompts[{number}]"
            label = ""
            if isinstance(item, dict):
                label = as_text(item.get("label")) or as_text(item.get("id")) or ""
                item = item.get("raw", item.get("id"))
            if is_chat(item):  # a chat prompt written in the config
                out.append((label or (f"prompt-{number + 1}" if len(raw) > 1 else ""), item))
                continue
            text = as_text(item)
            if text is None:
                self.report.lose(f"{where}: {short(item)} — not a prompt evalsite can read, left out")
                continue
            if text.startswith("file://") or _looks_like_file(text):
                found = self.prompt_file(text.removeprefix("file://"), where)
                names = [name for name, _ in found]
                for i, (name, template) in enumerate(found):
                    base = label or name
                    out.append(
                        (base if names.index(name) == i else f"{base}-{i - names.index(name) + 1}", template)
                    )
                continue
            self.threaded |= uses_conversation(text)
            out.append((label or (f"prompt-{number + 1}" if len(raw) > 1 else ""), chat_or_text(text)))
        if not out:
            raise ImportProblem(f"{self.name}: no prompt could be read — {'; '.join(self.report.problems())}")
        if len(out) > 1:
            self.report.map(f"prompts: {len(out)} prompts → an eval per test and prompt")
        else:
            self.report.map("prompts → each test's user message (its variables filled in)")
        return out

    def prompt_file(self, path: str, where: str) -> list[tuple[str, object]]:
        """(file name, template) for each prompt of a prompt file (or of the files a glob matches)."""
        path = path.split(":")[0] if re.search(r"\.(py|js|ts):", path) else path
        if path.lower().endswith((".py", ".js", ".ts", ".mjs", ".cjs")):
            self.report.lose(f"{where}: {path} is a prompt function — evalsite cannot run it; left out")
            return []
        if is_glob(path):  # a glob: every uploaded file it matches, in name order
            names = self.glob(path)
            if not names:
                self.report.lose(f"{where}: no uploaded file matches {path} — upload them and import again")
            return [prompt for name in names for prompt in self.prompt_file(name, where)]
        found = find_file(self.files, path)
        if found is None:
            self.report.need(basename(path))
            self.report.lose(f"{where}: {path} was not uploaded — upload it and import again")
            return []
        self.report.map(f"{where}: {found[0]} → the prompt")
        text = found[1]
        self.threaded |= uses_conversation(text)
        if path.lower().endswith((".json", ".yaml", ".yml", ".jsonl")):
            chat = chat_or_text(text, yaml_too=True)
            if not isinstance(chat, str):
                return [(found[0], chat)]
        if path.lower().endswith(".jsonl"):
            return [(found[0], chat_or_text(line)) for line in text.splitlines() if line.strip()]
        parts = [part.strip("\n") for part in re.split(r"\n-{3,}\n", text) if part.strip()]
        return [(found[0], chat_or_text(part)) for part in parts]

    def tests(self, raw: object, where: str) -> list[tuple[str, dict]]:
        """(where, test) for every test, those in files included."""
        if isinstance(raw, str):
            return self.test_file(raw, where)
        if isinstance(raw, dict):
            raw = [raw]
        if not isinstance(raw, list):
            return []
        out = []
        for number, item in enumerate(raw):
            at = f"{where}[{number}]"
            if isinstance(item, str):
                out += self.test_file(item, at)
            elif isinstance(item, dict) and ("path" in item and len(item) <= 2 and "vars" not in item):
                out += self.test_file(str(item["path"]), at)
            elif isinstance(item, dict):
                out.append((at, item))
            else:
                self.report.lose(f"{at}: {short(item)} — not a test, left out")
        return out

    def scenarios(self, raw: object) -> list[tuple[str, dict]]:
        """promptfoo's scenarios: every config row crossed with every test of the scenario, the row's
        variables under the test's."""
        if raw is None:
            return []
        listed: list[tuple[str, object]] = []
        for number, item in enumerate(raw if isinstance(raw, list) else [raw]):
            if isinstance(item, str):
                listed += [(at, loaded) for at, loaded in self.test_file(item, f"scenarios[{number}]")]
            else:
                listed.append((f"scenarios[{number}]", item))
        out = []
        for where, scenario in listed:
            if not isinstance(scenario, dict):
                continue
            rows = scenario.get("config") if isinstance(scenario.get("config"), list) else [{}]
            tests = self.tests(scenario.get("tests"), f"{where}.tests")
            for row_number, row in enumerate(rows):
                row = row if isinstance(row, dict) else {}
                row_vars = row.get("vars") if isinstance(row.get("vars"), dict) else {}
                label = as_text(row.get("id")) or str(row_number + 1)
                for at, test in tests:
                    own = test.get("vars") if isinstance(test.get("vars"), dict) else {}
                    name = as_text(test.get("id")) or as_text(test.get("description")) or at
                    out.append(
                        (f"{at}[{label}]", {**test, "id": f"{name}-{label}", "vars": {**row_vars, **own}})
                    )
            self.report.map(f"{where}: {len(rows)} config rows × {len(tests)} tests → an eval each")
        return out

    def glob(self, pattern: str) -> list[str]:
        """The files a glob names, from the suite file's folder as promptfoo and AgentV resolve it (`*` within
        one folder, `**` across folders, `?`, `[…]`, `{a,b}`); in a flat upload, by base name. Never the suite
        file itself."""
        return glob_files(self.files, pattern, leave_out={self.name})

    def test_file(self, reference: str, where: str) -> list[tuple[str, dict]]:
        path = reference.removeprefix("file://").strip()
        if path.lower().endswith((".py", ".js", ".ts")) or ":" in basename(path):
            self.report.lose(
                f"{where}: {path} generates tests with code — evalsite cannot run it; not converted"
            )
            return []
        names = self.glob(path) if is_glob(path) else []
        if is_glob(path) and not names:
            self.unmatched.append(path)
            self.report.lose(f"{where}: no uploaded file matches {path} — upload them and import again")
            return []
        suites = [name for name in names if self.agentv and re.search(r"\.eval\.ya?ml$", name, re.IGNORECASE)]
        if suites:  # AgentV refuses them (yaml-parser.ts loadRawCasesFromShorthand)
            raise ImportProblem(
                f"{where}: the glob {path} matches {', '.join(suites)}, an AgentV eval file — `tests` reads raw "
                "case files only, as AgentV does (an eval file is a suite of its own: import it as one)"
            )
        if not names:
            found = find_file(self.files, path)
            if found is None:
                self.report.need(basename(path))
                self.report.lose(f"{where}: tests file {path} was not uploaded — upload it and import again")
                return []
            names = [found[0]]
        out = []
        for name in sorted(names):
            text = self.files[name]
            self.report.map(f"{where}: {name} → tests")
            if name.lower().endswith(".csv"):
                rows = self.csv_tests(name, text)
            elif name.lower().endswith(".jsonl"):
                rows = []
                for line_number, line in enumerate(text.splitlines()):
                    if line.strip():
                        try:
                            rows.append(json.loads(line))
                        except ValueError:
                            self.report.lose(f"{name} line {line_number + 1}: not JSON, left out")
            else:
                rows = parse_yaml(name, text)
            if isinstance(rows, dict) and "tests" in rows:
                rows = rows["tests"]
            rows = rows if isinstance(rows, list) else [rows]
            out += [(f"{name}[{i}]", row) for i, row in enumerate(rows) if isinstance(row, dict)]
        return out

    def csv_tests(self, name: str, text: str) -> list[dict]:
        """promptfoo's CSV tests: a column per variable; `__expected…` columns are assertions written as
        `type: value` (plain text: equals); `__description`, `__threshold`, `__metric`, `__prefix`…"""
        rows = []
        for row in csv.DictReader(io.StringIO(text)):
            test: dict[str, object] = {"vars": {}, "assert": []}
            metric = None
            for column, value in row.items():
                if column is None or value is None:
                    continue
                column = column.strip()
                if column.startswith("__expected"):
                    if value.strip():
                        test["assert"].append(_csv_assertion(value.strip()))
                elif column in ("__description", "description"):
                    test["description"] = value
                elif column == "id":
                    test["id"] = value
                elif column == "__threshold":
                    test["threshold"] = as_number(_number(value))
                elif column == "__metric":
                    metric = value
                elif column.startswith("__metadata"):
                    continue
                elif column.startswith("__"):
                    self.report.group(f"CSV column {column}: not converted", name)
                else:
                    test["vars"][column.removeprefix("vars.")] = value
            if metric:
                for item in test["assert"]:
                    if isinstance(item, dict):
                        item.setdefault("metric", metric)
            rows.append(test)
        return rows

    def load_data(self, reference: str, where: str) -> object:
        path = reference.removeprefix("file://")
        found = find_file(self.files, path)
        if found is None:
            self.report.need(basename(path))
            self.report.lose(f"{where}: {path} was not uploaded — upload it and import again")
            return None
        self.report.map(f"{where}: {found[0]} → read")
        if found[0].lower().endswith(".json"):
            try:
                return json.loads(found[1])
            except ValueError:
                raise ImportProblem(f"{found[0]} is not valid JSON") from None
        return parse_yaml(found[0], found[1])


def _looks_like_file(text: str) -> bool:
    return "\n" not in text and bool(
        re.fullmatch(r"[\w./-]+\.(txt|md|json|yaml|yml|j2|jsonl|prompt)", text.strip())
    )


def _number(text: str) -> object:
    try:
        return float(text)
    except ValueError:
        return None


CSV_TYPES = ("contains", "icontains", "regex", "equals", "starts-with", "is-json", "similar", "llm-rubric",
             "contains-any", "contains-all", "icontains-any", "icontains-all", "python", "javascript", "ends-with",
             "model-graded-closedqa", "factuality", "levenshtein", "rouge-n", "bleu", "cost", "latency")  # fmt: skip


def _csv_assertion(value: str) -> dict:
    """promptfoo's `__expected` cell: `type: value` (`not-` allowed, `grade:` is llm-rubric, `fn:` JavaScript,
    `similar(0.8):` with a threshold), `is-json`, or plain text to equal."""
    found = re.match(r"^(not-)?([a-z-]+)(?:\(([\d.]+)\))?:\s?(.*)$", value, re.DOTALL)
    if value.strip() in ("is-json", "not-is-json"):
        return {"type": value.strip()}
    if found and (found.group(2) in CSV_TYPES or found.group(2) in ("grade", "fn", "eval")):
        kind = {"grade": "llm-rubric", "fn": "javascript", "eval": "javascript"}.get(
            found.group(2), found.group(2)
        )
        item: dict[str, object] = {"type": (found.group(1) or "") + kind, "value": found.group(4)}
        if found.group(3):
            item["threshold"] = float(found.group(3))
        if kind in ("contains-any", "contains-all", "icontains-any", "icontains-all"):
            item["value"] = [part.strip() for part in found.group(4).split(",") if part.strip()]
        return item
    return {"type": "equals", "value": value}
