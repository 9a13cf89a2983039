"""Running one conversation: the heart of the engine.

`run_eval` plays one eval against a chat client and reports each turn through `on_turn` as soon as it is
graded. It can resume: given the turns already stored (`prior`), it replays them without calling the
model and continues after the last one, so a redelivered task never repeats or duplicates a turn.

Every kind of conversation is a loop of the same step: choose the next user message, get the reply, grade
it, decide whether to go on. Conversation trees (seed 000) choose the next message from the failed checks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .checks import JudgeContext, Reply, choose_followup, evaluate_level
from .clients import ChatClient, EndpointError
from .results import EvalResult, Totals, TurnRecord
from .schema import Check, Eval, followup_depth


class StopConversation(Exception):
    """Raised by an on_turn callback or should_stop check to end the conversation without a verdict."""


class ResumeMismatch(Exception):
    """Stored turns do not fit the suite version they claim to come from."""


@dataclass
class EngineContext:
    agent: ChatClient
    model: str
    judge: ChatClient
    judge_model: str
    system: str | None = None
    # Resolves "endpoint/model" references that checks name themselves (e.g. llm_judge.model).
    resolve: Callable[[str], tuple[ChatClient, str]] | None = None


@dataclass
class _Level:
    prompt: str
    items: list[Check]
    node: str
    reason: str | None


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def run_eval(
    ev: Eval,
    index: int,
    eval_id: str,
    ctx: EngineContext,
    prior: Sequence[TurnRecord] = (),
    on_turn: Callable[[TurnRecord], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> EvalResult:
    messages: list[dict] = [{"role": "system", "content": ctx.system}] if ctx.system else []
    turns: list[TurnRecord] = []
    level = _Level(ev.prompt, ev.checks, f"evals[{index}]", None)

    def finish(
        status: str, verdict: str, *, passed_on: int | None = None, error: str | None = None
    ) -> EvalResult:
        score = None if status in ("error", "cancelled") else (1.0 if status == "passed" else 0.0)
        return EvalResult(
            index=index,
            id=eval_id,
            kind="multi-turn" if len(turns) > 1 or followup_depth(ev.checks) > 0 else "single-turn",
            prompt=ev.prompt,
            status=status,
            score=score,
            passed_on_turn=passed_on,
            verdict=verdict,
            error=error,
            turns=list(turns),
            totals=Totals.of(turns),
        )

    while True:
        position = len(turns) + 1
        if position <= len(prior):
            turn = prior[position - 1]
            if turn.prompt != level.prompt:
                raise ResumeMismatch(
                    f"stored turn {position} was {turn.prompt!r}, the suite says {level.prompt!r}"
                )
            expected = [item.kind for item in level.items if item.kind]
            if turn.node != level.node or [result.type for result in turn.checks] != expected:
                raise ResumeMismatch(
                    f"stored turn {position} was graded against other checks than the suite has"
                )
        else:
            if should_stop is not None and should_stop():
                return finish("cancelled", f"cancelled after {_plural(len(turns), 'turn')}")
            try:
                turn = _play_turn(ctx, messages, level, position)
            except EndpointError as exc:
                return finish("error", f"error on turn {position}: {exc}", error=str(exc))
            if on_turn is not None:
                try:
                    on_turn(turn)
                except StopConversation:
                    return finish("cancelled", f"stopped after {_plural(len(turns), 'turn')}")
        turns.append(turn)
        messages += [
            {"role": "user", "content": turn.prompt},
            {"role": "assistant", "content": turn.response},
        ]
        if turn.passed:
            return finish("passed", f"passed on turn {position}", passed_on=position)
        followup = choose_followup(level.items, turn.checks)
        if followup is None:
            return finish("failed", f"failed after {_plural(position, 'turn')}")
        item, reason = followup
        level = _Level(item.prompt, item.checks, _node_of(item, level), f"{reason} on turn {position}")


def _node_of(item: Check, level: _Level) -> str:
    for i, candidate in enumerate(level.items):
        if candidate is item:
            return f"{level.node}.checks[{i}]"
        for j, member in enumerate(candidate.or_ or ()):
            if member is item:
                return f"{level.node}.checks[{i}].or[{j}]"
    return level.node


def _play_turn(ctx: EngineContext, messages: list[dict], level: _Level, position: int) -> TurnRecord:
    sent = [*messages, {"role": "user", "content": level.prompt}]
    completion = ctx.agent.complete(ctx.model, sent)
    judge = JudgeContext(ctx.judge, ctx.judge_model, ctx.resolve)
    reply = Reply(
        text=completion.text,
        completion_tokens=None if completion.usage.estimated else completion.usage.completion_tokens,
        conversation=[*sent, {"role": "assistant", "content": completion.text}],
    )
    results = evaluate_level(level.items, reply, judge)
    return TurnRecord(
        turn=position,
        node=level.node,
        prompt=level.prompt,
        response=completion.text,
        usage=completion.usage,
        cost=completion.cost,
        latency_ms=completion.latency_ms,
        checks=results,
        passed=all(result.passed for result in results),
        followup_reason=level.reason,
        judge_usage=judge.spent,
        judge_cost=judge.cost,
    )
