"""Simulated conversations (@agtlantis/eval's multi-turn test cases): the eval's prompt, then scripted
follow-ups, then a simulated user, until a stop condition holds or max_turns is reached. The eval's
`checks` grade the final reply; how it ended (`on_condition_met`, `on_max_turns`) decides the outcome."""

from __future__ import annotations

from collections.abc import Sequence

from ..outcomes import Status, TerminationKind
from ..results import ConditionResult, TurnRecord
from ..schema import Eval
from ..simulate import persona_for, simulator_messages
from ..text import plural
from .base import Defaults, Driver, Ending, Step, UserAsk, Verdict, checks_score


class Simulated(Driver):
    has_endings = True
    graded_per_turn = False  # its final checks and how it ended grade it
    multi_turn = True  # a multi-turn test case, even when a condition ends it on turn 1

    def __init__(self, ev: Eval, index: int, defaults: Defaults) -> None:
        self.ev = ev
        self.sim = ev.simulate
        self.node = f"evals[{index}]"
        self.scripted: list[str] = []
        self.forever: str | None = None
        for follow_up in self.sim.follow_ups:
            if follow_up.turns == "inf":
                self.forever = follow_up.input
            else:
                self.scripted += [follow_up.input] * follow_up.turns

    def _step(self, number: int, prompt: str | None, ask: UserAsk | None = None) -> Step:
        return Step(
            prompt,
            [],
            f"{self.node}.simulate" if number > 1 else self.node,
            stop_when=self.sim.stop_when,
            final_checks=self.ev.checks or [],
            ask=ask,
        )

    def first(self) -> Step:
        return self._step(1, self.ev.prompt)

    def has_input(self, turns_done: int) -> bool:
        """Is there a user message for turn turns_done + 1?"""
        return turns_done - 1 < len(self.scripted) or self.forever is not None or self.sim.persona is not None

    def next(self, step: Step, turns: Sequence[TurnRecord]) -> Step | None:
        done = turns[-1].turn
        if done - 1 < len(self.scripted):
            return self._step(done + 1, self.scripted[done - 1])
        if self.forever is not None:
            return self._step(done + 1, self.forever)
        persona = persona_for(self.sim.persona, done + 1)
        return self._step(done + 1, None, UserAsk(self.sim.model, simulator_messages(persona, _live(turns))))

    def ending(
        self, step: Step, position: int, condition: ConditionResult | None, decided: str | None
    ) -> Ending | None:
        if condition is not None and condition.met:
            return Ending(TerminationKind.CONDITION_MET, decided)
        if position >= self.sim.max_turns:
            return Ending(TerminationKind.MAX_TURNS, str(self.sim.max_turns))
        if not self.has_input(position):
            return Ending(TerminationKind.INPUTS_EXHAUSTED)
        return None

    def out_of_script(self, turns: Sequence[TurnRecord]) -> bool:
        # A condition met and max_turns are endings the eval chose; running out of follow-ups with no
        # simulated user to go on is a script that ended.
        return turns[-1].termination_kind == TerminationKind.INPUTS_EXHAUSTED

    def verdict(self, turns: Sequence[TurnRecord]) -> Verdict:
        last = turns[-1]
        outcome = {
            TerminationKind.CONDITION_MET: self.sim.on_condition_met,
            TerminationKind.MAX_TURNS: self.sim.on_max_turns,
        }.get(last.termination_kind, "fail")  # ran out of inputs with no simulated user to continue
        checks_ok = all(check.passed for check in last.checks)
        passed = outcome == "pass" and checks_ok
        status = Status.PASSED if passed else Status.FAILED
        head = f"{status} after {plural(last.turn, 'turn')}"
        tail = "" if checks_ok else "; final checks failed"
        # An ending that fails scores 0; otherwise the final checks' mean score (1 without checks).
        score = (checks_score(last.checks) if last.checks else 1.0) if outcome == "pass" else 0.0
        return Verdict(status, score, reason=head + tail, text=f"{head}: {last.termination or ''}{tail}")


def _live(turns: Sequence[TurnRecord]) -> list[dict]:
    """The conversation so far as the simulated user sees it: no system prompt, no given history, and of each
    turn its message and the agent's text reply, never the tool calls and results that led to it."""
    live = []
    for turn in turns:
        live += [{"role": "user", "content": turn.prompt}, {"role": "assistant", "content": turn.response}]
    return live
