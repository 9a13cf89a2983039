"""The reader of promptfoo's shape: the suite, its tests merged with defaultTest, one eval per test and prompt
with its assertions as named graders and the tool's pass rule."""

from __future__ import annotations

import itertools
import math
import re

from ..common import (
    Converted,
    ImportProblem,
    Report,
    Section,
    a,
    as_count,
    as_share,
    as_text,
    basename,
    find_file,
    short,
    unique_id,
)
from ..settings import agentv_target_settings, provider_settings, providers_settings
from ..toolcalls import provider_tools, tool_sections
from .asserts import Assertions
from .checks import Context
from .messages import Messages, prompt_text, slug
from .sources import Sources
from .turns import Conversations

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


# Keys whose text is not sent or graded: `{{ env.NAME }}` there is left as written (AgentV's description of
# its env-interpolation example names `{{ env.VAR }}` as text).
ENV_KEPT_KEYS = ("name", "description", "providers", "targets", "target", "env")


class Reader(Sources, Messages, Conversations):
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
        self.suite_vars: dict[str, str | None] = {}  # `{{ env.NAME }}` as suite variables, with defaults
        self.unmatched: list[str] = []  # the tests globs no file given matches
        self.model_settings: dict | None = (
            None  # the providers' generation settings (engine.imports.settings)
        )

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
        self.target_settings()
        self.data = data = {
            key: value if key in ENV_KEPT_KEYS else self.env_everywhere(value, key)
            for key, value in data.items()
        }
        for key in data:
            if key in NOTED_KEYS:
                report.skip(
                    f"{key}: {short(data[key], 50)} — {self.tool} run settings, not part of an evalsite suite"
                )
            elif key not in SUITE_KEYS:
                report.skip(f"{key}: {short(data[key], 50)} — not {a(self.tool)} key evalsite knows")
        iterations, rate = self.iterations()
        default = self.default_test()
        if isinstance(data.get("assert"), list):
            self.suite_asserts = data["assert"]
            report.map(
                "assert (the suite's) → every test's assertions (but those with execution.skip_defaults)"
            )
        prompts = self.prompts()
        tests = self.tests(data.get("tests"), "tests") + self.scenarios(data.get("scenarios"))
        if not tests and self.unmatched:
            raise ImportProblem(
                f"{self.name} keeps its tests in the files the glob {', '.join(self.unmatched)} names, and none "
                "of the files given matches it: import the folder that holds them (on the Import page, a zip of it)"
            )
        if not tests:
            raise ImportProblem(f"{self.name} has no tests: {a(self.tool)} file lists them under `tests`")
        evals, notes = self.evals(tests, default, prompts)
        if not evals:
            raise ImportProblem(f"{self.name}: no test could be converted — {'; '.join(report.problems())}")
        if self.suite_vars:
            sections.append(Section("vars", self.suite_vars))
        sections.append(Section("model", None, comments=[
            f"model: set the model under test ({self.tool} chose it with `providers`)"]))  # fmt: skip
        for key, settings in (
            ("model_settings", self.model_settings),
            ("judge_settings", self.judge_settings()),
        ):
            if settings:
                sections.append(Section(key, settings))
        if iterations > 1:
            sections.append(Section("iterations", iterations))
            sections.append(Section("pass_rate_threshold", rate))
        sections.extend(tool_sections(self.asserts.declared, report))
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
                listed = self.data[key] if isinstance(self.data[key], list) else [self.data[key]]
                if self.model_settings is None:
                    self.model_settings = providers_settings(listed, key, self.report, self.files)
                for number, provider in enumerate(listed):
                    config = provider.get("config") if isinstance(provider, dict) else None
                    if isinstance(config, dict) and "tools" in config:
                        where = (
                            f"{key}[{number}].config.tools"
                            if isinstance(self.data[key], list)
                            else f"{key}.config.tools"
                        )
                        provider_tools(config["tools"], where, self.asserts.declared, self.report)

    def target_settings(self) -> None:
        """AgentV names its target (`execution.target`, `target`); its settings are in targets.yaml."""
        execution = self.data.get("execution") if isinstance(self.data.get("execution"), dict) else {}
        named = execution.get("target", self.data.get("target"))
        if self.agentv and self.model_settings is None:
            self.model_settings = agentv_target_settings(named, self.files, self.report)

    def judge_settings(self) -> dict | None:
        """The grading provider's settings (defaultTest.options.provider's config) as judge_settings."""
        default = self.data.get("defaultTest", self.data.get("default_test"))
        options = default.get("options") if isinstance(default, dict) else None
        provider = options.get("provider") if isinstance(options, dict) else None
        config = provider.get("config") if isinstance(provider, dict) else None
        if not isinstance(config, dict):
            return None
        return provider_settings(
            config, "defaultTest.options.provider.config", self.report, self.files, into="judge_settings"
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

    # -- tests ----------------------------------------------------------------------------------------------

    # -- evals ----------------------------------------------------------------------------------------------

    def merged(self, test: dict, default: dict, where: str) -> dict:
        """A test with defaultTest under it: variables and options merged, assertions appended."""
        out = dict(test)
        default_vars = default.get("vars") if isinstance(default.get("vars"), dict) else {}
        own_vars = test.get("vars") if isinstance(test.get("vars"), dict) else {}
        if "vars" in test and not isinstance(test.get("vars"), dict):
            self.report.lose(
                f"{where}.vars: {short(test['vars'])} — not a mapping, the test's variables are left out"
            )
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
            self.report.lose(
                f"{where}.assert: {short(test['assert'], 40)} — not a list of assertions, not converted"
            )
        execution = test.get("execution") if isinstance(test.get("execution"), dict) else {}
        suite_asserts = [] if execution.get("skip_defaults") is True else self.suite_asserts
        if self.agentv and not (own or default_asserts or suite_asserts) and as_text(test.get("criteria")):
            own = [as_text(test["criteria"])]  # AgentV grades a test's criteria when nothing else grades it
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
            test = self.merged(raw, default, where)
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
                    made = {"id": unique_id(slug(wanted), self.taken, self.report, where), **made}
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
        context = self.context(test, variables, reference, prompt_text(messages), where)
        context.live = "input" in out
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
        if reference is not None:  # what a judge's {ground_truth} shows and a code grader is given
            out["ground_truth"] = reference
            self.report.group(
                "expected_output → ground_truth: the judge's reference answer ({ground_truth}), a code grader's expected output",
                where,
                mapped=True,
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
        listed = strings[0] if len(strings) == 1 else "\n".join(f"- {s}" for s in strings)
        criteria = as_text(test.get("criteria")) or listed
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

    # -- conversations ---------------------------------------------------------------------------------------
