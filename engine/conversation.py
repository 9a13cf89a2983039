"""Running one conversation: the heart of the engine.

`run_eval` plays one eval against a chat client and reports each turn through `on_turn` as soon as it is
graded, and each wait before a model call is retried through `on_wait`. It can resume: given the turns already stored (`prior`), it replays them without calling the
model and continues after the last one, so a redelivered task never repeats or duplicates a turn.

Every kind of conversation is the same loop: a driver chooses the next step (a user message and what
grades its reply), the model replies, the reply is graded into a TurnRecord, and the driver decides from
the stored records alone whether to go on. Drivers: conversation trees (seed 000: follow-ups chosen by
failed checks), scripted inputs (seed 001: per-turn ground truth), `turns` with checks on chosen turns,
and a given history the model replies to (seeds 002, 004). Histories can precede any of them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .checks import JudgeContext, Reply, choose_followup, evaluate_level
from .clients import ChatClient, EndpointError
from .conditions import evaluate_condition
from .grading import extract, grade
from .history import build_history, given_messages
from .patterns import RegexFailure
from .results import ConditionResult, EvalResult, SimulatedUserCall, Totals, TurnGrade, TurnRecord, Usage
from .retries import RetryStopped, RetryWait, retry_hooks
from .schema import Check, Eval, Extractor, followup_depth
from .simulate import clean_reply, persona_for, simulator_messages
from .text import plural


class StopConversation(Exception):
    """Raised by an on_turn callback or should_stop check to end the conversation without a verdict."""


class ResumeMismatch(Exception):
    """Stored turns do not fit the suite version they claim to come from."""


@dataclass
class Defaults:
    """Suite-level defaults for scripted grading."""

    grader: str | None = None
    extractor: Extractor | None = None
    rubric: str | None = None
    pass_threshold: float | None = None


@dataclass
class EngineContext:
    agent: ChatClient
    model: str
    judge: ChatClient
    judge_model: str
    system: str | None = None
    # Resolves "endpoint/model" references that checks name themselves (e.g. llm_judge.model).
    resolve: Callable[[str], tuple[ChatClient, str]] | None = None
    files: Mapping[str, str] = field(default_factory=dict)
    defaults: Defaults = field(default_factory=Defaults)
    judge_temperature: float | None = None


@dataclass
class Step:
    prompt: str | None  # None: the model replies to the history alone
    checks: list[Check]
    node: str
    reason: str | None = None
    ground_truth: str | None = None  # grade this step's reply against it
    grade_conversation: str | None = None  # grade the whole conversation against it, after this step
    simulated: _Simulated | None = None  # check the stop condition after this step's reply
    user_usage: Usage = field(default_factory=Usage)  # what the simulated user spent writing `prompt`
    user_cost: float = 0.0
    user_call: SimulatedUserCall | None = None  # what the simulated user was sent, and its answer


class _Tree:
    """Seed 000: the first prompt, then follow-ups chosen by the failed checks."""

    def __init__(self, ev: Eval, index: int):
        self.ev = ev
        self.node = f"evals[{index}]"

    def first(self) -> Step:
        return Step(self.ev.prompt, self.ev.checks, self.node)

    def next(self, step: Step, turn: TurnRecord) -> Step | None:
        if turn.passed:
            return None
        followup = choose_followup(step.checks, turn.checks)
        if followup is None:
            return None
        item, reason = followup
        return Step(item.prompt, item.checks, _node_of(item, step), f"{reason} on turn {turn.turn}")

    def verdict(self, turns: list[TurnRecord]) -> tuple[str, float, str, int | None]:
        last = turns[-1]
        if last.passed:
            return "passed", 1.0, f"passed on turn {last.turn}", last.turn
        return "failed", 0.0, f"failed after {plural(last.turn, 'turn')}", None


def _node_of(item: Check, step: Step) -> str:
    for i, candidate in enumerate(step.checks):
        if candidate is item:
            return f"{step.node}.checks[{i}]"
        for j, member in enumerate(candidate.or_ or ()):
            if member is item:
                return f"{step.node}.checks[{i}].or[{j}]"
    return step.node


class _Scripted:
    """Seed 001 and `turns`: every input sent in order; grades per turn and/or on the last reply."""

    def __init__(self, ev: Eval, index: int, defaults: Defaults):
        self.ev = ev
        node = f"evals[{index}]"
        self.threshold = ev.pass_threshold if ev.pass_threshold is not None else defaults.pass_threshold
        if self.threshold is None:
            self.threshold = 1.0
        self.aggregation = ev.aggregation or "mean"
        self.stop_on_failure = ev.on_turn_failure == "stop"
        if ev.turns is not None:
            self.steps = [
                Step(turn.input, turn.checks or [], f"{node}.turns[{i}]") for i, turn in enumerate(ev.turns)
            ]
        elif ev.input is not None:
            inputs = [ev.input] if isinstance(ev.input, str) else ev.input
            truths = ev.ground_truth if isinstance(ev.ground_truth, list) else [None] * len(inputs)
            self.steps = [
                Step(
                    text,
                    [],
                    f"{node}.input[{i}]" if isinstance(ev.input, list) else f"{node}.input",
                    ground_truth=truth,
                )
                for i, (text, truth) in enumerate(zip(inputs, truths, strict=True))
            ]
        else:
            self.steps = [Step(None, [], f"{node}.messages")]
        last = self.steps[-1]
        last.checks = [*last.checks, *(ev.checks or [])]
        if isinstance(ev.ground_truth, str):
            last.grade_conversation = ev.ground_truth

    def first(self) -> Step:
        return self.steps[0]

    def next(self, step: Step, turn: TurnRecord) -> Step | None:
        if self.stop_on_failure and turn.passed is False:
            return None
        return self.steps[turn.turn] if turn.turn < len(self.steps) else None

    def units(self, turns: list[TurnRecord]) -> list[tuple[float, bool]]:
        """Every graded turn, as (score, passed): its grade and its checks together, so turns_total counts
        turns. A check that passed its own threshold counts 1 (a judge's 0.9 over a 0.5 threshold must not
        fail the conversation); a failed one keeps its score as partial credit."""
        units = []
        for turn in turns:
            scores = [turn.grade.score] if turn.grade is not None else []
            scores += [
                1.0 if check.passed else min(1.0, max(0.0, check.score or 0.0)) for check in turn.checks
            ]
            if scores:
                passed = (turn.grade is None or turn.grade.passed) and all(c.passed for c in turn.checks)
                units.append((sum(scores) / len(scores), passed))
        return units

    def verdict(self, turns: list[TurnRecord]) -> tuple[str, float, str, int | None]:
        units = self.units(turns)
        scores = [score for score, _ in units]
        score = {"mean": lambda s: sum(s) / len(s), "min": min, "max": max}[self.aggregation](scores)
        passed = sum(1 for _, ok in units if ok)
        stopped = len(turns) < len(self.steps)
        note = f"{passed}/{len(units)} passed" + (f", stopped after turn {len(turns)}" if stopped else "")
        if score >= self.threshold and not stopped:
            return "passed", score, f"passed: {note}", None
        return "failed", score, f"failed: {note} (score {score:.2f}, needs {self.threshold:g})", None


class _Simulated:
    """@agtlantis/eval: the first prompt, then scripted follow-ups, then a simulated user, until a stop
    condition holds or max_turns is reached. `checks` grade the final reply."""

    def __init__(self, ev: Eval, index: int, ctx: EngineContext, prior: Sequence[TurnRecord]):
        self.ev = ev
        self.sim = ev.simulate
        self.ctx = ctx
        self.prior = prior
        self.node = f"evals[{index}]"
        self.live_messages: list[dict] = []  # the conversation so far, without system prompt or history
        self.scripted: list[str] = []
        self.forever: str | None = None
        for follow_up in self.sim.follow_ups:
            if follow_up.turns == "inf":
                self.forever = follow_up.input
            else:
                self.scripted += [follow_up.input] * follow_up.turns

    def _step(self, prompt: str, number: int, **extra) -> Step:
        return Step(prompt, [], f"{self.node}.simulate" if number > 1 else self.node, simulated=self, **extra)

    def first(self) -> Step:
        return self._step(self.ev.prompt, 1)

    def has_input(self, turns_done: int) -> bool:
        """Is there a user message for turn turns_done + 1?"""
        return turns_done - 1 < len(self.scripted) or self.forever is not None or self.sim.persona is not None

    def next(self, step: Step, turn: TurnRecord) -> Step | None:
        if turn.termination:
            return None
        number = turn.turn + 1
        if turn.turn - 1 < len(self.scripted):
            return self._step(self.scripted[turn.turn - 1], number)
        if self.forever is not None:
            return self._step(self.forever, number)
        if number <= len(self.prior):  # resuming: the stored turn says what the simulated user said
            return self._step(self.prior[number - 1].prompt, number)
        return self._simulated_user(number, turn)

    def _simulated_user(self, number: int, turn: TurnRecord) -> Step:
        if self.sim.model:
            client, model = (
                self.ctx.resolve(self.sim.model) if self.ctx.resolve else (self.ctx.judge, self.sim.model)
            )
        else:
            client, model = self.ctx.judge, self.ctx.judge_model
        sent = simulator_messages(persona_for(self.sim.persona, number), self.live_messages)
        completion = client.complete(model, sent)
        return self._step(
            clean_reply(completion.text),
            number,
            user_usage=completion.usage,
            user_cost=completion.cost,
            user_call=SimulatedUserCall(model=model, messages=sent, reply=completion.text),
        )

    def terminate(
        self, position: int, reply: Reply, judge: JudgeContext
    ) -> tuple[str | None, ConditionResult | None]:
        """Checked after each reply: why the conversation ends here (None to go on), and the stop condition
        as evaluated."""
        condition = None
        if self.sim.stop_when is not None:
            condition, decided = evaluate_condition(self.sim.stop_when, position, reply, judge)
            if condition.met:
                return f"condition met: {decided}", condition
        if position >= self.sim.max_turns:
            return f"max turns ({self.sim.max_turns})", condition
        if not self.has_input(position):
            return "inputs exhausted", condition
        return None, condition

    def final_checks(self) -> list[Check]:
        return self.ev.checks or []

    def verdict(self, turns: list[TurnRecord]) -> tuple[str, float, str, int | None]:
        last = turns[-1]
        reason = last.termination or ""
        if reason.startswith("condition met"):
            outcome = self.sim.on_condition_met
        elif reason.startswith("max turns"):
            outcome = self.sim.on_max_turns
        else:
            outcome = "fail"  # ran out of inputs with no simulated user to continue
        checks_ok = all(check.passed for check in last.checks)
        passed = outcome == "pass" and checks_ok
        why = reason + ("" if checks_ok else "; final checks failed")
        return (
            ("passed" if passed else "failed"),
            (1.0 if passed else 0.0),
            f"{'passed' if passed else 'failed'} after {plural(last.turn, 'turn')}: {why}",
            None,
        )


def run_eval(
    ev: Eval,
    index: int,
    eval_id: str,
    ctx: EngineContext,
    prior: Sequence[TurnRecord] = (),
    on_turn: Callable[[TurnRecord], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    on_wait: Callable[[RetryWait], None] | None = None,
    given: tuple[str, list[dict]] | None = None,
) -> EvalResult:
    """`given`: (system message, given history) as engine.history.build_history made them once, when the
    conversation was stored (the workers); None builds them here from the eval and ctx.files (the CLI)."""
    # Model calls that wait to retry say so through on_wait, and stop waiting once should_stop() says so.
    with retry_hooks(on_wait, should_stop):
        return _run_eval(ev, index, eval_id, ctx, prior, on_turn, should_stop, given)


def _run_eval(
    ev: Eval,
    index: int,
    eval_id: str,
    ctx: EngineContext,
    prior: Sequence[TurnRecord],
    on_turn: Callable[[TurnRecord], None] | None,
    should_stop: Callable[[], bool] | None,
    given: tuple[str, list[dict]] | None,
) -> EvalResult:
    if given is None:
        messages, history = build_history(ctx.system, ev.messages, ctx.files)
    else:
        system, history = given
        messages = given_messages(system, history)
    if ev.style == "simulated":
        driver = _Simulated(ev, index, ctx, prior)
    elif ev.style == "tree":
        driver = _Tree(ev, index)
    else:
        driver = _Scripted(ev, index, ctx.defaults)
    turns: list[TurnRecord] = []

    def finish(
        status: str, verdict: str, *, score=None, passed_on: int | None = None, error=None
    ) -> EvalResult:
        multi = (
            len(turns) > 1
            or ev.simulate is not None  # a multi-turn test case, even when a condition ends it on turn 1
            or (followup_depth(ev.checks or []) > 0)
            or (isinstance(driver, _Scripted) and len(driver.steps) > 1)
        )
        units = driver.units(turns) if isinstance(driver, _Scripted) and turns else None
        return EvalResult(
            index=index,
            id=eval_id,
            kind="multi-turn" if multi else "single-turn",
            conversation=ev.style,
            prompt=ev.first_text,
            status=status,
            score=score,
            passed_on_turn=passed_on,
            verdict=verdict,
            error=error,
            history=history,
            termination=_termination(ev, turns, status),
            turns=list(turns),
            turns_passed=sum(1 for _, ok in units if ok) if units is not None else None,
            turns_total=len(units) if units is not None else None,
            per_turn_grades=[turn.grade for turn in turns if turn.grade is not None],
            totals=Totals.of(turns),
        )

    given = len(messages)
    step: Step | None = driver.first()
    while step is not None:
        position = len(turns) + 1
        if position <= len(prior):
            turn = prior[position - 1]
            _check_resume(turn, step, position)
        else:
            if should_stop is not None and should_stop():
                return finish("cancelled", f"cancelled after {plural(len(turns), 'turn')}")
            try:
                turn = _play_turn(ctx, messages, step, position, ev, given)
            except EndpointError as exc:
                return finish("error", f"error on turn {position}: {exc}", error=str(exc))
            except RetryStopped:
                return finish("cancelled", f"cancelled after {plural(len(turns), 'turn')}")
            if on_turn is not None:
                try:
                    on_turn(turn)
                except StopConversation:
                    return finish("cancelled", f"stopped after {plural(len(turns), 'turn')}")
        turns.append(turn)
        if step.prompt is not None:
            messages.append({"role": "user", "content": turn.prompt})
        messages.append({"role": "assistant", "content": turn.response})
        if isinstance(driver, _Simulated):
            driver.live_messages = messages[given:]
        try:
            step = driver.next(step, turn)  # the simulated user writes its message here
        except EndpointError as exc:
            return finish("error", f"error on turn {position + 1} (simulated user): {exc}", error=str(exc))
        except RetryStopped:
            return finish("cancelled", f"cancelled after {plural(len(turns), 'turn')}")
    status, score, verdict, passed_on = driver.verdict(turns)
    return finish(status, verdict, score=score, passed_on=passed_on)


def _termination(ev: Eval, turns: list[TurnRecord], status: str) -> str | None:
    """Why a simulated conversation ended; other kinds end when their script does, so they have none."""
    if ev.style != "simulated":
        return None
    if status == "error":
        return "error"
    return turns[-1].termination if turns else None


def _check_resume(turn: TurnRecord, step: Step, position: int) -> None:
    if turn.prompt != (step.prompt or ""):
        raise ResumeMismatch(f"stored turn {position} was {turn.prompt!r}, the suite says {step.prompt!r}")
    expected = [item.kind for item in step.checks if item.kind]
    if step.simulated is not None and turn.termination:
        expected = [item.kind for item in step.simulated.final_checks() if item.kind]
    if turn.node != step.node or [result.type for result in turn.checks] != expected:
        raise ResumeMismatch(f"stored turn {position} was graded against other checks than the suite has")


def _play_turn(
    ctx: EngineContext, messages: list[dict], step: Step, position: int, ev: Eval, given: int
) -> TurnRecord:
    sent = (
        [*messages, {"role": "user", "content": step.prompt}] if step.prompt is not None else list(messages)
    )
    completion = ctx.agent.complete(ctx.model, sent)
    judge = JudgeContext(ctx.judge, ctx.judge_model, ctx.resolve, ctx.judge_temperature)
    conversation = [*sent, {"role": "assistant", "content": completion.text}]
    reply = Reply(
        text=completion.text,
        completion_tokens=None if completion.usage.estimated else completion.usage.completion_tokens,
        conversation=conversation,
    )
    results = evaluate_level(step.checks, reply, judge)
    termination = condition = None
    if step.simulated is not None:
        termination, condition = step.simulated.terminate(position, reply, judge)
        if termination:  # the conversation ends here, so this is the final reply the checks grade
            results = evaluate_level(step.simulated.final_checks(), reply, judge)
    turn_grade = _grade(ctx, ev, step, position, completion.text, conversation, given, judge)
    passed = all(result.passed for result in results) and (turn_grade is None or turn_grade.passed)
    return TurnRecord(
        turn=position,
        node=step.node,
        prompt=step.prompt or "",
        response=completion.text,
        usage=completion.usage,
        cost=completion.cost,
        latency_ms=completion.latency_ms,
        checks=results,
        passed=passed if (results or turn_grade is not None) else None,
        followup_reason=step.reason,
        grade=turn_grade,
        termination=termination,
        user_usage=step.user_usage,
        user_cost=step.user_cost,
        judge_usage=judge.spent,
        judge_cost=judge.cost,
        stop_when=condition,
        simulated_user=step.user_call,
    )


def _grade(
    ctx, ev: Eval, step: Step, position: int, text: str, conversation, given: int, judge
) -> TurnGrade | None:
    truth = step.ground_truth if step.ground_truth is not None else step.grade_conversation
    if truth is None:
        return None
    defaults = ctx.defaults
    grader = ev.grader or defaults.grader or "exact_match"
    extractor = ev.extractor or defaults.extractor
    if step.ground_truth is not None:
        replies, input_text = [text], step.prompt or ""
    else:  # one grade for the whole conversation: the extractor sees every live reply, not the given ones
        live = conversation[given:]
        replies = [m["content"] for m in live if m["role"] == "assistant"]
        input_text = "\n".join(m["content"] for m in live if m["role"] == "user")
    try:
        submission = extract(extractor, replies)
    except RegexFailure as exc:  # the extractor's pattern could not run: this grade fails, the run goes on
        return TurnGrade(
            turn=position,
            score=0.0,
            passed=False,
            rationale=f"extractor: {exc}",
            submission="",
            ground_truth=truth,
            grader=grader,
        )
    threshold = ev.pass_threshold if ev.pass_threshold is not None else defaults.pass_threshold
    return grade(
        grader,
        turn=position,
        submission=submission,
        ground_truth=truth,
        threshold=1.0 if threshold is None else threshold,
        judge=judge,
        rubric=ev.rubric or defaults.rubric,
        input_text=input_text,
        conversation=conversation,
    )
