"""Grading a played reply into its TurnRecord, and a conversation under its named graders.

`ctx` is the conversation's engine.conversation.EngineContext: the judge, the suite's defaults, where code
checks run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .checks import JudgeContext, Reply, calls_out, evaluate_level
from .clients import Completion, EndpointError
from .codegrade.run import CodeScope
from .conditions import evaluate_condition
from .drivers import Driver, Step, TurnScores, Verdict
from .drivers.scripted import AGGREGATIONS
from .grading import extract, grade, grade_named
from .meter import LimitReached
from .outcomes import Status
from .patterns import RegexFailure
from .results import GraderResult, SimulatedUserCall, ToolCall, ToolRound, TurnGrade, TurnRecord, Usage
from .schema import Eval, WeightedPassRule
from .text import SCORE_EPSILON, against, turns_passed
from .tools import carried_out
from .transcript import tool_calls_in


@dataclass(frozen=True)
class UserTurn:
    """What the simulated user spent writing a turn's prompt, and what it was sent."""

    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    call: SimulatedUserCall | None = None


def turn_record(step: Step, position: int, completion: Completion, user: UserTurn, **graded) -> TurnRecord:
    """A turn's record: what was sent and answered, and what the simulated user spent; `graded` adds how the
    reply was graded, or why it was not."""
    return TurnRecord(
        turn=position,
        node=step.node,
        prompt=step.prompt or "",
        response=completion.text,
        usage=completion.usage,
        cost=completion.cost,
        latency_ms=completion.latency_ms,
        followup_reason=step.reason,
        user_usage=user.usage,
        user_cost=user.cost,
        simulated_user=user.call,
        **graded,
    )


def turn_passed(checks, grade: TurnGrade | None, grades) -> bool | None:
    """A turn passes when its checks, its ground-truth grade and its named graders' grades all do; None when
    nothing graded it. Also how a reviewer's overrides recount a turn (engine.overrides)."""
    if not (checks or grade is not None or grades):
        return None
    return (
        all(result.passed for result in checks)
        and (grade is None or grade.passed)
        and all(item.passed for item in grades)
    )


def may_call_model(ctx, ev: Eval, step: Step, graders: dict) -> bool:
    """Whether grading this step's reply may call a model or run a program (a check type that calls out, a
    stop condition, a named grader, an llm_judge ground-truth grader): on an event loop it goes to a thread."""
    if step.stop_when is not None or graders:
        return True
    if (step.ground_truth is not None or step.grade_conversation is not None) and (
        (ev.grader or ctx.defaults.grader) == "llm_judge"
    ):
        return True
    return any(calls_out(item) for item in (*step.checks, *step.final_checks))


def _judge_context(ctx, code: CodeScope | None = None) -> JudgeContext:
    return JudgeContext(
        ctx.judge,
        ctx.judge_model,
        ctx.resolve,
        ctx.judge_temperature,
        code=code,
        rubric_prompt=ctx.defaults.rubric_prompt,
        rubric_system=ctx.defaults.judge_system,
    )


class GradingFailed(EndpointError):
    """A judge (or another grader's endpoint) failed while grading a reply: the reply, ungraded, with what it
    and the judge's calls so far cost, for the conversation to keep as it ends in error."""

    def __init__(self, message: str, turn: TurnRecord) -> None:
        super().__init__(message)
        self.turn = turn


def graded_turn(
    ctx,
    driver: Driver,
    step: Step,
    position: int,
    ev: Eval,
    given: int,
    user: UserTurn,
    graders: dict,
    sent: list[dict],
    completion: Completion,
    code: CodeScope,
    rounds: Sequence[ToolRound] = (),
    earlier: Sequence[TurnRecord] = (),
) -> TurnRecord:
    """The reply graded into its turn record: the stop condition, the checks, the ground-truth grades.
    `sent`: the conversation up to the reply, this turn's tool exchange included; `rounds`: that exchange;
    `earlier`: the conversation's turns before this one."""
    code.current = {"turn": position, "node": step.node, "prompt": step.prompt or ""}
    if step.ground_truth is not None:
        code.expected = step.ground_truth
    judge = _judge_context(ctx, code)
    conversation = [*sent, {"role": "assistant", "content": completion.text}]
    calls = carried_out(rounds)
    reply = Reply(
        text=completion.text,
        completion_tokens=None if completion.usage.estimated else completion.usage.completion_tokens,
        conversation=conversation,
        tool_calls=calls,
        conversation_calls=conversation_calls(sent[:given], earlier) + calls,
        earlier=earlier,
    )
    condition = decided = None
    try:
        if step.stop_when is not None:
            condition, decided = evaluate_condition(step.stop_when, position, reply, judge)
        ending = driver.ending(step, position, condition, decided)
        # A reply that ends the conversation is its final one: the final checks grade it.
        results = evaluate_level(step.final_checks if ending else step.checks, reply, judge)
        turn_grade = _grade(
            ctx, ev, step, position, completion.text, conversation, given, judge, reply.tool_calls
        )
        grades = _turn_grades(ctx, ev, graders, step, position, completion.text, conversation, judge, reply)
    except (EndpointError, LimitReached) as exc:
        # No verdict, but the reply was given and paid for, and the judge's calls so far too; a run's cost limit
        # reached between two judges' calls stops the grading the same way (the conversation says why).
        ungraded = turn_record(
            step, position, completion, user, passed=None, judge_usage=judge.spent, judge_cost=judge.cost,
            tool_rounds=list(rounds),
        )  # fmt: skip
        raise GradingFailed(str(exc), ungraded) from exc
    return turn_record(
        step,
        position,
        completion,
        user,
        checks=results,
        passed=turn_passed(results, turn_grade, grades),
        grade=turn_grade,
        grades=grades,
        termination=ending.text if ending else None,
        termination_kind=ending.kind if ending else None,
        termination_detail=ending.detail if ending else None,
        judge_usage=judge.spent,
        judge_cost=judge.cost,
        stop_when=condition,
        tool_rounds=list(rounds),
    )


def conversation_calls(history: list[dict], earlier: Sequence[TurnRecord]) -> list[ToolCall]:
    """The calls of a conversation before this turn: its given history's, as written, then every earlier
    turn's as recorded (the model's mistakes marked), which the messages alone cannot tell."""
    return tool_calls_in(history) + [call for turn in earlier for call in carried_out(turn.tool_rounds)]


def _grade(
    ctx, ev: Eval, step: Step, position: int, text: str, conversation, given: int, judge, calls
) -> TurnGrade | None:
    truth = step.ground_truth if step.ground_truth is not None else step.grade_conversation
    if truth is None or ctx.defaults.graders or ev.graders:  # named graders take the ground truth instead
        return None
    defaults = ctx.defaults
    grader = ev.grader or defaults.grader or "exact_match"
    extractor = ev.extractor or defaults.extractor
    if step.ground_truth is not None:
        replies, input_text = [text], step.prompt or ""
    else:  # one grade for the whole conversation: the extractor sees every live reply, not the given ones
        live = conversation[given:]
        replies = [m["content"] for m in live if m["role"] == "assistant" and not m.get("tool_calls")]
        input_text = "\n".join(m["content"] for m in live if m["role"] == "user")
        calls = tool_calls_in(live)
    try:
        submission = extract(extractor, replies, calls, conversation)
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


# --- named graders: per turn, or once for the conversation, then the eval's verdict under its pass rule ---


def code_scope(ctx, ev: Eval, eval_id: str, turns: Sequence[TurnRecord]) -> CodeScope:
    """What the eval's code checks are told besides the reply: its turns so far, its expected output."""
    expected = ev.ground_truth if isinstance(ev.ground_truth, str) else None
    return CodeScope(
        ctx.code, eval_id, list(turns), expected=expected, metadata={"tags": list(ev.tags or [])}
    )


def _per_turn(ev: Eval) -> bool:
    """Named graders grade every turn of an `input` list with a `ground_truth` list (Letta's per-turn rows);
    any other conversation once, after its last turn."""
    return isinstance(ev.ground_truth, list)


def _turn_grades(
    ctx, ev: Eval, graders: dict, step: Step, position: int, text: str, conversation, judge, reply: Reply
) -> list[TurnGrade]:
    if not graders or not _per_turn(ev) or step.ground_truth is None:
        return []
    return [
        grade_named(
            name,
            _at_turn(grader),
            turn=position,
            replies=[text],
            ground_truth=step.ground_truth,
            input_text=step.prompt or "",
            conversation=conversation,
            judge=judge,
            default_extractor=ctx.defaults.extractor,
            default_threshold=ctx.defaults.pass_threshold,
            calls=reply.tool_calls,
            conversation_calls=reply.conversation_calls,
        )  # fmt: skip
        for name, grader in graders.items()
    ]


def _at_turn(grader):
    """The grader as it marks one turn of a conversation graded turn by turn: at its `turn_threshold`, when it
    has one (Letta marks a turn passed at a score of 1 whatever line its rows pass at)."""
    if grader.turn_threshold is None:
        return grader
    return grader.model_copy(update={"threshold": grader.turn_threshold})


def with_graders(
    ctx,
    ev: Eval,
    eval_id: str,
    graders: dict,
    verdict: Verdict,
    turns: list[TurnRecord],
    messages,
    given: int,
    scored: TurnScores | None = None,
):
    """The named graders' results (the conversation graded once now, unless it was graded per turn) and the
    eval's verdict under its pass rule: it passes when the driver's verdict passed (its checks) and the
    graders pass the rule; its score is the graders' mean, or their weighted mean. `scored`: the graded
    turns' scores, which a rule `with_turns` counts beside the graders'."""
    aggregation = AGGREGATIONS[ev.aggregation or "mean"]
    by_name: dict[str, list[TurnGrade]] = {name: [] for name in graders}
    if _per_turn(ev):
        for turn in turns:
            for item in turn.grades:
                by_name.setdefault(item.name, []).append(item)
    else:
        live = messages[given:]
        replies = [m["content"] for m in live if m["role"] == "assistant" and not m.get("tool_calls")]
        input_text = "\n".join(str(m["content"]) for m in live if m["role"] == "user")
        calls = [call for turn in turns for call in carried_out(turn.tool_rounds)]  # as recorded
        code = code_scope(ctx, ev, eval_id, turns[:-1])
        code.current = turns[-1].model_dump(mode="json")
        judge = _judge_context(ctx, code)
        truth = ev.ground_truth if isinstance(ev.ground_truth, str) else None
        try:
            for name, grader in graders.items():
                by_name[name].append(
                    grade_named(
                        name,
                        grader,
                        turn=turns[-1].turn,
                        replies=replies,
                        ground_truth=truth,
                        input_text=input_text,
                        conversation=list(messages),
                        judge=judge,
                        default_extractor=ctx.defaults.extractor,
                        default_threshold=ctx.defaults.pass_threshold,
                        calls=calls,
                        conversation_calls=tool_calls_in(messages[:given]) + calls,
                    )  # fmt: skip
                )
        finally:
            # The conversation's grades are kept with its results (the turns are stored already, written
            # once); what the graders spent counts even when one failed or the cost limit stopped them.
            _charge_last(turns, judge)
    results = []
    for name, grader in graders.items():
        items = by_name.get(name, [])
        # The grader's own line, not its grades': a turn's may be its turn_threshold.
        threshold = grader.threshold if grader.threshold is not None else ctx.defaults.pass_threshold
        threshold = 1.0 if threshold is None else threshold
        score = aggregation([item.score for item in items]) if items else None
        results.append(
            GraderResult(
                name=name,
                kind=grader.kind,
                score=score,
                threshold=threshold,
                passed=None if score is None else score >= threshold - SCORE_EPSILON,
                turns_graded=len(items),
                grades=[] if _per_turn(ev) else items,
            )  # fmt: skip
        )
    rule = ev.pass_rule if ev.pass_rule is not None else ctx.defaults.pass_rule
    return graded_verdict(rule, results, verdict, turns, scored), results


def graded_verdict(
    rule,
    results: list[GraderResult],
    verdict: Verdict,
    turns: Sequence[TurnRecord] = (),
    turn_scores: TurnScores | None = None,
) -> Verdict:
    """The eval's verdict under its pass rule, from its named graders' results and its driver's verdict (its
    checks): it passes when both do; its score is the graders' mean, or their weighted mean. Turns the
    graders graded one by one are counted in it as their marks say, since a pass rule may pass an eval
    whose turns failed (a reward with no pass line). A weighted rule `with_turns` instead counts the
    weighted mean as one more score beside the graded turns' (`turn_scores`).

    It reads "weighted score 0.71 < 0.75: quality 0.80 ≥ 0.70, ascii_only 0.50 < 1.00; 1 of 2 turns
    passed", "1 of 2 graders passed: …", or, with one grader, its score alone: each grader's score beside
    its threshold."""
    scored = [item for item in results if item.score is not None]
    if isinstance(rule, WeightedPassRule) and rule.with_turns and turn_scores is not None:
        return _with_turns(rule, results, verdict, turn_scores)
    if isinstance(rule, WeightedPassRule):
        weights = rule.weighted_average
        total = sum(weights.values())
        score = sum(weights[item.name] * item.score for item in scored if item.name in weights) / total
        ok = score >= rule.threshold - SCORE_EPSILON
        how = against(score, rule.threshold, "weighted score")
        failed = [item.name for item in results if item.name in rule.required and not item.passed]
        if failed:
            ok = False
            how += f", required {', '.join(failed)} failed"
    else:
        score = sum(item.score for item in scored) / len(scored) if scored else 0.0
        passes = [bool(item.passed) for item in results]
        ok = all(passes) if rule == "all" else any(passes)
        how = _graders_passed(sum(passes), len(passes), rule, ok)
    checks_passed = verdict.outcome == Status.PASSED
    status = Status.PASSED if ok and checks_passed else Status.FAILED
    detail = _grader_scores(results)
    reason = f"{how}: {detail}" if how and detail else how or detail
    marks = [turn.passed for turn in turns if turn.grades and turn.passed is not None]
    if marks:
        reason += f"; {turns_passed(sum(1 for mark in marks if mark), len(marks))}"
    if not checks_passed and ok:
        reason += f"; checks: {verdict.reason}"
    text = reason if verdict.text == verdict.reason else f"{reason}; {verdict.text}"
    return Verdict(status, score, reason, text, verdict.passed_on_turn if status == Status.PASSED else None)


def _graders_passed(passed: int, total: int, rule, ok: bool) -> str:
    """How many graders passed, as a rule of all or any counts them; nothing for one grader, whose score
    beside its threshold says it."""
    if total == 1:
        return ""
    if rule == "all":
        return "every grader passed" if passed == total else f"{passed} of {total} graders passed"
    return f"{passed} of {total} graders passed, " + ("one is enough" if ok else "needs one")


def _grader_scores(results: list[GraderResult]) -> str:
    """Each grader's score beside its threshold: "quality 0.80 ≥ 0.70, ascii_only 0.50 < 1.00"."""
    return ", ".join(
        against(item.score, item.threshold, item.name) for item in results if item.score is not None
    )


def _with_turns(
    rule: WeightedPassRule, results: list[GraderResult], verdict: Verdict, turns: TurnScores
) -> Verdict:
    """AgentV's conversation score: every graded turn's score and the graders' weighted mean (0 when a
    required grader failed, as AgentV zeroes a score whose required grader failed), combined by the eval's
    aggregation, pass at the rule's threshold; a conversation stopped at a failed turn fails whatever its
    score."""
    weights = rule.weighted_average
    graded = sum(weights[item.name] * (item.score or 0.0) for item in results if item.name in weights)
    graded /= sum(weights.values())
    failed = [item.name for item in results if item.name in rule.required and not item.passed]
    if failed:
        graded = 0.0
    score = AGGREGATIONS[turns.aggregation]([*turns.scores, graded])
    ok = score >= rule.threshold - SCORE_EPSILON and not turns.stopped
    status = Status.PASSED if ok else Status.FAILED
    parts = ", ".join(f"{value:.2f}" for value in turns.scores)
    how = (
        f"{against(score, rule.threshold)}, the {turns.aggregation} of "
        + (f"the turns' {parts} and " if parts else "")
        + f"the graders' {graded:.2f}"
    )
    if failed:
        how += f", required {', '.join(failed)} failed"
    if turns.stopped:
        how += ", stopped at a failed turn"
    detail = _grader_scores(results)
    reason = f"{how}: {detail}" if detail else how
    return Verdict(status, score, reason, reason, verdict.passed_on_turn if ok else None)


def _charge_last(turns: list[TurnRecord], judge: JudgeContext) -> None:
    """Graders' judge calls after the last turn count in the eval's judge totals (Totals.of sums turns'), so
    they go on the last turn's record as the conversation's results are built."""
    if judge.spent.total_tokens or judge.cost:
        last = turns[-1]
        turns[-1] = last.model_copy(
            update={"judge_usage": last.judge_usage + judge.spent, "judge_cost": last.judge_cost + judge.cost}
        )
