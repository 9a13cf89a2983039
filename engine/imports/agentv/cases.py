"""One AgentV case as an evalsite eval: its input as the given messages, its assertions (or v2 evaluators) as
graders and checks, `mode: conversation` as live turns, v1 `testcases` read as v2 cases."""

from __future__ import annotations

import json

from ..common import Report, as_text, short, unique_id
from ..promptfoo.checks import conversation_rule
from ..toolcalls import Declared
from .checks import DEFAULT_THRESHOLD, default_criteria
from .graders import Graders
from .messages import Messages, last_user_text, transcript, turn_text, with_files

CASE_KEYS = ("id", "outcome", "expected_outcome", "input_messages", "expected_messages", "evaluators", "execution",
             "conversation_id", "note", "rubrics", "input", "expected_output", "criteria", "assertions", "assert",
             "mode", "turns", "aggregation", "on_turn_failure", "reference_answer", "description",
             "metadata", "input_files")  # fmt: skip


class Cases(Graders, Messages):
    def __init__(
        self,
        files: dict[str, str],
        report: Report,
        defaults: list[dict] | None,
        threshold: float = DEFAULT_THRESHOLD,
        suite_assertions: object = None,
        suite_tags: list[str] | None = None,
        suite_files: list[str] | None = None,
        suite_input: list | None = None,
    ):
        self.files = files
        self.report = report
        self.defaults = defaults
        self.evaluator_of: list[dict] = []  # the evaluator each check of `checks()` came from
        self.threshold = threshold
        self.suite_assertions = suite_assertions if isinstance(suite_assertions, list) else []
        self.suite_tags = suite_tags or []
        self.suite_files = suite_files or []
        self.suite_input = suite_input or []
        self.attached: dict[str, str] = {}
        self.taken: set[str] = set()
        self.used_criteria = False  # the case's criteria went into a grader's rubric
        self.declared = Declared()  # the tools the trajectory checks name, offered to the model

    # -- one case ------------------------------------------------------------------------------------

    def case(self, case: object, index: int, key: str = "evalcases") -> tuple[dict, list[str]] | None:
        report = self.report
        where = f"{key}[{index}]"
        if not isinstance(case, dict):
            report.skip(f"{where}: not a mapping, left out")
            return None
        if key == "testcases":
            case = self.first_format(case, where)
        label = as_text(case.get("id")) or where
        out: dict[str, object] = {}
        if as_text(case.get("id")):
            out["id"] = unique_id(as_text(case["id"]), self.taken, report, where)
        tags = list(self.suite_tags)
        if as_text(case.get("conversation_id")):
            tags.append(f"conversation:{case['conversation_id']}")
            report.group("conversation_id → tag conversation:<id>", label, mapped=True)
        if tags:
            out["tags"] = tags
        conversation = case.get("mode") == "conversation" or isinstance(case.get("turns"), list)
        raw_input = case.get("input_messages", case.get("input"))
        execution = case.get("execution") if isinstance(case.get("execution"), dict) else {}
        input_files = [] if execution.get("skip_defaults") else list(self.suite_files)
        if isinstance(case.get("input_files"), list):
            input_files += [f for f in case["input_files"] if isinstance(f, str)]
        if input_files:
            raw_input = with_files(raw_input, input_files)
            report.group("input_files → file parts before the user message's text", label, mapped=True)
        if isinstance(raw_input, str):  # the shorthand: one user message
            raw_input = [{"role": "user", "content": raw_input}]
            report.group("input (a string) → one user message", label, mapped=True)
        elif isinstance(raw_input, dict) and "role" in raw_input:
            raw_input = [raw_input]
        elif isinstance(raw_input, list) and "input" in case:
            raw_input = [{"role": "user", "content": m} if isinstance(m, str) else m for m in raw_input]
        if self.suite_input and not execution.get("skip_defaults"):
            raw_input = [*self.suite_input, *(raw_input if isinstance(raw_input, list) else [])]
            report.group("the suite's input → the messages before every case's", label, mapped=True)
        messages = self.messages(raw_input, label)
        if not messages and not conversation:
            report.lose(f"{where}: no input (or input_messages): nothing to send, left out")
            return None
        if messages:
            out["messages"] = messages
        outcome = as_text(case.get("criteria", case.get("outcome", case.get("expected_outcome"))))
        expected = case.get("expected_output", case.get("expected_messages"))
        if isinstance(expected, str):
            expected = [{"role": "assistant", "content": expected}]
        elif isinstance(expected, dict) and "role" not in expected:
            # an object: AgentV hands it to the judge as the reference answer, as JSON text
            expected = [{"role": "assistant", "content": expected}]
            report.group(
                "expected_output (an object) → the judge's reference answer (its JSON text)",
                label,
                mapped=True,
            )
        elif isinstance(expected, dict):
            expected = [expected]
        reference = self.reference(expected, label)
        if reference is None and as_text(case.get("reference_answer")):
            reference = as_text(case["reference_answer"])
            report.group("reference_answer → the judge's reference answer", label, mapped=True)
        metadata = case.get("metadata") if isinstance(case.get("metadata"), dict) else {}
        context = {
            "_expected_messages": expected if isinstance(expected, list) else [],  # for expected_tool_calls
            "question": last_user_text(messages),
            "criteria": outcome or "",
            "expected_outcome": outcome or "",
            "reference_answer": reference or "",
            "candidate_answer": "[the assistant's final reply, shown in the conversation]",
            "output_messages": "[the conversation]",
            "output": "[the assistant's final reply, shown in the conversation]",
            # AgentV's formatted question: the whole given conversation in `[Role]:` form
            "input_messages": transcript(messages),
            "input": transcript(messages),
            "expected_messages": json.dumps(expected, ensure_ascii=False, default=str),
            "metadata": json.dumps(metadata, ensure_ascii=False, indent=2, default=str),
            "metadata_json": json.dumps(metadata, ensure_ascii=False, default=str),
            "rubrics": "",
        }
        if "target" in execution or "targets" in execution:
            report.group(
                "execution.target (a per-case AgentV target): evalsite tests one model per run", label
            )
        items = case.get("assertions", case.get("assert"))
        if not execution.get("skip_defaults") and self.suite_assertions:
            items = (items if isinstance(items, list) else []) + self.suite_assertions
            report.group("suite assertions → added to every case's", label, mapped=True)
        elif execution.get("skip_defaults"):
            report.group("execution.skip_defaults → the suite's assertions are not added", label, mapped=True)
        if conversation:
            converted = self.conversation(case, out, items, outcome, reference, context, label)
            if converted is None:
                return None
            return converted, self.case_notes(case, execution, label, [], judged=self.used_criteria)
        notes: list[str] = []
        self.used_criteria = False
        checks: list[dict] = []
        if items is not None and key != "evalcases":
            graders, weights, gates = self.assertions(items, context, label)
            if graders:
                out["graders"] = graders
                out["pass_rule"] = {"weighted_average": weights, "threshold": self.threshold}
                if gates:
                    out["pass_rule"]["required"] = gates
                report.group(
                    "assertions → named graders; AgentV's weighted mean of their scores (weight, default 1) "
                    f"passes at {self.threshold:g} → pass_rule weighted_average",
                    label,
                    mapped=True,
                )
                if any(
                    "{ground_truth}" in str(g.get("rubric", "")) or g.get("rubric_file")
                    for g in graders.values()
                ):
                    out["ground_truth"] = reference or ""
                    report.group(
                        "expected_output → ground_truth (what {ground_truth} shows the judge)",
                        label,
                        mapped=True,
                    )
            evaluators: list[dict] | None = []  # it grades with its assertions only
        else:
            raw = execution.get("evaluators", case.get("evaluators"))
            evaluators = self.defaults if raw is None else evaluator_list(raw, f"{label}.evaluators", report)
        evaluated = self.checks(evaluators, outcome, reference, context, label)
        weighted = self.weighted(evaluated, label) if evaluated and not out.get("graders") else None
        if weighted:
            out.update(weighted)
        else:
            checks.extend(evaluated)
        if isinstance(case.get("rubrics"), list) and case["rubrics"]:
            checks.append(self.rubrics(case["rubrics"], label))
        if not checks and not out.get("graders"):
            default = default_criteria(outcome, reference)
            if default is None:
                report.lose(f"{label}: no criteria, reference answer or grader evalsite can use, left out")
                return None
            report.group(
                "none of its graders can run in evalsite; graded instead by an llm_judge on its criteria and "
                "reference answer",
                label,
            )
            checks.append({"llm_judge": {"criteria": default, "threshold": self.threshold}})
        if checks:
            out["checks"] = checks
        judged = any("llm_judge" in check for check in checks) or self.used_criteria
        return out, self.case_notes(case, execution, label, notes, judged)

    def conversation(
        self,
        case: dict,
        out: dict,
        items: object,
        outcome: str | None,
        reference: str | None,
        context: dict,
        label: str,
    ) -> dict | None:
        """`mode: conversation`: every turn's `input` is sent live, in order, after the case's `input` (its
        system message and any history), and graded by its own assertions; the top-level assertions grade the
        whole conversation once, as one more score. AgentV combines the turn scores and that one by
        `aggregation` and passes at its threshold."""
        report = self.report
        self.used_criteria = False
        raw_turns = case.get("turns")
        if not isinstance(raw_turns, list) or not raw_turns:
            report.lose(f"{label}: mode: conversation without `turns` — no user turn to send, left out")
            return None
        turns: list[dict] = []
        ungraded: list[dict] = []
        for number, raw in enumerate(raw_turns):
            where = f"{label}.turns[{number}]"
            if not isinstance(raw, dict):
                raw = {"input": raw}
            text = turn_text(raw.get("input"))
            if not text:
                report.lose(f"{where}: no user input evalsite can send, left out")
                continue
            turn: dict[str, object] = {"input": text}
            checks = self.turn_checks(raw.get("assertions", raw.get("assert")), raw, outcome, context, where)
            if checks:
                turn["checks"] = checks
            elif not raw.get("assertions", raw.get("assert")) and raw.get("expected_output") is None:
                ungraded.append(turn)  # a turn whose assertions were all lost stays ungraded (listed)
            for key in raw:
                if key not in ("input", "assertions", "assert", "expected_output"):
                    report.group(f"turns[].{key}: not converted", label)
            turns.append(turn)
        if not turns:
            report.lose(f"{label}: no turn could be converted, left out")
            return None
        out["turns"] = turns
        report.group(
            "mode: conversation + turns → turns (each input sent live, its assertions as the turn's checks)",
            label,
            mapped=True,
        )
        if isinstance(items, list) and items:
            # AgentV grades the conversation with no reference answer (its expected output is the turns')
            whole = {**context, "reference_answer": "", "expected_messages": "[]", "_expected_messages": []}
            graders, weights, gates = self.assertions(items, whole, label, whole=True)
            rule = conversation_rule(graders, weights, gates, self.threshold, report, label)
            if rule is not None:
                out["graders"] = graders
                out["pass_rule"] = rule
        if not out.get("graders") and not any(turn.get("checks") for turn in turns):
            default = default_criteria(outcome, reference)
            if default is None:
                report.lose(f"{label}: no turn or conversation assertion evalsite can use, left out")
                return None
            out["checks"] = [
                {"llm_judge": {"criteria": default, "threshold": self.threshold, "scope": "conversation"}}
            ]
            self.used_criteria = True
        for turn in ungraded:
            # AgentV scores a turn with no assertions 1.0 and counts it in the aggregate; evalsite counts
            # only turns with checks, so such a turn gets one that any reply passes.
            turn["checks"] = [{"match": "*"}]
            report.group(
                'turns without assertions → a `match: "*"` check, which any reply passes: AgentV scores '
                "them 1.0 in the aggregate",
                label,
                mapped=True,
            )
        for key in ("aggregation", "on_turn_failure"):
            value = case.get(key)
            if value in (("mean", "min", "max") if key == "aggregation" else ("continue", "stop")):
                out[key] = value
                report.group(f"{key} → {key}", label, mapped=True)
            elif value is not None:
                report.group(
                    f"{key}: {short(value, 30)} — not an option evalsite has, left out", label, lost=True
                )
        if out.get("on_turn_failure") == "stop" and out.get("aggregation") == "max":
            report.group(
                "on_turn_failure: stop with aggregation: max — AgentV scores the turns it skips 0 and may "
                "still pass on the best score; evalsite fails a stopped conversation",
                label,
            )
        if case.get("window_size") is not None:
            report.group(
                "window_size: AgentV sends only the last turns; evalsite sends the whole conversation",
                label,
                lost=True,
            )
        return out

    def case_notes(
        self, case: dict, execution: dict, label: str, notes: list[str], judged: bool
    ) -> list[str]:
        report = self.report
        if as_text(case.get("criteria")):
            if judged:
                report.group("criteria → what the judge grades against", label, mapped=True)
            else:
                notes.append(f"criteria: {case['criteria']}")
                report.group(
                    "criteria: no grader's prompt uses {{criteria}}, so it is kept as a comment above the eval",
                    label,
                )
        for key in ("note", "description"):
            if as_text(case.get(key)):
                notes.append(f"{key}: {case[key]}")
                report.group(f"{key} → a comment above the eval", label, mapped=True)
        for key in case:
            if key not in CASE_KEYS:
                report.group(f"eval case key `{key}`: not converted", label)
        for key in execution:
            if key not in ("target", "targets", "evaluators", "skip_defaults"):
                report.group(f"execution.{key}: not converted", label)
        return notes

    def first_format(self, case: dict, where: str) -> dict:
        """A v1 `testcases` case as a v2 one: `messages` up to the first assistant message are the input
        (AgentV v1 sends the system and user messages), that assistant message is the reference answer."""
        report = self.report
        messages = case.get("messages") if isinstance(case.get("messages"), list) else []
        given, expected = [], []
        for message in messages:
            if isinstance(message, dict) and message.get("role") == "assistant" and not expected:
                expected.append(message)
            elif isinstance(message, dict) and message.get("role") == "assistant":
                report.group(
                    "testcases messages: an assistant message after the first (AgentV v1 used the first as the "
                    "reference answer) is left out",
                    as_text(case.get("id")) or where,
                )
            elif isinstance(message, dict):
                given.append(message)
        if expected:
            report.group(
                "testcases: the first assistant message → the reference answer",
                as_text(case.get("id")) or where,
                mapped=True,
            )
        converted = {k: v for k, v in case.items() if k not in ("messages", "grader")}
        converted["input_messages"] = given
        converted["expected_messages"] = expected
        if case.get("grader") == "heuristic":
            report.lose(
                f"{where}.grader: heuristic — AgentV's keyword-aspect score has no evalsite equivalent; graded by "
                "an llm_judge on its outcome and reference answer instead"
            )
        return converted


def evaluator_list(raw: object, where: str, report: Report) -> list[dict] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        report.skip(f"{where}: not a list, ignored")
        return None
    return [item for item in raw if isinstance(item, dict)]
