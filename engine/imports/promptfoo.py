"""promptfoo configuration (promptfooconfig.yaml) and today's AgentV eval files, which share its shape
(`prompts`, `providers`, `tests` of `vars` + `assert`, `defaultTest`), → evalsite. One reader serves both;
`convert_agentv` chooses AgentV's meanings where the two differ.

- Each test, for each prompt, is one eval: the prompt rendered with the test's variables (a chat prompt, or
  AgentV's `{{ input }}` holding messages, gives the history; its last user message is sent live).
- Its assertions are named graders of the eval (engine.imports.promptfoo_asserts). promptfoo passes a test
  when every assertion passes, or, with a `threshold`, when their weighted mean reaches it; AgentV when the
  weighted mean reaches its threshold (0.8 unless told otherwise) and no `required` item failed. Both become
  the eval's `pass_rule`.
- promptfoo's multi-turn tests (a prompt using `_conversation`; one conversation per
  `metadata.conversationId`) and AgentV's `mode: conversation` become `turns`: every scripted user message is
  sent, each graded by its own checks.
- `evaluateOptions.repeat`, AgentV's `repeat` / `trials` → `iterations` with the pass rate the tool's
  strategy means (pass_any: any one of the k runs).
- Providers are noted: evalsite tests the suite's `model`.

Plain Python: no Django here.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import itertools
import json
import math
import re

from .common import (
    Converted,
    ImportProblem,
    Report,
    Section,
    as_count,
    as_number,
    as_share,
    as_text,
    basename,
    find_file,
    parse_yaml,
    safe_file_name,
    short,
    unique_id,
)
from .promptfoo_asserts import Assertions, Context
from .promptfoo_render import (
    lookup,
    only_variable,
    render,
    uses_conversation,
    without_conversation_loop,
)

AGENTV_THRESHOLD = 0.8
MAX_EXPANDED = 200  # evals one test may expand to (array variables × prompts)
SUITE_KEYS = {
    "description", "name", "prompts", "providers", "targets", "target", "tests", "defaultTest", "default_test",
    "evaluateOptions", "evaluate_options", "execution", "repeat", "$schema", "version", "tags", "scenarios", "assert",
}  # fmt: skip
NOTED_KEYS = {
    "outputPath", "sharing", "env", "extensions", "writeLatestResults", "nunjucksFilters", "metadata", "workspace",
    "environment", "governance", "plugins", "repositories", "clients", "derivedMetrics", "tracing", "commandLineOptions",
    "budget_usd", "policy",
}  # fmt: skip
TEST_KEYS = {"vars", "assert", "description", "id", "threshold", "options", "metadata", "mode", "turns",
             "aggregation", "on_turn_failure", "input", "criteria", "expected_output", "execution", "repeat",
             "conversation_id", "provider", "providers", "note", "input_files"}  # fmt: skip
CHAT_ROLES = ("system", "user", "assistant", "developer", "tool")


def convert(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    return _Reader(name, data, files, report, agentv=False).run()


def convert_agentv(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    return _Reader(name, data, files, report, agentv=True).run()


class _Reader:
    def __init__(self, name: str, data: dict, files, report: Report, agentv: bool) -> None:
        self.name = name
        self.data = data
        self.files = files
        self.report = report
        self.agentv = agentv
        self.tool = "AgentV" if agentv else "promptfoo"
        self.attached: dict[str, str] = {}
        self.taken: set[str] = set()
        self.asserts = Assertions(files, report, self.attached, agentv, self.render_text)
        self.threshold = AGENTV_THRESHOLD if agentv else None
        self.suite_asserts: list = []  # AgentV's root-level assertions, which a test may skip
        self.threaded = False  # a prompt loops over `_conversation`: the tests are turns of conversations

    # -- the suite ------------------------------------------------------------------------------------------

    def run(self) -> Converted:
        data, report = self.data, self.report
        stem = re.sub(r"\.(ya?ml|json)$", "", basename(self.name), flags=re.IGNORECASE)
        stem = re.sub(r"\.eval$", "", stem, flags=re.IGNORECASE)
        title = as_text(data.get("name")) or as_text(data.get("description")) or stem or "imported-suite"
        header = [f"Imported from {self.tool} {self.name} by evalsite."]
        sections = [Section("name", title[:200])]
        report.map(f"{'name' if as_text(data.get('name')) else 'description or file name'} → name")
        if as_text(data.get("description")):
            sections.append(Section("description", as_text(data["description"])))
            report.map("description → description")
        self.providers()
        for key in data:
            if key in NOTED_KEYS:
                report.skip(
                    f"{key}: {short(data[key], 50)} — {self.tool} run settings, not part of an evalsite suite"
                )
            elif key not in SUITE_KEYS:
                report.skip(f"{key}: {short(data[key], 50)} — not a {self.tool} key evalsite knows")
        iterations, rate = self.iterations()
        default = self.default_test()
        if isinstance(data.get("assert"), list):
            self.suite_asserts = data["assert"]
            report.map(
                "assert (the suite's) → every test's assertions (but those with execution.skip_defaults)"
            )
        prompts = self.prompts()
        tests = self.tests(data.get("tests"), "tests") + self.scenarios(data.get("scenarios"))
        if not tests:
            raise ImportProblem(f"{self.name} has no tests: a {self.tool} file lists them under `tests`")
        evals, notes = self.evals(tests, default, prompts)
        if not evals:
            raise ImportProblem(f"{self.name}: no test could be converted — {'; '.join(report.problems())}")
        sections.append(Section("model", None, comments=[
            f"model: set the model under test ({self.tool} chose it with `providers`)"]))  # fmt: skip
        if iterations > 1:
            sections.append(Section("iterations", iterations))
            sections.append(Section("pass_rate_threshold", rate))
        sections.append(Section("evals", evals, blank_before=True, item_comments=notes))
        report.map(f"tests: {len(evals)} eval{'s' if len(evals) != 1 else ''}")
        return header, sections, self.attached

    def providers(self) -> None:
        for key in ("providers", "targets", "target"):
            if key in self.data:
                self.report.skip(
                    f"{key}: {short(self.data[key], 80)} — {self.tool} providers; evalsite tests the suite's "
                    "`model`: set it in the suite or when launching"
                )

    def iterations(self) -> tuple[int, float]:
        """The repeat count and the pass rate an iterated eval needs, as the tool's strategy means it."""
        options = self.data.get("evaluateOptions", self.data.get("evaluate_options"))
        options = options if isinstance(options, dict) else {}
        execution = self.data.get("execution") if isinstance(self.data.get("execution"), dict) else {}
        for key in options:
            if key != "repeat":
                self.report.skip(
                    f"evaluateOptions.{key}: {short(options[key], 40)} — a run setting, not converted"
                )
        for key in execution:
            if key not in ("trials", "repeat", "threshold"):
                self.report.skip(f"execution.{key}: {short(execution[key], 40)} — not converted")
        if as_share(execution.get("threshold")) is not None and self.agentv:
            self.threshold = float(execution["threshold"])
            self.report.map(f"execution.threshold {self.threshold:g} → every test's pass threshold")
        raw, where = None, ""
        for place, value in (("repeat", self.data.get("repeat")), ("evaluateOptions.repeat", options.get("repeat")),
                             ("execution.trials", execution.get("trials")), ("execution.repeat", execution.get("repeat"))):  # fmt: skip
            if value is not None:
                raw, where = value, place
        if raw is None:
            return 1, 0.5
        count = as_count(raw) if not isinstance(raw, dict) else as_count(raw.get("count"))
        strategy = (as_text(raw.get("strategy")) if isinstance(raw, dict) else None) or (
            "pass_any" if self.agentv else "each"
        )
        if not count or count < 1:
            self.report.skip(f"{where}: {short(raw)} — not a count, not converted")
            return 1, 0.5
        count = min(count, 1000)
        if strategy in ("pass_any", "pass_at_k", "pass@k", "any"):
            rate = math.floor(1_000_000 / count) / 1_000_000
            self.report.map(f"{where}: {count} runs, {strategy} → iterations: {count}, pass_rate_threshold: "
                            f"{rate:g} (an eval passes when any one of its runs passes)")  # fmt: skip
        elif strategy in ("pass_all", "all", "each"):
            rate = 1.0
            why = (
                "every run must pass"
                if strategy != "each"
                else "promptfoo reports every repeat as its own result"
            )
            self.report.map(f"{where}: {count} runs → iterations: {count}, pass_rate_threshold: 1 ({why})")
        else:
            rate = self.threshold or 0.5
            self.report.skip(f"{where}: strategy {strategy} (the mean score of the runs) → iterations: {count}, "
                             f"pass_rate_threshold: {rate:g}: evalsite's iterated eval passes on its share of passing runs")  # fmt: skip
        for key in raw if isinstance(raw, dict) else ():
            if key not in ("count", "strategy"):
                self.report.skip(f"{where}.{key}: {short(raw[key], 40)} — not converted")
        return count, rate

    # -- defaultTest ----------------------------------------------------------------------------------------

    def default_test(self) -> dict:
        key = "defaultTest" if "defaultTest" in self.data else "default_test"
        raw = self.data.get(key)
        if isinstance(raw, str):
            loaded = self.load_data(raw, key)
            raw = loaded if isinstance(loaded, dict) else None
        if raw is None:
            return {}
        if not isinstance(raw, dict):
            self.report.skip(f"{key}: {short(raw)} — not a mapping, ignored")
            return {}
        self.report.map(f"{key} → merged into every test (variables, assertions, options, threshold)")
        return raw

    # -- prompts --------------------------------------------------------------------------------------------

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
            text = as_text(item)
            if text is None:
                self.report.lose(f"{where}: {short(item)} — not a prompt evalsite can read, left out")
                continue
            if text.startswith("file://") or _looks_like_file(text):
                found = self.prompt_file(text.removeprefix("file://"), where)
                base = label or basename(text)
                out += [(base if i == 0 else f"{base}-{i + 1}", t) for i, t in enumerate(found)]
                continue
            self.threaded |= uses_conversation(text)
            out.append((label or (f"prompt-{number + 1}" if len(raw) > 1 else ""), _chat_or_text(text)))
        if not out:
            raise ImportProblem(f"{self.name}: no prompt could be read — {'; '.join(self.report.problems())}")
        if len(out) > 1:
            self.report.map(f"prompts: {len(out)} prompts → an eval per test and prompt")
        else:
            self.report.map("prompts → each test's user message (its variables filled in)")
        return out

    def prompt_file(self, path: str, where: str) -> list[object]:
        path = path.split(":")[0] if re.search(r"\.(py|js|ts):", path) else path
        if path.lower().endswith((".py", ".js", ".ts", ".mjs", ".cjs")):
            self.report.lose(f"{where}: {path} is a prompt function — evalsite cannot run it; left out")
            return []
        found = find_file(self.files, path)
        if found is None:
            self.report.need(basename(path))
            self.report.lose(f"{where}: {path} was not uploaded — upload it and import again")
            return []
        self.report.map(f"{where}: {found[0]} → the prompt")
        text = found[1]
        self.threaded |= uses_conversation(text)
        if path.lower().endswith((".json", ".yaml", ".yml", ".jsonl")):
            chat = _chat_or_text(text, yaml_too=True)
            if not isinstance(chat, str):
                return [chat]
        if path.lower().endswith(".jsonl"):
            return [_chat_or_text(line) for line in text.splitlines() if line.strip()]
        return [_chat_or_text(part.strip("\n")) for part in re.split(r"\n-{3,}\n", text) if part.strip()]

    # -- tests ----------------------------------------------------------------------------------------------

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

    def test_file(self, reference: str, where: str) -> list[tuple[str, dict]]:
        path = reference.removeprefix("file://").strip()
        if path.lower().endswith((".py", ".js", ".ts")) or ":" in basename(path):
            self.report.lose(
                f"{where}: {path} generates tests with code — evalsite cannot run it; not converted"
            )
            return []
        names = [n for n in self.files if fnmatch.fnmatch(n, basename(path))] if "*" in path else []
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

    # -- evals ----------------------------------------------------------------------------------------------

    def merged(self, test: dict, default: dict) -> dict:
        """A test with defaultTest under it: variables and options merged, assertions appended."""
        out = dict(test)
        default_vars = default.get("vars") if isinstance(default.get("vars"), dict) else {}
        own_vars = test.get("vars") if isinstance(test.get("vars"), dict) else {}
        if "vars" in test and not isinstance(test.get("vars"), dict):
            self.report.skip(f"vars {short(test['vars'])}: not a mapping, ignored")
        if self.agentv and "input" in test and "input" not in own_vars:
            own_vars = {**own_vars, "input": test["input"]}
        files = test.get("input_files")
        if self.agentv and isinstance(files, list) and files:
            # AgentV's shorthand: the files, then the text, in one user message (PROMPT.md is the text)
            prompt_file = next((f for f in files if basename(str(f)) == "PROMPT.md"), None)
            text = own_vars.get("input", test.get("input"))
            if not isinstance(text, str) and prompt_file is not None:
                found = find_file(self.files, str(prompt_file))
                text = found[1] if found else None
                files = [f for f in files if f is not prompt_file]
            parts = [{"type": "file", "value": str(f)} for f in files]
            parts += [{"type": "text", "value": text}] if isinstance(text, str) else []
            own_vars = {**own_vars, "input": [{"role": "user", "content": parts}]}
        if self.agentv and "expected_output" in test and "expected_output" not in own_vars:
            own_vars = {**own_vars, "expected_output": test["expected_output"]}
        out["vars"] = {**default_vars, **own_vars}
        default_asserts = default.get("assert") if isinstance(default.get("assert"), list) else []
        own = test.get("assert") if isinstance(test.get("assert"), list) else []
        if test.get("assert") is not None and not isinstance(test.get("assert"), list):
            self.report.lose(f"assert {short(test['assert'], 40)}: not a list of assertions, not converted")
        if self.agentv and not own and as_text(test.get("criteria")):
            own = [as_text(test["criteria"])]  # AgentV reads a test's criteria as its one rubric
        execution = test.get("execution") if isinstance(test.get("execution"), dict) else {}
        suite_asserts = [] if execution.get("skip_defaults") is True else self.suite_asserts
        out["assert"] = [*default_asserts, *suite_asserts, *own]
        if self.agentv and "threshold" not in test and as_share(execution.get("threshold")) is not None:
            out["threshold"] = execution["threshold"]  # AgentV: a test's own pass threshold
        options = default.get("options") if isinstance(default.get("options"), dict) else {}
        if isinstance(test.get("options"), dict):
            options = {**options, **test["options"]}
        out["options"] = options
        if "threshold" not in out and "threshold" in default:
            out["threshold"] = default["threshold"]
        return out

    def evals(
        self, tests: list[tuple[str, dict]], default: dict, prompts
    ) -> tuple[list[dict], list[list[str]]]:
        evals: list[dict] = []
        notes: list[list[str]] = []
        if self.threaded:
            return self.conversation_threads(tests, default, prompts)
        for where, raw in tests:
            test = self.merged(raw, default)
            self.test_keys(raw, where)
            if test.get("mode") == "conversation" or isinstance(test.get("turns"), list):
                made = self.conversation_mode(test, where)
                if made is not None:
                    evals.append(made)
                    notes.append(self.notes(test))
                continue
            for variables, suffix in self.expanded(test["vars"], where):
                for label, template in prompts:
                    made = self.single(test, variables, template, where)
                    if made is None:
                        continue
                    wanted = (
                        self.test_id(test, where)
                        + suffix
                        + (f"-{label}" if label and len(prompts) > 1 else "")
                    )
                    made = {"id": unique_id(_slug(wanted), self.taken, self.report, where), **made}
                    evals.append(made)
                    notes.append(self.notes(test))
        return evals, notes

    def test_keys(self, test: dict, where: str) -> None:
        for key in test:
            if key not in TEST_KEYS:
                self.report.group(f"test key `{key}`: not converted", where)
        options = test.get("options") if isinstance(test.get("options"), dict) else {}
        for key in options:
            if key in ("transform", "postprocess"):
                self.report.lose(f"{where}.options.{key}: the output is transformed before grading — evalsite "
                                 "grades the reply as it is; the test's assertions may grade differently")  # fmt: skip
            elif key not in ("rubricPrompt", "rubric_prompt", "provider", "prefix", "suffix"):
                self.report.group(f"options.{key}: not converted", where)
        execution = test.get("execution") if isinstance(test.get("execution"), dict) else {}
        for key in execution:
            if key not in ("skip_defaults", "threshold"):
                self.report.group(f"execution.{key} of a test: not converted", where)
        for key in ("provider", "providers"):
            if key in test or key in options:
                self.report.group(
                    f"{key} of a test or of its grading: evalsite uses the suite's model and judge", where
                )

    def test_id(self, test: dict, where: str) -> str:
        return (
            as_text(test.get("id")) or as_text(test.get("description")) or where.replace("[", "-").rstrip("]")
        )

    def notes(self, test: dict) -> list[str]:
        out = []
        if as_text(test.get("description")) and as_text(test.get("id")):
            out.append(f"description: {test['description']}")
        if as_text(test.get("note")):
            out.append(f"note: {test['note']}")
        return out

    def expanded(self, variables: dict, where: str) -> list[tuple[dict, str]]:
        """promptfoo runs a test once per value of each array variable (a list of texts); AgentV's `input`
        messages and lists of mappings are values, not choices."""
        if self.agentv:
            return [(variables, "")]
        choices = {k: v for k, v in variables.items() if isinstance(v, list) and v and all(
            isinstance(item, (str, int, float)) for item in v)}  # fmt: skip
        if not choices:
            return [(variables, "")]
        combos = list(itertools.islice(itertools.product(*choices.values()), MAX_EXPANDED + 1))
        if len(combos) > MAX_EXPANDED:
            self.report.lose(
                f"{where}: array variables make more than {MAX_EXPANDED} tests — the first {MAX_EXPANDED} kept"
            )
            combos = combos[:MAX_EXPANDED]
        self.report.group("array variables → a test per value, as promptfoo runs them", where, mapped=True)
        return [
            ({**variables, **dict(zip(choices, combo, strict=True))}, f"-{i + 1}")
            for i, combo in enumerate(combos)
        ]

    # -- one test, one prompt -------------------------------------------------------------------------------

    def single(self, test: dict, variables: dict, template, where: str) -> dict | None:
        variables = self.loaded_vars(variables, where)
        messages = self.messages(template, variables, test, where)
        if not messages:
            self.report.lose(f"{where}: its prompt renders to nothing to send — left out")
            return None
        out: dict[str, object] = {}
        last = messages[-1]
        if last["role"] == "user" and isinstance(last["content"], str):
            if messages[:-1]:
                out["messages"] = messages[:-1]
            out["input"] = last["content"]
        else:
            out["messages"] = messages
            self.report.group("prompt messages → a given history the model replies to", where, mapped=True)
        reference = self.reference(variables.get("expected_output"), where)
        items = test.get("assert") or []
        context = self.context(test, variables, reference, _prompt_text(messages), where)
        if not items:
            items = self.without_assertions(reference, where)
        graded = self.asserts.convert(items, context)
        if not graded.graders:
            if items:
                self.report.lose(f"{where}: none of its assertions could be converted — left out")
            return None
        out["graders"] = graded.graders
        rule = self.pass_rule(test, graded, where)
        if rule is not None:
            out["pass_rule"] = rule
        if reference is not None and any(
            "{ground_truth}" in str(g.get("rubric", "")) for g in graded.graders.values()
        ):
            out["ground_truth"] = reference
            self.report.group(
                "expected_output → the judge's reference answer ({ground_truth})", where, mapped=True
            )
        return out

    def without_assertions(self, reference: str | None, where: str) -> list:
        """What grades a test that has no assertion: AgentV's default judge on the reference answer; for
        promptfoo, which passes any reply, a check that there is one."""
        if self.agentv and reference:
            self.report.group("no assert, an expected_output → AgentV's default judge: the reply matches the "
                              "reference answer in substance", where, mapped=True)  # fmt: skip
            return ["Matches the reference answer in substance"]
        self.report.group(f"no assert: {self.tool} passes any reply; evalsite checks that there is one "
                          "(`regex: \\S`)", where, mapped=True)  # fmt: skip
        return [{"type": "regex", "value": "\\S", "metric": "replied"}]

    def context(self, test: dict, variables: dict, reference: str | None, prompt: str, where: str) -> Context:
        options = test.get("options") if isinstance(test.get("options"), dict) else {}
        rubric_prompt = options.get("rubricPrompt", options.get("rubric_prompt"))
        if rubric_prompt is not None and not isinstance(rubric_prompt, str):
            rubric_prompt = "\n\n".join(
                str(m.get("content", "")) for m in rubric_prompt if isinstance(m, dict)
            ) if isinstance(rubric_prompt, list) else None  # fmt: skip
        if isinstance(rubric_prompt, str) and rubric_prompt.startswith("file://"):
            found = find_file(self.files, rubric_prompt.removeprefix("file://"))
            rubric_prompt = found[1] if found else None
        strings = [i for i in test.get("assert") or [] if isinstance(i, str)]
        criteria = as_text(test.get("criteria")) or "\n".join(f"- {s}" for s in strings)
        threshold = as_share(test.get("threshold")) if self.agentv else None
        return Context(variables, reference, criteria, rubric_prompt, prompt, where,
                       threshold if threshold is not None else self.threshold)  # fmt: skip

    def pass_rule(self, test: dict, graded, where: str) -> object:
        weights = {name: w for name, w in graded.weights.items() if w > 0}
        threshold = as_share(test.get("threshold"))
        if self.agentv:
            threshold = self.threshold if threshold is None else threshold
        if threshold is None:
            if graded.required:
                self.report.group(
                    "required assertions: promptfoo passes a test only when all pass", where, mapped=True
                )
            return None  # promptfoo: every assertion passes (evalsite's default rule, `all`)
        if not weights:
            return None
        rule: dict[str, object] = {"weighted_average": {k: round(v, 6) for k, v in weights.items()},
                                   "threshold": threshold}  # fmt: skip
        if graded.required:
            rule["required"] = graded.required
        self.report.group(f"assertion weights, threshold{' and required items' if graded.required else ''} → "
                          "pass_rule: weighted_average (the weighted mean of the graders' scores)", where, mapped=True)  # fmt: skip
        return rule

    # -- messages and variables ------------------------------------------------------------------------------

    def loaded_vars(self, variables: dict, where: str) -> dict:
        out = {}
        for key, value in variables.items():
            if isinstance(value, str) and value.startswith("file://"):
                path = value.removeprefix("file://")
                if path.lower().endswith((".py", ".js", ".ts")):
                    self.report.lose(f"{where}.vars.{key}: {path} computes the value with code — left empty")
                    value = ""
                else:
                    found = find_file(self.files, path)
                    if found is None:
                        self.report.need(basename(path))
                        self.report.lose(
                            f"{where}.vars.{key}: {path} was not uploaded — upload it and import again"
                        )
                        value = ""
                    else:
                        value = found[1]
                        if found[0].lower().endswith((".yaml", ".yml", ".json")):
                            try:
                                value = parse_yaml(found[0], found[1])
                            except ImportProblem:
                                value = found[1]
                        self.report.group(f"variable file {found[0]} → its text", where, mapped=True)
            out[key] = value
        return out

    def messages(self, template, variables: dict, test: dict, where: str) -> list[dict]:
        options = test.get("options") if isinstance(test.get("options"), dict) else {}
        if template is None:  # no prompts: the test's `input` (AgentV) or `prompt` variable is the prompt
            template = "{{ input }}" if "input" in variables or self.agentv else "{{ prompt }}"
        if isinstance(template, str):
            name = only_variable(template)
            value = lookup(variables, name) if name else None
            if name and _is_chat(value):
                return self.chat(value, variables, where, literal=True)
            text = self.render_text(template, variables, where)
            chat = _chat_or_text(text)
            if not isinstance(chat, str):
                return self.chat(chat, variables, where, literal=True)
            text = f"{options.get('prefix', '')}{text}{options.get('suffix', '')}"
            return [{"role": "user", "content": text}] if text.strip() else []
        return self.chat(template, variables, where, literal=False)

    def chat(self, items: list, variables: dict, where: str, literal: bool) -> list[dict]:
        out: list[dict] = []
        for message in items:
            content = message.get("content")
            if not literal and isinstance(content, str):
                name = only_variable(content)
                value = lookup(variables, name) if name else None
                if name and _is_chat(value):
                    out += self.chat(value, variables, where, literal=True)
                    continue
                content = self.render_text(content, variables, where)
            content = self.content(content, where)
            if content:
                out.append({"role": str(message.get("role")), "content": content})
            for key in message:
                if key not in ("role", "content"):
                    self.report.group(f"message key `{key}` (e.g. tool calls): not converted", where)
        return out

    def content(self, raw: object, where: str) -> str | list[dict]:
        if isinstance(raw, str):
            return raw if raw.strip() else ""
        if isinstance(raw, list):
            parts = []
            for part in raw:
                if isinstance(part, str):
                    parts.append({"type": "text", "value": part})
                elif isinstance(part, dict) and part.get("type") == "text":
                    parts.append({"type": "text", "value": str(part.get("value", part.get("text", "")))})
                elif isinstance(part, dict) and part.get("type") == "file" and as_text(part.get("value")):
                    parts.append({"type": "file", "value": self.attach(as_text(part["value"]), where)})
                else:
                    self.report.lose(
                        f"{where}: message part {short(part, 50)} — not text or a file, left out"
                    )
            parts = [p for p in parts if p["value"].strip()]
            if all(p["type"] == "text" for p in parts):
                return "\n".join(p["value"] for p in parts)
            return parts
        if raw is None:
            return ""
        return json.dumps(raw, ensure_ascii=False, indent=2, default=str)

    def attach(self, reference: str, where: str) -> str:
        name = safe_file_name(reference)
        found = find_file(self.files, reference)
        if found is None:
            self.report.need(name)
            self.report.group(f"file {reference} → attached file {name}: not uploaded — attach it", where)
        else:
            self.attached[name] = found[1]
            self.report.group(f"file {reference} → attached file {name}", where, mapped=True)
        return name

    def render_text(self, template: str, variables: dict, where: str) -> str:
        rendered = render(template, variables)
        for name in rendered.unknown:
            self.report.group(f"template variable {{{{ {name} }}}}: the test does not set it, rendered empty "
                              "as Nunjucks does", where)  # fmt: skip
        for expression in rendered.unrendered:
            self.report.group(f"template {short(expression, 60)}: evalsite renders variables and simple filters "
                              "only, left as written", where, lost=True)  # fmt: skip
        return rendered.text

    def reference(self, raw: object, where: str) -> str | None:
        """The reference answer: a text, an object as JSON text, or the last expected message's content."""
        if raw is None:
            return None
        if isinstance(raw, list) and raw and all(isinstance(m, dict) and "role" in m for m in raw):
            content = raw[-1].get("content")
            if isinstance(content, list):
                pieces = []
                for part in content:
                    value = as_text(part.get("value")) if isinstance(part, dict) else as_text(part)
                    if isinstance(part, dict) and part.get("type") == "file" and value:
                        found = find_file(self.files, value)
                        if found is None:
                            self.report.need(basename(value))
                        pieces.append(found[1].rstrip() if found else f"[{basename(value)}, not uploaded]")
                    elif value:
                        pieces.append(value)
                return "\n".join(pieces)
            raw = content
        if isinstance(raw, str):
            return raw
        return json.dumps(raw, ensure_ascii=False, indent=2, default=str)

    # -- conversations ---------------------------------------------------------------------------------------

    def conversation_mode(self, test: dict, where: str) -> dict | None:
        """AgentV `mode: conversation`: the given messages, then every scripted turn sent live, each graded by
        its own assertions; the test's own assertions grade the whole conversation at the end."""
        variables = self.loaded_vars(test["vars"], where)
        raw_input = variables.get("input")
        history = self.chat(raw_input, variables, where, literal=True) if _is_chat(raw_input) else []
        if isinstance(raw_input, str) and raw_input.strip():
            history = [{"role": "user", "content": raw_input}]
        turns = []
        raw_turns = test.get("turns")
        if not isinstance(raw_turns, list):
            self.report.lose(f"{where}.turns: {short(raw_turns, 40)} — not a list of turns, not sent")
            raw_turns = []
        for number, turn in enumerate(raw_turns):
            at = f"{where}.turns[{number}]"
            if not isinstance(turn, dict):
                self.report.lose(f"{at}: not a mapping, left out")
                continue
            text = turn.get("input")
            if _is_chat(text):
                users = [m for m in self.chat(text, variables, at, literal=True) if m["role"] == "user"]
                text = users[-1]["content"] if users and isinstance(users[-1]["content"], str) else None
            text = as_text(text)
            if text is None or not text.strip():
                self.report.lose(f"{at}: no input text — this user turn is not sent")
                continue
            text = self.render_text(text, variables, at)
            reference = self.reference(turn.get("expected_output"), at)
            context = self.context({**test, "criteria": None, "threshold": test.get("threshold")}, variables,
                                   reference, text, at)  # fmt: skip
            graded = self.asserts.convert(turn.get("assert", turn.get("assertions", [])), context)
            item: dict[str, object] = {"input": text}
            if graded.checks:
                item["checks"] = graded.checks
                if len(set(graded.check_weights)) > 1:
                    self.report.group("weights within a turn: evalsite averages a turn's checks equally", at)
            turns.append(item)
        if not turns:
            self.report.lose(f"{where}: mode: conversation with no turn that can be sent — left out")
            return None
        out: dict[str, object] = {
            "id": unique_id(_slug(self.test_id(test, where)), self.taken, self.report, where)
        }
        if history:
            out["messages"] = history
        out["turns"] = turns
        context = self.context(test, variables, self.reference(variables.get("expected_output"), where),
                               _prompt_text(history), where)  # fmt: skip
        whole = self.asserts.convert(test.get("assert") or [], context)
        checks = [self.scoped(check) for check in whole.checks]
        if checks:
            out["checks"] = checks
        if not checks and not any("checks" in t for t in turns):
            self.report.lose(f"{where}: a conversation with no assertion evalsite can run — left out")
            return None
        aggregation = as_text(test.get("aggregation"))
        if aggregation in ("mean", "min", "max"):
            out["aggregation"] = aggregation
        elif aggregation is not None:
            self.report.skip(f"{where}.aggregation: {aggregation} — not one evalsite has; the mean is used")
        if test.get("on_turn_failure") in ("stop", "continue"):
            out["on_turn_failure"] = test["on_turn_failure"]
        threshold = as_share(test.get("threshold"))
        threshold = threshold if threshold is not None else self.threshold
        if threshold is not None:
            out["pass_threshold"] = threshold
        self.report.group(f"mode: conversation → turns ({len(turns)} user turns sent, each graded by its own "
                          "assertions; the test's assertions grade the whole conversation)", where, mapped=True)  # fmt: skip
        return out

    def scoped(self, check: dict) -> dict:
        """A check on the whole conversation: a judge is shown every turn."""
        if "llm_judge" in check:
            return {"llm_judge": {**check["llm_judge"], "scope": "conversation"}}
        return check

    def conversation_threads(self, tests, default: dict, prompts) -> tuple[list[dict], list[list[str]]]:
        """promptfoo's multi-turn tests: a prompt that loops over `_conversation` sends the earlier turns of
        the same conversation (`metadata.conversationId`, else all tests) before the new one. Each thread
        becomes one eval of `turns`: each test's rendered user message, graded by its assertions."""
        if len(prompts) > 1:
            self.report.skip("prompts: several prompts with _conversation — the first one is used")
        template = prompts[0][1]
        threads: dict[str, list[tuple[str, dict]]] = {}
        for where, raw in tests:
            test = self.merged(raw, default)
            self.test_keys(raw, where)
            metadata = test.get("metadata") if isinstance(test.get("metadata"), dict) else {}
            thread = as_text(metadata.get("conversationId")) or "conversation"
            threads.setdefault(thread, []).append((where, test))
        evals, notes = [], []
        for thread, members in threads.items():
            history: list[dict] = []
            turns = []
            for where, test in members:
                variables = self.loaded_vars(test["vars"], where)
                messages = self.messages(
                    _strip_loop(template), {**variables, "_conversation": []}, test, where
                )
                users = [m for m in messages if m["role"] == "user" and isinstance(m["content"], str)]
                if not users:
                    self.report.lose(f"{where}: renders no user message — this turn is not sent")
                    continue
                if not turns:
                    history = messages[: messages.index(users[-1])]
                context = self.context(test, variables, self.reference(variables.get("expected_output"), where),
                                       users[-1]["content"], where)  # fmt: skip
                graded = self.asserts.convert(test.get("assert") or [], context)
                item: dict[str, object] = {"input": users[-1]["content"]}
                if graded.checks:
                    item["checks"] = graded.checks
                turns.append(item)
            if not turns:
                continue
            if not any("checks" in t for t in turns):
                self.report.lose(
                    f"conversation {thread}: no turn has an assertion evalsite can run — left out"
                )
                continue
            out: dict[str, object] = {
                "id": unique_id(_slug(thread), self.taken, self.report, "metadata.conversationId")
            }
            if history:
                out["messages"] = history
            out["turns"] = turns
            evals.append(out)
            notes.append([])
            self.report.map(f"conversation {thread}: {len(turns)} tests → one eval of {len(turns)} turns "
                            "(_conversation: the earlier turns are the conversation so far)")  # fmt: skip
        return evals, notes


def _strip_loop(template):
    if isinstance(template, str):
        return without_conversation_loop(template)
    return [m for m in template if "_conversation" not in json.dumps(m, default=str)]


def _is_chat(value: object) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) for m in value)
    )


def _chat_or_text(text: str, yaml_too: bool = False) -> object:
    """A prompt that is a JSON (or YAML) list of {role, content} messages as that list, else the text."""
    stripped = without_conversation_loop(text).strip()
    if stripped.startswith("[") or yaml_too:
        candidate = re.sub(r",(\s*[\]}])", r"\1", stripped)
        for parse in (json.loads, lambda t: parse_yaml("prompt", t)):
            try:
                value = parse(candidate)
            except (ValueError, ImportProblem):
                continue
            if _is_chat(value) and all(m["role"] in CHAT_ROLES for m in value):
                return value
    return text


def _prompt_text(messages: list[dict]) -> str:
    for message in reversed(messages):
        if message["role"] == "user" and isinstance(message["content"], str):
            return message["content"]
    return ""


def _looks_like_file(text: str) -> bool:
    return "\n" not in text and bool(
        re.fullmatch(r"[\w./-]+\.(txt|md|json|yaml|yml|j2|jsonl|prompt)", text.strip())
    )


def _slug(text: str) -> str:
    slug = re.sub(r"\s+", "-", text.strip())
    return slug[:200] or "test"


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


# --- recognising the shape ---------------------------------------------------------------------------------

SHAPE_KEYS = ("prompts", "providers", "defaultTest", "default_test", "evaluateOptions", "evaluate_options")
AGENTV_KEYS = ("default_test", "evaluate_options", "execution", "target", "targets", "workspace", "environment",
               "governance")  # fmt: skip
AGENTV_TEST_KEYS = (
    "id",
    "mode",
    "turns",
    "criteria",
    "input",
    "expected_output",
    "execution",
    "conversation_id",
)
AGENTV_TYPES = ("llm-grader", "code-grader", "script", "tool-trajectory", "trajectory", "composite", "field-accuracy",
                "execution-metrics", "rubrics", "skill-trigger", "skill-used", "token-usage")  # fmt: skip


def shared_shape(data: object) -> bool:
    """Whether `data` has promptfoo's shape (today's AgentV has it too): `tests` of `vars` / `assert` items or
    in files, beside `prompts`, `providers` or `defaultTest`."""
    if not isinstance(data, dict) or "evalcases" in data:
        return False
    tests = data.get("tests")
    items = tests if isinstance(tests, list) else []
    if any(isinstance(t, dict) and ("assertions" in t or "input_messages" in t) for t in items):
        return False  # AgentV's earlier generations
    if not (items or isinstance(tests, str) or isinstance(data.get("scenarios"), list)):
        return False
    if any(key in data for key in SHAPE_KEYS):
        return True
    return any(
        (isinstance(t, dict) and ("vars" in t or "assert" in t)) or (isinstance(t, str) and _is_test_file(t))
        for t in items
    ) or (isinstance(tests, str) and _is_test_file(tests))


def agentv_flavour(data: dict) -> bool:
    """Whether a file of the shared shape is AgentV's: its own keys, test keys, assertion types, plain-string
    assertions, or its one `{{ input }}` prompt."""
    schema = data.get("$schema")
    if isinstance(schema, str) and "agentv" in schema.lower():
        return True
    if any(key in data for key in AGENTV_KEYS):
        return True
    prompts = data.get("prompts")
    if isinstance(prompts, list) and len(prompts) == 1 and only_variable(str(prompts[0])) == "input":
        return True
    tests = data.get("tests") if isinstance(data.get("tests"), list) else []
    for test in tests:
        if not isinstance(test, dict):
            continue
        if any(key in test for key in AGENTV_TEST_KEYS):
            return True
        for item in test.get("assert") or [] if isinstance(test.get("assert"), list) else []:
            if isinstance(item, str) or (isinstance(item, dict) and item.get("type") in AGENTV_TYPES):
                return True
    return False


def _is_test_file(text: str) -> bool:
    return text.strip().lower().endswith((".csv", ".yaml", ".yml", ".json", ".jsonl")) or text.startswith(
        "file://"
    )
