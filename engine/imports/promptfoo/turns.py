"""Conversations: AgentV's `mode: conversation` (scripted `turns`, each graded) and promptfoo's multi-turn
tests (a prompt looping over `_conversation`)."""

from __future__ import annotations

import json

from ..common import (
    as_share,
    as_text,
    short,
    unique_id,
)
from .checks import conversation_rule
from .messages import is_chat, prompt_text, slug
from .render import without_conversation_loop


class Conversations:
    """Tests that are turns of a conversation (a part of the reader)."""

    def conversation_mode(self, test: dict, where: str) -> dict | None:
        """AgentV `mode: conversation`: the given messages, then every scripted turn sent live, each graded by
        its own assertions; the test's own assertions grade the whole conversation at the end, one more score
        beside the turns'."""
        variables = self.loaded_vars(test["vars"], where)
        raw_input = variables.get("input")
        history = self.chat(raw_input, variables, where, literal=True) if is_chat(raw_input) else []
        if isinstance(raw_input, str) and raw_input.strip():
            history = [{"role": "user", "content": raw_input}]
        turns = []
        unasserted = []  # turns with neither assertions nor an expected_output
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
            if is_chat(text):
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
            elif not turn.get("assert", turn.get("assertions")) and turn.get("expected_output") is None:
                unasserted.append(item)
            turns.append(item)
        if not turns:
            self.report.lose(f"{where}: mode: conversation with no turn that can be sent — left out")
            return None
        out: dict[str, object] = {
            "id": unique_id(slug(self.test_id(test, where)), self.taken, self.report, where)
        }
        if history:
            out["messages"] = history
        out["turns"] = turns
        threshold = as_share(test.get("threshold"))
        threshold = threshold if threshold is not None else self.threshold
        context = self.context(test, variables, self.reference(variables.get("expected_output"), where),
                               prompt_text(history), where)  # fmt: skip
        context.whole = True
        whole = self.asserts.convert(test.get("assert") or [], context)
        rule = conversation_rule(whole.graders, whole.weights, whole.required,
                                 1.0 if threshold is None else threshold, self.report, where)  # fmt: skip
        if rule is not None:
            out["graders"] = whole.graders
            out["pass_rule"] = rule
        if rule is None and not any("checks" in t for t in turns):
            self.report.lose(f"{where}: a conversation with no assertion evalsite can run — left out")
            return None
        for item in unasserted:
            # AgentV scores a turn with no assertions 1.0 and counts it in the aggregate; evalsite counts
            # only turns with checks, so such a turn gets one that any reply passes.
            item["checks"] = [{"match": "*"}]
            self.report.group('turns without assertions → a `match: "*"` check, which any reply passes: '
                              "AgentV scores them 1.0 in the aggregate", where, mapped=True)  # fmt: skip
        aggregation = as_text(test.get("aggregation"))
        if aggregation in ("mean", "min", "max"):
            out["aggregation"] = aggregation
        elif aggregation is not None:
            self.report.skip(f"{where}.aggregation: {aggregation} — not one evalsite has; the mean is used")
        if test.get("on_turn_failure") in ("stop", "continue"):
            out["on_turn_failure"] = test["on_turn_failure"]
        if out.get("on_turn_failure") == "stop" and out.get("aggregation") == "max":
            self.report.group("on_turn_failure: stop with aggregation: max — AgentV scores the turns it skips 0 "
                              "and may still pass on the best score; evalsite fails a stopped conversation", where)  # fmt: skip
        if threshold is not None:
            out["pass_threshold"] = threshold
        self.report.group(f"mode: conversation → turns ({len(turns)} user turns sent, each graded by its own "
                          "assertions; the test's assertions grade the whole conversation)", where, mapped=True)  # fmt: skip
        return out

    def conversation_threads(self, tests, default: dict, prompts) -> tuple[list[dict], list[list[str]]]:
        """promptfoo's multi-turn tests: a prompt that loops over `_conversation` sends the earlier turns of
        the same conversation (`metadata.conversationId`, else all tests) before the new one. Each thread
        becomes one eval of `turns`: each test's rendered user message, graded by its assertions."""
        if len(prompts) > 1:
            self.report.skip("prompts: several prompts with _conversation — the first one is used")
        template = prompts[0][1]
        threads: dict[str, list[tuple[str, dict]]] = {}
        for where, raw in tests:
            test = self.merged(raw, default, where)
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
                    f"tests (metadata.conversationId {thread}): no turn has an assertion evalsite can run — the "
                    "conversation is left out"
                )
                continue
            out: dict[str, object] = {
                "id": unique_id(slug(thread), self.taken, self.report, "metadata.conversationId")
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
