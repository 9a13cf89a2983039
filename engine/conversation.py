"""Running one conversation: the heart of the engine.

`run_eval` plays one eval against a chat client and reports each turn through `on_turn` as soon as it is
graded, and each wait before a model call is retried through `on_wait`. It can resume: given the turns
already stored (`prior`), it replays them without calling the model and continues after the last one, so a
redelivered task never repeats or duplicates a turn.

Every style of conversation is the same loop over its driver (engine.drivers): the driver plans a turn (a
Step: the user message and what grades the reply), this loop makes the model calls (the simulated user's
when a Step asks for one, the model's reply, the judges') and grades the reply into a TurnRecord
(engine.turn_grading), the driver says whether the reply ends the conversation and, from the records
alone, what comes next. A given history (`messages`) can precede any style.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from . import cache
from .clients import ChatClient, Completion, EndpointError
from .clients.settings import Refusals
from .codegrade.run import CodeRunner, CodeScope
from .conversation_io import INLINE, IO, THREADED, Stopping, answer, run_inline
from .drivers import Defaults, Driver, Step, Verdict, driver_for
from .history import build_history, given_messages
from .meter import Limit, LimitReached, Meter, metered, metering
from .outcomes import NOT_STARTED, Status, TerminationKind
from .replies import (
    DEFAULT_RULE,
    IncompleteRule,
    called,
    graded_text,
    incomplete,
    incomplete_verdict,
    unfinished,
)
from .results import EvalResult, GraderResult, SimulatedUserCall, ToolRound, Totals, TurnRecord, Usage
from .retries import RetryStopped, RetryWait, retry_hooks
from .schema import Eval
from .simulate import clean_reply
from .text import plural
from .tools import CallScope, Toolbox, exchange_messages, round_messages, spent, unanswered
from .transcript import format_transcript
from .turn_grading import (
    GradingFailed,
    UserTurn,
    code_scope,
    graded_turn,
    may_call_model,
    turn_record,
    with_graders,
)

__all__ = ["Defaults", "EngineContext", "ResumeMismatch", "StopConversation", "run_eval", "run_eval_async"]


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
    files: Mapping[str, str] = field(default_factory=dict)
    defaults: Defaults = field(default_factory=Defaults)
    judge_temperature: float | None = None
    # Where code checks run; None where code graders are not allowed (they end their conversation in error).
    code: CodeRunner | None = None
    # The simulated user's client and resolver, which send `user_settings`; None: the judge's.
    user: ChatClient | None = None
    resolve_user: Callable[[str], tuple[ChatClient, str]] | None = None
    # The first setting the endpoint refused (engine.clients.settings): no more conversations start.
    refusals: Refusals | None = None


def run_eval(
    ev: Eval,
    index: int,
    eval_id: str,
    ctx: EngineContext,
    prior: Sequence[TurnRecord] = (),
    on_turn: Callable[[TurnRecord], None] | None = None,
    should_stop: Callable[[], bool | str] | None = None,
    on_wait: Callable[[RetryWait], None] | None = None,
    given: tuple[str, list[dict]] | None = None,
    replay: Sequence[TurnRecord] | None = None,
    over_limit: Limit | None = None,
) -> EvalResult:
    """`given`: (system message, given history) as engine.history.build_history made them once, when the
    conversation was stored (the workers); None builds them here from the eval and ctx.files (the CLI).

    `over_limit`: the run's cost limit, asked before each call that grades a turn (a judge's, an embedding's)
    with what the turn has spent so far (engine.meter): false grades on; true, or the limit in words, stops
    the conversation there as `should_stop` does, its turn kept ungraded with what it cost.

    `replay`: re-grade a conversation another run stored. Its replies (and a simulated user's messages) are
    taken from those turns instead of calling the model, and graded afresh; only judges are called. When
    the eval would send a message the stored conversation did not (a tree whose edited checks choose
    another follow-up, a changed follow-up, a simulated user asked otherwise, a turn past its end), or ends
    for want of a message where the stored conversation went on (a removed follow-up), it ends in error,
    "diverged at turn N: needs a new run", with `diverged_at` N, never graded on turns it would not have
    had."""
    # Model calls that wait to retry say so through on_wait, and stop waiting once should_stop() says so.
    with retry_hooks(on_wait, should_stop):
        return run_inline(
            _run_eval(ev, index, eval_id, ctx, prior, on_turn, should_stop, given, replay, INLINE, over_limit)
        )


async def run_eval_async(
    ev: Eval,
    index: int,
    eval_id: str,
    ctx: EngineContext,
    prior: Sequence[TurnRecord] = (),
    on_turn: Callable[[TurnRecord], None | Awaitable[None]] | None = None,
    should_stop: Callable[[], bool | str | Awaitable[bool | str]] | None = None,
    on_wait: Callable[[RetryWait], None] | None = None,
    given: tuple[str, list[dict]] | None = None,
    replay: Sequence[TurnRecord] | None = None,
    over_limit: Limit | None = None,
) -> EvalResult:
    """run_eval on an event loop, with other conversations: the model's replies are awaited (a client with
    `acomplete`), and anything that may call a model while grading (judges, semantic checks, stop
    conditions, named graders, the simulated user) runs in a thread, so it never holds the loop.

    `should_stop` is asked before each turn that calls the model: false plays on, true stops the conversation
    ("cancelled after 2 turns"), and a reason in words stops it saying why ("stopped after 2 turns: cost limit
    $5.00 reached"). `on_turn` and `should_stop` may be coroutine functions (the workers store turns and ask whether the run
    goes on in a thread of their own, runs.worker.loop). A wait before a retry checks between its slices, where
    nothing can be awaited: there an asynchronous `should_stop` is asked in the background and its last
    answer holds. `on_wait` is called on the loop, so it must not block; `over_limit` in a grading thread, so
    it must not wait on the loop."""
    stopping = Stopping(should_stop) if asyncio.iscoroutinefunction(should_stop) else should_stop
    with retry_hooks(on_wait, stopping.now if isinstance(stopping, Stopping) else stopping):
        return await _run_eval(
            ev, index, eval_id, ctx, prior, on_turn, stopping, given, replay, THREADED, over_limit
        )


async def _run_eval(
    ev: Eval,
    index: int,
    eval_id: str,
    ctx: EngineContext,
    prior: Sequence[TurnRecord],
    on_turn: Callable[[TurnRecord], None | Awaitable[None]] | None,
    should_stop: Callable[[], bool | str | Awaitable[bool | str]] | None,
    given: tuple[str, list[dict]] | None,
    replay: Sequence[TurnRecord] | None,
    io: IO,
    over_limit: Limit | None = None,
) -> EvalResult:
    if given is None:
        messages, history = build_history(ctx.system, ev.messages, ctx.files)
    else:
        system, history = given
        messages = given_messages(system, history)
    driver = driver_for(ev, index, ctx.defaults)
    turns: list[TurnRecord] = []
    graders = {**ctx.defaults.graders, **(ev.graders or {})}  # merged once: every turn grades with it
    given_count = len(messages)
    sent_system = messages[0]["content"] if messages and messages[0]["role"] == "system" else ""
    rule: IncompleteRule = ev.incomplete_reply or ctx.defaults.incomplete_reply or DEFAULT_RULE
    toolbox = Toolbox.of(ctx.defaults.tools, ev.tools, ev.max_tool_rounds or ctx.defaults.max_tool_rounds)

    async def finish(verdict: Verdict, error: str | None = None, graded_turns: bool = True) -> EvalResult:
        graded: list[GraderResult] = []
        if graders and turns and graded_turns and verdict.outcome in (Status.PASSED, Status.FAILED):
            meter = Meter(over_limit)  # the graders' calls, which count on the last turn
            try:
                with metered(meter):
                    verdict, graded = await io.blocking(
                        with_graders, ctx, ev, eval_id, graders, verdict, turns, messages, given_count,
                        driver.turn_scores(turns),
                    )  # fmt: skip
            except EndpointError as exc:  # a grader's judge failed after the last turn: no verdict either
                error = str(exc)
                verdict = Verdict(Status.ERROR, None, f"error grading the conversation: {exc}")
            except LimitReached as exc:  # the run's cost limit came first: stopped, as between turns
                verdict = Verdict(Status.CANCELLED, None, _stopped_text(len(turns), exc.why))
            turns[-1] = _noted(turns[-1], meter)
        tally = driver.tally(turns) if turns else None
        termination, termination_kind, termination_detail = _ending(driver, turns, verdict.outcome)
        return EvalResult(
            index=index,
            id=eval_id,
            tags=list(ev.tags),
            kind="multi-turn" if len(turns) > 1 or driver.multi_turn else "single-turn",
            conversation=ev.style,
            prompt=ev.first_text,
            status=verdict.outcome,
            score=verdict.score,
            passed_on_turn=verdict.passed_on_turn,
            verdict=verdict.text,
            reason=verdict.reason,
            error=error,
            history=history,
            system=sent_system,
            question=format_transcript(history) if history else "",
            termination=termination,
            termination_kind=termination_kind,
            termination_detail=termination_detail,
            turns=list(turns),
            turns_passed=tally[0] if tally is not None else None,
            turns_total=tally[1] if tally is not None else None,
            per_turn_grades=[turn.grade for turn in turns if turn.grade is not None],
            graders=graded,
            totals=Totals.of(turns),
        )

    async def stopped(how: str = "cancelled", why: bool | str = True) -> EvalResult:
        return await finish(Verdict(Status.CANCELLED, None, _stopped_text(len(turns), why, how)))

    async def failed(position: int, exc: EndpointError, who: str = "") -> EvalResult:
        return await finish(
            Verdict(Status.ERROR, None, f"error on turn {position}{who}: {exc}"), error=str(exc)
        )

    async def diverged(position: int, why: str) -> EvalResult:
        message = f"diverged at turn {position}: needs a new run ({why})"
        result = await finish(Verdict(Status.ERROR, None, message), error=message)
        return result.model_copy(update={"diverged_at": position})

    given = len(messages)
    step: Step | None = driver.first()
    while step is not None:
        position = len(turns) + 1
        if position <= len(prior):
            turn = prior[position - 1]
            if step.ask is not None:  # resuming: the stored turn says what the simulated user wrote
                step = replace(step, prompt=turn.prompt, ask=None)
            _check_resume(turn, step, position, graded=not _ungraded(turn, rule))
        else:
            if should_stop is not None and (why := await answer(should_stop())):
                return await stopped(why=why)
            user = UserTurn()
            source = None
            tally = cache.tally()
            meter = metering(over_limit)
            if replay is not None:
                source = replay[position - 1] if position <= len(replay) else None
                why = _parted(ctx, step, source, replay)
                if why is not None:
                    return await diverged(position, why)
                if step.ask is not None:  # the simulated user said it already, asked the same way
                    step = replace(step, prompt=source.prompt, ask=None)
                step = replace(step, reply=source.response, replayed_ms=source.latency_ms)
            try:
                if step.ask is not None:
                    try:
                        step, user = await _ask_user(ctx, step, io)
                    except EndpointError as exc:
                        return await failed(position, exc, " (simulated user)")
                turn = await _play_turn(
                    ctx, driver, messages, step, position, ev, given, user, graders, io, rule, source,
                    code_scope(ctx, ev, eval_id, turns), toolbox, eval_id, turns,
                )  # fmt: skip
            except GradingFailed as exc:  # the reply stays, ungraded, with what it cost, stored as any turn
                turn = _noted(cache.marked(exc.turn, tally), meter)
                if on_turn is not None:
                    with contextlib.suppress(StopConversation):
                        await answer(on_turn(turn))
                turns.append(turn)
                if isinstance(exc.__cause__, LimitReached):  # stopped between two of its judges' calls
                    return await stopped(why=exc.__cause__.why)
                return await failed(position, exc)
            except EndpointError as exc:
                return await failed(position, exc)
            except RetryStopped:  # a wait before a retry was told to stop: asked again for the reason
                return await stopped(why=await answer(should_stop()) if should_stop is not None else True)
            turn = _noted(cache.marked(turn, tally), meter)
            if on_turn is not None:
                try:
                    await answer(on_turn(turn))
                except StopConversation:
                    return await stopped("stopped")
        turns.append(turn)
        if _ungraded(turn, rule):  # a reply that did not finish: no follow-up is sent after it
            verdict, error = incomplete_verdict(turn, rule)
            return await finish(verdict, error, graded_turns=False)
        if step.prompt is not None:
            messages.append({"role": "user", "content": turn.prompt})
        messages.extend(exchange_messages(turn))
        step = None if turn.termination_kind else driver.next(step, turns)
    if replay is not None and len(turns) < len(replay) and driver.out_of_script(turns):
        went_on = _short(replay[len(turns)].prompt)
        return await diverged(len(turns) + 1, f"this version has no such turn; the stored one sent {went_on}")
    return await finish(driver.verdict(turns))


def _stopped_text(played: int, why: bool | str, how: str = "cancelled") -> str:
    """A stopped conversation's verdict. A stop with a reason of its own (a run's cost limit) says it, as a
    conversation the run never started does when it stops before its first turn; a plain one reads as the run's
    cancel."""
    after = f"after {plural(played, 'turn')}"
    if isinstance(why, str) and why:
        return f"stopped {after}: {why}" if played else f"{NOT_STARTED}: {why}"
    return f"{how} {after}"


def _noted(turn: TurnRecord, meter: Meter) -> TurnRecord:
    """The turn with the endpoints without prices that its calls went to (the meter's) named."""
    if not meter.unpriced:
        return turn
    return turn.model_copy(update={"unpriced": sorted(set(turn.unpriced) | meter.unpriced)})


def _ending(
    driver: Driver, turns: list[TurnRecord], status: Status
) -> tuple[str | None, TerminationKind | None, str | None]:
    """Why the conversation ended (words, kind, detail), for drivers that end conversations themselves:
    an error, or the ending its last turn recorded. The others end when their script does."""
    if not driver.has_endings:
        return None, None, None
    if status == Status.ERROR:
        return TerminationKind.ERROR.describe(), TerminationKind.ERROR, None
    if not turns:
        return None, None, None
    last = turns[-1]
    return last.termination, last.termination_kind, last.termination_detail


def _ungraded(turn: TurnRecord, rule: IncompleteRule) -> bool:
    """A turn whose reply did not finish, and whose rule does not grade it: the conversation ends there."""
    return turn.incomplete is not None and rule != "grade"


def _parted(
    ctx: EngineContext, step: Step, source: TurnRecord | None, replay: Sequence[TurnRecord]
) -> str | None:
    """Why a re-grade cannot replay `source` as the reply to `step`, in words; None when it can: the stored
    turn sent the message this version sends, or its simulated user was asked exactly as it would be now (the
    same model, persona, instructions and conversation so far), so its stored answer stands for the new one."""
    if source is None:
        if not replay:
            return "the source run has no stored turn of this eval"
        return f"the stored conversation ended after turn {len(replay)}"
    if step.ask is not None:
        asked = source.simulated_user
        if asked is None:
            return (
                f"a simulated user would write it, the stored turn sent {_short(source.prompt)} as scripted"
            )
        if asked.messages != step.ask.messages or asked.model != _user_model(ctx, step.ask.model):
            return "the simulated user would be asked otherwise (its persona, instructions or model changed)"
        return None
    if (step.prompt or "") != source.prompt:
        return f"it would send {_short(step.prompt or '')}, the stored turn sent {_short(source.prompt)}"
    return None


def _user_model(ctx: EngineContext, model: str | None) -> str:
    """The model name the simulated user's call goes to, as _ask_user resolves it."""
    if not model:
        return ctx.judge_model
    return ctx.resolve(model)[1] if ctx.resolve else model


def _check_resume(turn: TurnRecord, step: Step, position: int, graded: bool = True) -> None:
    if turn.prompt != (step.prompt or ""):
        raise ResumeMismatch(f"stored turn {position} was {turn.prompt!r}, the suite says {step.prompt!r}")
    if not graded:  # stored without checks: its reply did not finish
        if turn.node != step.node:
            raise ResumeMismatch(f"stored turn {position} comes from another place than the suite has")
        return
    graded_by = step.final_checks if turn.termination_kind else step.checks
    expected = [item.kind for item in graded_by if item.kind]
    if turn.node != step.node or [result.type for result in turn.checks] != expected:
        raise ResumeMismatch(f"stored turn {position} was graded against other checks than the suite has")


async def _ask_user(ctx: EngineContext, step: Step, io: IO) -> tuple[Step, UserTurn]:
    """The simulated user writes the step's prompt."""
    ask = step.ask
    user, resolve = ctx.user or ctx.judge, ctx.resolve_user or ctx.resolve
    if ask.model:
        client, model = resolve(ask.model) if resolve else (user, ask.model)
    else:
        client, model = user, ctx.judge_model
    with cache.calling_as("simulated_user"):
        completion = await io.agent(client, model, ask.messages)
    call = SimulatedUserCall(model=model, messages=ask.messages, reply=completion.text)
    return replace(step, prompt=clean_reply(completion.text), ask=None), UserTurn(
        completion.usage, completion.cost, call
    )


async def _play_turn(
    ctx: EngineContext,
    driver: Driver,
    messages: list[dict],
    step: Step,
    position: int,
    ev: Eval,
    given: int,
    user: UserTurn,
    graders: dict,
    io: IO,
    rule: IncompleteRule,
    source: TurnRecord | None,
    code: CodeScope,
    toolbox: Toolbox | None = None,
    eval_id: str = "",
    earlier: Sequence[TurnRecord] = (),
) -> TurnRecord:
    """The model's reply to the step, graded; or, when it did not finish and `rule` does not grade it,
    recorded ungraded. `source`: the stored turn a re-grade replays (its reply ended as it did then);
    `earlier`: the conversation's turns so far.

    With tools offered, the reply is the model's first answer in text: each answer with tool calls has its
    calls carried out (engine.tools) and their results sent back, at most `max_tool_rounds` times."""
    sent = (
        [*messages, {"role": "user", "content": step.prompt}] if step.prompt is not None else list(messages)
    )
    rounds: list[ToolRound] = []
    if step.reply is None:
        if toolbox is None:
            completion = await io.agent(ctx.agent, ctx.model, sent, settings=ev.model_settings)
        else:
            completion, rounds = await _with_tools(ctx, io, sent, toolbox, eval_id, ev.model_settings)
        # The mock's replies are the suite's.
        why = None if ctx.agent.is_mock else incomplete(completion, tools_offered=toolbox is not None)
        if rounds and rounds[-1].incomplete is not None:  # a round that did not finish ended the turn
            why = rounds[-1].incomplete
        elif completion.calls and toolbox is not None:  # still calling tools when the rounds ran out
            why = (
                f"no answer after {plural(toolbox.max_rounds, 'round')} of tool calls (max_tool_rounds); "
                f"the model still called {called(completion.calls)}"
            )
    else:
        completion = Completion(step.reply, Usage(), 0.0, step.replayed_ms)
        why = None  # a reply given in the suite is graded as it stands
        if source is not None:
            completion.finish_reason, completion.refusal = source.finish_reason, source.refusal
            why = source.incomplete
            rounds = list(source.tool_rounds)
    ended = {
        "finish_reason": completion.finish_reason if completion.finish_reason != "stop" else None,
        "refusal": completion.refusal,
        "incomplete": why,
    }
    if why is not None and rule != "grade":
        turn = turn_record(
            step, position, completion, user, passed=False if rule == "fail" else None, tool_rounds=rounds,
            **ended,
        )  # fmt: skip
        return _charged(turn, rounds) if step.reply is None else turn
    if why is not None:
        completion = replace(completion, text=graded_text(completion))
    exchange = [message for round_ in rounds for message in round_messages(round_)]
    turn = await io.blocking(
        graded_turn, ctx, driver, step, position, ev, given, user, graders, [*sent, *exchange], completion,
        code, rounds, earlier, may_call_model=may_call_model(ctx, ev, step, graders),
    )  # fmt: skip
    noted = {key: value for key, value in ended.items() if value is not None}
    turn = turn.model_copy(update=noted) if noted else turn
    return _charged(turn, rounds) if step.reply is None else turn


def _charged(turn: TurnRecord, rounds: list[ToolRound]) -> TurnRecord:
    """The turn with what the models that played its tools spent counted as judge usage (a replayed turn's
    tools were not played again, and cost nothing)."""
    usage, cost = spent(rounds)
    if not usage.total_tokens and not cost:
        return turn
    return turn.model_copy(
        update={"judge_usage": turn.judge_usage + usage, "judge_cost": turn.judge_cost + cost}
    )


async def _with_tools(
    ctx: EngineContext, io: IO, sent: list[dict], toolbox: Toolbox, eval_id: str, settings=None
) -> tuple[Completion, list[ToolRound]]:
    """The model's answer once its tool calls are carried out: every round's calls run (in the order the
    model made them) and their results go back, until it answers without calls, the rounds run out, or a
    round does not finish (the last round says so). The completion's usage, cost and latency count every
    round."""
    await toolbox.open(io)
    offered = toolbox.offered()
    conversation = list(sent)
    rounds: list[ToolRound] = []
    while True:
        completion = await io.agent(ctx.agent, ctx.model, conversation, tools=offered, settings=settings)
        why = None if ctx.agent.is_mock or not completion.calls else unfinished(completion)
        if why is not None:
            # Cut off, filtered or refused while calling tools: its calls (their arguments maybe cut short)
            # are not carried out, and the turn ends there, unfinished. The round keeps the call's usage; its
            # text is the turn's reply.
            rounds.append(
                ToolRound(
                    calls=[unanswered(call) for call in completion.calls], usage=completion.usage,
                    cost=completion.cost, latency_ms=completion.latency_ms, finish_reason=completion.finish_reason,
                    incomplete=f"{why}; its tool calls were not carried out",
                )
            )  # fmt: skip
            completion = replace(
                completion, calls=(), tool_calls=False, usage=Usage(), cost=0.0, latency_ms=0
            )
            break
        if not completion.calls or len(rounds) == toolbox.max_rounds:
            break
        scope = CallScope(eval_id, conversation, ctx, ctx.files)
        calls = [await toolbox.run(call, scope, io) for call in completion.calls]
        round_ = ToolRound(
            text=completion.text, calls=calls, usage=completion.usage, cost=completion.cost,
            latency_ms=completion.latency_ms,
        )  # fmt: skip
        rounds.append(round_)
        conversation.extend(round_messages(round_))
    if rounds:
        completion = replace(
            completion,
            usage=sum((round_.usage for round_ in rounds), completion.usage),
            cost=completion.cost + sum(round_.cost for round_ in rounds),
            latency_ms=completion.latency_ms + sum(round_.latency_ms + _tool_ms(round_) for round_ in rounds),
        )
    return completion, rounds


def _tool_ms(round_: ToolRound) -> int:
    return sum(call.latency_ms for call in round_.calls)


def _short(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= 50 else text[:49] + "…")
