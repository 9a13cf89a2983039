"""Running one conversation: the heart of the engine.

`run_eval` plays one eval against a chat client and reports each turn through `on_turn` as soon as it is
graded, and each wait before a model call is retried through `on_wait`. It can resume: given the turns
already stored (`prior`), it replays them without calling the model and continues after the last one, so a
redelivered task never repeats or duplicates a turn.

Every style of conversation is the same loop over its driver (engine.drivers): the driver plans a turn (a
Step: the user message and what grades the reply), this loop makes the model calls (the simulated user's
when a Step asks for one, the model's reply, the judges') and grades the reply into a TurnRecord, the
driver says whether the reply ends the conversation and, from the records alone, what comes next. A given
history (`messages`) can precede any style.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .checks import JudgeContext, Reply, evaluate_level
from .clients import ChatClient, Completion, EndpointError
from .codegrade.run import CodeRunner, CodeScope
from .conditions import evaluate_condition
from .drivers import Defaults, Driver, Step, Verdict, driver_for
from .grading import extract, grade, grade_named
from .history import build_history, given_messages
from .outcomes import Status, TerminationKind
from .patterns import RegexFailure
from .replies import DEFAULT_RULE, IncompleteRule, graded_text, incomplete, incomplete_verdict
from .results import EvalResult, GraderResult, SimulatedUserCall, Totals, TurnGrade, TurnRecord, Usage
from .retries import RetryStopped, RetryWait, retry_hooks
from .schema import Eval, WeightedPassRule
from .schema.checks import CHECK_KEYS
from .simulate import clean_reply
from .text import plural
from .transcript import format_transcript

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


@dataclass(frozen=True)
class _UserTurn:
    """What the simulated user spent writing a turn's prompt, and what it was sent."""

    usage: Usage = field(default_factory=Usage)
    cost: float = 0.0
    call: SimulatedUserCall | None = None


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
    replay: Sequence[TurnRecord] | None = None,
) -> EvalResult:
    """`given`: (system message, given history) as engine.history.build_history made them once, when the
    conversation was stored (the workers); None builds them here from the eval and ctx.files (the CLI).

    `replay`: re-grade a conversation another run stored. Its replies (and a simulated user's messages) are
    taken from those turns instead of calling the model, and graded afresh; only judges are called. When
    the eval would send a message the stored conversation did not (a tree whose edited checks choose
    another follow-up, or a turn past its end), it ends in error, "diverged at turn N: needs a new run",
    never graded on turns it would not have had."""
    # Model calls that wait to retry say so through on_wait, and stop waiting once should_stop() says so.
    with retry_hooks(on_wait, should_stop):
        return _inline(_run_eval(ev, index, eval_id, ctx, prior, on_turn, should_stop, given, replay, INLINE))


async def run_eval_async(
    ev: Eval,
    index: int,
    eval_id: str,
    ctx: EngineContext,
    prior: Sequence[TurnRecord] = (),
    on_turn: Callable[[TurnRecord], None | Awaitable[None]] | None = None,
    should_stop: Callable[[], bool | Awaitable[bool]] | None = None,
    on_wait: Callable[[RetryWait], None] | None = None,
    given: tuple[str, list[dict]] | None = None,
    replay: Sequence[TurnRecord] | None = None,
) -> EvalResult:
    """run_eval on an event loop, with other conversations: the model's replies are awaited (a client with
    `acomplete`), and anything that may call a model while grading (judges, semantic checks, stop
    conditions, named graders, the simulated user) runs in a thread, so it never holds the loop.

    `on_turn` and `should_stop` may be coroutine functions (the workers store turns and ask whether the run
    goes on in a thread of their own, runs.loop). A wait before a retry checks between its slices, where
    nothing can be awaited: there an asynchronous `should_stop` is asked in the background and its last
    answer holds. `on_wait` is called on the loop, so it must not block."""
    stopping = _Stopping(should_stop) if asyncio.iscoroutinefunction(should_stop) else should_stop
    with retry_hooks(on_wait, stopping.now if isinstance(stopping, _Stopping) else stopping):
        return await _run_eval(ev, index, eval_id, ctx, prior, on_turn, stopping, given, replay, THREADED)


class _Stopping:
    """An asynchronous should_stop, awaited between turns and read without waiting during a retry's wait."""

    def __init__(self, ask: Callable[[], Awaitable[bool]]) -> None:
        self.ask = ask
        self.known = False
        self.asking: asyncio.Task | None = None

    async def __call__(self) -> bool:
        self.known = self.known or await self.ask()
        return self.known

    def now(self) -> bool:
        if not self.known and (self.asking is None or self.asking.done()):
            self.asking = asyncio.get_running_loop().create_task(self._in_background())
        return self.known

    async def _in_background(self) -> None:
        with contextlib.suppress(Exception):  # the next check asks again; the turn's own check raises
            await self()


class _IO:
    """How the loop makes the calls that may wait on a model: at once, in the caller's thread (run_eval),
    or awaited on an event loop shared with other conversations (run_eval_async)."""

    async def agent(self, client: ChatClient, model: str, messages: list[dict]) -> Completion:
        return client.complete(model, messages)

    async def blocking(self, fn: Callable, *args, may_call_model: bool = True):
        return fn(*args)


class _Threaded(_IO):
    async def agent(self, client: ChatClient, model: str, messages: list[dict]) -> Completion:
        acomplete = getattr(client, "acomplete", None)
        if acomplete is not None:
            return await acomplete(model, messages)
        if client.is_mock and not getattr(getattr(client, "spec", None), "latency_ms", 0):
            return client.complete(model, messages)  # no I/O and no wait: nothing to give the loop back
        return await asyncio.to_thread(client.complete, model, messages)

    async def blocking(self, fn: Callable, *args, may_call_model: bool = True):
        if not may_call_model:
            return fn(*args)
        return await asyncio.to_thread(fn, *args)


INLINE, THREADED = _IO(), _Threaded()


async def _answer(value):
    """A callback's value, awaited when it is awaitable (the asyncio path's callbacks may be coroutines)."""
    return await value if inspect.isawaitable(value) else value


def _inline(coroutine):
    """Run a coroutine that never suspends (the loop with INLINE calls) to its end, without an event loop:
    run_eval plays one conversation in its caller's thread (the benchmarks' engine floor, tests) at no cost
    of a loop per call. The workers and the CLI play on an event loop (run_eval_async)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    coroutine.close()
    raise RuntimeError("the conversation loop awaited something while run inline")


async def _run_eval(
    ev: Eval,
    index: int,
    eval_id: str,
    ctx: EngineContext,
    prior: Sequence[TurnRecord],
    on_turn: Callable[[TurnRecord], None | Awaitable[None]] | None,
    should_stop: Callable[[], bool | Awaitable[bool]] | None,
    given: tuple[str, list[dict]] | None,
    replay: Sequence[TurnRecord] | None,
    io: _IO,
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

    async def finish(verdict: Verdict, error: str | None = None, graded_turns: bool = True) -> EvalResult:
        graded: list[GraderResult] = []
        if graders and turns and graded_turns and verdict.outcome in (Status.PASSED, Status.FAILED):
            try:
                verdict, graded = await io.blocking(
                    _with_graders, ctx, ev, eval_id, graders, verdict, turns, messages, given_count
                )
            except EndpointError as exc:  # a grader's judge failed after the last turn: no verdict either
                error = str(exc)
                verdict = Verdict(Status.ERROR, None, f"error grading the conversation: {exc}")
        tally = driver.tally(turns) if turns else None
        termination, termination_kind, termination_detail = _ending(driver, turns, verdict.outcome)
        return EvalResult(
            index=index,
            id=eval_id,
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

    async def stopped(how: str = "cancelled") -> EvalResult:
        return await finish(Verdict(Status.CANCELLED, None, f"{how} after {plural(len(turns), 'turn')}"))

    async def failed(position: int, exc: EndpointError, who: str = "") -> EvalResult:
        return await finish(
            Verdict(Status.ERROR, None, f"error on turn {position}{who}: {exc}"), error=str(exc)
        )

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
            if should_stop is not None and await _answer(should_stop()):
                return await stopped()
            user = _UserTurn()
            source = None
            if replay is not None:
                source = replay[position - 1] if position <= len(replay) else None
                if source is not None and step.ask is not None:  # the simulated user said it already
                    step = replace(step, prompt=source.prompt, ask=None)
                if source is None or (step.prompt or "") != source.prompt:
                    why = (
                        "the source run has no stored turn of this eval"
                        if not replay
                        else f"the stored conversation ended after turn {len(replay)}"
                        if source is None
                        else f"it would send {_short(step.prompt or '')}, the stored turn sent {_short(source.prompt)}"
                    )
                    message = f"diverged at turn {position}: needs a new run ({why})"
                    return await finish(Verdict(Status.ERROR, None, message), error=message)
                step = replace(step, reply=source.response, replayed_ms=source.latency_ms)
            try:
                if step.ask is not None:
                    try:
                        step, user = await _ask_user(ctx, step, io)
                    except EndpointError as exc:
                        return await failed(position, exc, " (simulated user)")
                turn = await _play_turn(
                    ctx, driver, messages, step, position, ev, given, user, graders, io, rule, source,
                    _code_scope(ctx, ev, eval_id, turns),
                )  # fmt: skip
            except EndpointError as exc:
                return await failed(position, exc)
            except RetryStopped:
                return await stopped()
            if on_turn is not None:
                try:
                    await _answer(on_turn(turn))
                except StopConversation:
                    return await stopped("stopped")
        turns.append(turn)
        if _ungraded(turn, rule):  # a reply that did not finish: no follow-up is sent after it
            verdict, error = incomplete_verdict(turn, rule)
            return await finish(verdict, error, graded_turns=False)
        if step.prompt is not None:
            messages.append({"role": "user", "content": turn.prompt})
        messages.append({"role": "assistant", "content": turn.response})
        step = None if turn.termination_kind else driver.next(step, turns)
    return await finish(driver.verdict(turns))


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


async def _ask_user(ctx: EngineContext, step: Step, io: _IO) -> tuple[Step, _UserTurn]:
    """The simulated user writes the step's prompt."""
    ask = step.ask
    if ask.model:
        client, model = ctx.resolve(ask.model) if ctx.resolve else (ctx.judge, ask.model)
    else:
        client, model = ctx.judge, ctx.judge_model
    completion = await io.agent(client, model, ask.messages)
    call = SimulatedUserCall(model=model, messages=ask.messages, reply=completion.text)
    return replace(step, prompt=clean_reply(completion.text), ask=None), _UserTurn(
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
    user: _UserTurn,
    graders: dict,
    io: _IO,
    rule: IncompleteRule,
    source: TurnRecord | None,
    code: CodeScope,
) -> TurnRecord:
    """The model's reply to the step, graded; or, when it did not finish and `rule` does not grade it,
    recorded ungraded. `source`: the stored turn a re-grade replays (its reply ended as it did then)."""
    sent = (
        [*messages, {"role": "user", "content": step.prompt}] if step.prompt is not None else list(messages)
    )
    if step.reply is None:
        completion = await io.agent(ctx.agent, ctx.model, sent)
        why = None if ctx.agent.is_mock else incomplete(completion)  # the mock's replies are the suite's
    else:
        completion = Completion(step.reply, Usage(), 0.0, step.replayed_ms)
        why = None  # a reply given in the suite is graded as it stands
        if source is not None:
            completion.finish_reason, completion.refusal = source.finish_reason, source.refusal
            why = source.incomplete
    ended = {
        "finish_reason": completion.finish_reason if completion.finish_reason != "stop" else None,
        "refusal": completion.refusal,
        "incomplete": why,
    }
    if why is not None and rule != "grade":
        return TurnRecord(
            turn=position,
            node=step.node,
            prompt=step.prompt or "",
            response=completion.text,
            usage=completion.usage,
            cost=completion.cost,
            latency_ms=completion.latency_ms,
            passed=False if rule == "fail" else None,
            followup_reason=step.reason,
            user_usage=user.usage,
            user_cost=user.cost,
            simulated_user=user.call,
            **ended,
        )
    if why is not None:
        completion = replace(completion, text=graded_text(completion))
    turn = await io.blocking(
        _graded_turn, ctx, driver, step, position, ev, given, user, graders, sent, completion, code,
        may_call_model=_may_call_model(ctx, ev, step, graders),
    )  # fmt: skip
    noted = {key: value for key, value in ended.items() if value is not None}
    return turn.model_copy(update=noted) if noted else turn


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


# Checks that only read the reply: grading with nothing else never waits on a model or a program.
_LOCAL_CHECKS = frozenset(CHECK_KEYS) - {"semantic", "llm_judge", "code"}


def _may_call_model(ctx: EngineContext, ev: Eval, step: Step, graders: dict) -> bool:
    """Whether grading this step's reply may call a model (a judge, embeddings, a stop condition, a named
    grader, an llm_judge ground-truth grader): on an event loop such grading goes to a thread."""
    if step.stop_when is not None or graders:
        return True
    if (step.ground_truth is not None or step.grade_conversation is not None) and (
        (ev.grader or ctx.defaults.grader) == "llm_judge"
    ):
        return True

    def local(items) -> bool:
        return all(
            item.kind is None or (item.kind in _LOCAL_CHECKS and local(item.or_ or ())) for item in items
        )

    return not (local(step.checks) and local(step.final_checks))


def _graded_turn(
    ctx: EngineContext,
    driver: Driver,
    step: Step,
    position: int,
    ev: Eval,
    given: int,
    user: _UserTurn,
    graders: dict,
    sent: list[dict],
    completion: Completion,
    code: CodeScope,
) -> TurnRecord:
    """The reply graded into its turn record: the stop condition, the checks, the ground-truth grades."""
    code.current = {"turn": position, "node": step.node, "prompt": step.prompt or ""}
    if step.ground_truth is not None:
        code.expected = step.ground_truth
    judge = JudgeContext(ctx.judge, ctx.judge_model, ctx.resolve, ctx.judge_temperature, code=code)
    conversation = [*sent, {"role": "assistant", "content": completion.text}]
    reply = Reply(
        text=completion.text,
        completion_tokens=None if completion.usage.estimated else completion.usage.completion_tokens,
        conversation=conversation,
    )
    condition = decided = None
    if step.stop_when is not None:
        condition, decided = evaluate_condition(step.stop_when, position, reply, judge)
    ending = driver.ending(step, position, condition, decided)
    # A reply that ends the conversation is its final one: the final checks grade it.
    results = evaluate_level(step.final_checks if ending else step.checks, reply, judge)
    turn_grade = _grade(ctx, ev, step, position, completion.text, conversation, given, judge)
    grades = _turn_grades(ctx, ev, graders, step, position, completion.text, conversation, judge)
    return TurnRecord(
        turn=position,
        node=step.node,
        prompt=step.prompt or "",
        response=completion.text,
        usage=completion.usage,
        cost=completion.cost,
        latency_ms=completion.latency_ms,
        checks=results,
        passed=turn_passed(results, turn_grade, grades),
        followup_reason=step.reason,
        grade=turn_grade,
        grades=grades,
        termination=ending.text if ending else None,
        termination_kind=ending.kind if ending else None,
        termination_detail=ending.detail if ending else None,
        user_usage=user.usage,
        user_cost=user.cost,
        judge_usage=judge.spent,
        judge_cost=judge.cost,
        stop_when=condition,
        simulated_user=user.call,
    )


def _grade(
    ctx, ev: Eval, step: Step, position: int, text: str, conversation, given: int, judge
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


# --- named graders: per turn, or once for the conversation, then the eval's verdict under its pass rule ---


def _code_scope(ctx: EngineContext, ev: Eval, eval_id: str, turns: Sequence[TurnRecord]) -> CodeScope:
    """What the eval's code checks are told besides the reply: its turns so far, its expected output."""
    expected = ev.ground_truth if isinstance(ev.ground_truth, str) else None
    return CodeScope(
        ctx.code, eval_id, list(turns), expected=expected, metadata={"tags": list(ev.tags or [])}
    )


def _short(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= 50 else text[:49] + "…")


def _per_turn(ev: Eval) -> bool:
    """Named graders grade every turn of an `input` list with a `ground_truth` list (Letta's per-turn rows);
    any other conversation once, after its last turn."""
    return isinstance(ev.ground_truth, list)


def _turn_grades(
    ctx, ev: Eval, graders: dict, step: Step, position: int, text: str, conversation, judge
) -> list[TurnGrade]:
    if not graders or not _per_turn(ev) or step.ground_truth is None:
        return []
    return [
        grade_named(
            name,
            grader,
            turn=position,
            replies=[text],
            ground_truth=step.ground_truth,
            input_text=step.prompt or "",
            conversation=conversation,
            judge=judge,
            default_extractor=ctx.defaults.extractor,
            default_threshold=ctx.defaults.pass_threshold,
        )  # fmt: skip
        for name, grader in graders.items()
    ]


def _with_graders(
    ctx,
    ev: Eval,
    eval_id: str,
    graders: dict,
    verdict: Verdict,
    turns: list[TurnRecord],
    messages,
    given: int,
):
    """The named graders' results (the conversation graded once now, unless it was graded per turn) and the
    eval's verdict under its pass rule: it passes when the driver's verdict passed (its checks) and the
    graders pass the rule; its score is the graders' mean, or their weighted mean."""
    aggregation = {"mean": lambda xs: sum(xs) / len(xs), "min": min, "max": max}[ev.aggregation or "mean"]
    by_name: dict[str, list[TurnGrade]] = {name: [] for name in graders}
    if _per_turn(ev):
        for turn in turns:
            for item in turn.grades:
                by_name.setdefault(item.name, []).append(item)
    else:
        live = messages[given:]
        replies = [m["content"] for m in live if m["role"] == "assistant"]
        input_text = "\n".join(str(m["content"]) for m in live if m["role"] == "user")
        code = _code_scope(ctx, ev, eval_id, turns[:-1])
        code.current = turns[-1].model_dump(mode="json")
        judge = JudgeContext(ctx.judge, ctx.judge_model, ctx.resolve, ctx.judge_temperature, code=code)
        truth = ev.ground_truth if isinstance(ev.ground_truth, str) else None
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
                )  # fmt: skip
            )
        # The conversation's grades are kept with its results (the turns are stored already, written once).
        _charge_last(turns, judge)
    results = []
    for name, grader in graders.items():
        items = by_name.get(name, [])
        threshold = items[0].threshold if items else (grader.threshold or 1.0)
        score = aggregation([item.score for item in items]) if items else None
        results.append(
            GraderResult(
                name=name,
                kind=grader.kind,
                score=score,
                threshold=threshold,
                passed=None if score is None else score >= threshold - 1e-9,
                turns_graded=len(items),
                grades=[] if _per_turn(ev) else items,
            )  # fmt: skip
        )
    rule = ev.pass_rule if ev.pass_rule is not None else ctx.defaults.pass_rule
    return graded_verdict(rule, results, verdict), results


def graded_verdict(rule, results: list[GraderResult], verdict: Verdict) -> Verdict:
    """The eval's verdict under its pass rule, from its named graders' results and its driver's verdict (its
    checks): it passes when both do; its score is the graders' mean, or their weighted mean."""
    scored = [item for item in results if item.score is not None]
    if isinstance(rule, WeightedPassRule):
        weights = rule.weighted_average
        total = sum(weights.values())
        score = sum(weights[item.name] * item.score for item in scored if item.name in weights) / total
        ok = score >= rule.threshold - 1e-9
        how = f"weighted score {score:.2f} (needs {rule.threshold:g})"
    else:
        score = sum(item.score for item in scored) / len(scored) if scored else 0.0
        passes = [bool(item.passed) for item in results]
        ok = all(passes) if rule == "all" else any(passes)
        how = f"{sum(passes)}/{len(passes)} graders passed" + ("" if rule == "all" else " (any)")
    detail = ", ".join(
        f"{item.name} {item.score:.2f}{'✓' if item.passed else '✗'}"
        for item in results
        if item.score is not None
    )
    checks_passed = verdict.outcome == Status.PASSED
    status = Status.PASSED if ok and checks_passed else Status.FAILED
    reason = f"{status}: {how}: {detail}"
    if not checks_passed and ok:
        reason += f"; {verdict.reason}"
    text = reason if verdict.text == verdict.reason else f"{reason}; {verdict.text}"
    return Verdict(status, score, reason, text, verdict.passed_on_turn if status == Status.PASSED else None)


def _charge_last(turns: list[TurnRecord], judge: JudgeContext) -> None:
    """Graders' judge calls after the last turn count in the eval's judge totals (Totals.of sums turns'), so
    they go on the last turn's record as the conversation's results are built."""
    if judge.spent.total_tokens or judge.cost:
        last = turns[-1]
        turns[-1] = last.model_copy(
            update={"judge_usage": last.judge_usage + judge.spent, "judge_cost": last.judge_cost + judge.cost}
        )
