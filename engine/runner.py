"""Running a whole suite in-process, for the CLI: the same engine the workers use, without the web stack."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from . import cache, cost, meter
from .calls import SLOW_MIN_SECONDS, Calls, Latencies, Slow, slow_calls, watching
from .clients import MOCK, EndpointRegistry
from .clients.aio import close_sessions
from .clients.settings import Refusals, configured, settings_report
from .codegrade.run import CodeRunner
from .conversation import Defaults, EngineContext, run_eval_async
from .gates import evaluate_gates
from .outcomes import NOT_STARTED, Status
from .results import EvalResult, RunReport, RunTotals, SuiteRef, gated_status
from .retries import RetryWait
from .schema import Suite
from .stats import iterated_results
from .text import plural
from .tools.mcp import aclose as close_mcp_sessions

# How often a run in this process looks for calls the endpoint sits on.
SLOW_CHECK_SECONDS = 1.0


def build_context(
    suite: Suite,
    registry: EndpointRegistry,
    model: str | None = None,
    files: Mapping[str, str] | None = None,
    *,
    asynchronous: bool = False,
    timeout: float | None = None,
    code: CodeRunner | None = None,
    refusals: Refusals | None = None,
    store: cache.ResponseStore | None = None,
) -> tuple[EngineContext, str]:
    """The engine context for a suite, and the endpoint name the model under test runs on; `asynchronous`:
    its model under test can be awaited (engine.conversation.run_eval_async).

    Each role's client sends its settings (`model_settings`, `judge_settings`, `user_settings`;
    engine.clients.settings) and notes a refused one in `refusals` (one is made when none is given).

    Request timeouts: `timeout` (the command line's) for every endpoint, else the suite's
    `request_timeout`, else each endpoint's own. `code`: where code checks run (None: they may not). `store`:
    where the response cache keeps its answers, for the roles the suite's `cache` turns on (engine.cache)."""
    model_ref = model or suite.model
    if not model_ref:
        raise ValueError("no model: set `model` in the suite or pass one")
    registry = registry.with_timeouts(*request_timeouts(suite, timeout))
    endpoint_name, model_id = registry.resolve(model_ref)
    judge_ref = suite.judge or model_ref
    judge_endpoint, judge_model = registry.resolve(judge_ref)

    refusals = refusals if refusals is not None else Refusals()
    judge_settings, user_settings = suite.judge_settings, suite.user_settings
    roles = cache.roles_of(suite) if store is not None else None
    first_only = cache.first_draw_only(suite, roles)

    # Each role's client answers from the response cache (when the suite's `cache` turns the role on) inside
    # `configured`, which sends the role's settings: the cache's key then holds the suite's, the eval's and the
    # launch's settings, merged.
    def cached(client, role: cache.Role):
        return cache.caching(client, store, roles, role, first_only=first_only)

    def resolve(ref: str):
        name, model_id = registry.resolve(ref)
        client = cached(registry.client(name, suite.mock, asynchronous=asynchronous), "judge")
        return configured(client, judge_settings, "judge_settings", refusals), model_id

    def resolve_user(ref: str):
        name, model_id = registry.resolve(ref)
        client = cached(registry.client(name, suite.mock, asynchronous=asynchronous), "simulated_user")
        return configured(client, user_settings, "user_settings", refusals), model_id

    # Asynchronous clients' calls from a grading thread are made on the loop (engine.clients.aio).
    agent = registry.client(endpoint_name, suite.mock, asynchronous=asynchronous, secrets=True)
    judge = registry.client(judge_endpoint, suite.mock, asynchronous=asynchronous)
    # A judge_settings temperature goes over the suite's judge_temperature; a check's own goes over both.
    judge_temperature = suite.judge_temperature
    if judge_settings is not None and judge_settings.temperature is not None:
        judge_temperature = judge_settings.temperature
    ctx = EngineContext(
        agent=configured(cached(agent, "model"), suite.model_settings, "model_settings", refusals),
        model=model_id,
        judge=configured(cached(judge, "judge"), judge_settings, "judge_settings", refusals),
        judge_model=judge_model,
        system=suite.system,
        resolve=resolve,
        files=files or {},
        defaults=Defaults.of(suite),
        judge_temperature=judge_temperature,
        code=code,
        user=configured(cached(judge, "simulated_user"), user_settings, "user_settings", refusals),
        resolve_user=resolve_user,
        refusals=refusals,
    )
    return ctx, endpoint_name


def request_timeouts(suite: Suite, timeout: float | None = None) -> tuple[dict[str, float], float | None]:
    """The request timeouts a run of the suite overrides, as EndpointRegistry.with_timeouts takes them: per
    endpoint, and for every endpoint (the command line's `timeout`, else the suite's single number)."""
    value = suite.request_timeout
    if timeout is not None:
        return {}, timeout
    if isinstance(value, dict):
        return value, None
    return {}, value


def _run_loop(main: Callable[[], Awaitable[None]], threads: int) -> None:
    """Run `main()` on an event loop of its own, with `threads` threads for the calls that block. After
    Ctrl-C the conversations in flight are cancelled and the caller does not wait for blocked calls."""
    loop = asyncio.new_event_loop()
    executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="evalsite-grading")
    loop.set_default_executor(executor)
    task = loop.create_task(main())
    try:
        loop.run_until_complete(task)
    except KeyboardInterrupt:
        task.cancel()
        with contextlib.suppress(BaseException):
            loop.run_until_complete(task)  # let the conversations see the cancellation and close sessions
        raise
    finally:
        executor.shutdown(wait=False, cancel_futures=True)
        loop.close()


def run_suite(suite: Suite, registry: EndpointRegistry, **options) -> RunReport:
    """Play every eval of the suite (times its iterations); `options` are Play's."""
    return run_plays([Play(suite, registry, **options)])[0]


class Play:
    """One suite to play on a model, `concurrency` conversations at a time, and once played its report.

    `timeout`: every endpoint's request timeout, over the suite's and the endpoint's own. `on_slow` is told,
    every SLOW_CHECK_SECONDS while any are, of the calls out longer than a few times the run's median latency
    (and `slow_min_seconds`). `store`: the response cache's (engine.cache), used when the suite's `cache` says
    so. `watched` is kept holding the calls of the conversations in flight, for whoever shows progress.
    `on_result` is told of each conversation as it ends, `on_ended` of the report, `on_spend` of each amount
    spent as it is: a turn's, and what a conversation's graders spend after its last turn. `unpriced` is kept
    holding the endpoints without prices that the run's requests go out to, as they go (engine.meter), for
    whoever shows progress; the report names them: an endpoint without prices that no call went to leaves the
    run's cost known.

    The suite's `max_cost` is checked at each turn, and between the calls that grade one (engine.meter): once
    the run has spent it, no conversation starts and those playing stop before their next model call
    ("stopped after 2 turns: cost limit $5.00 reached"), their turns kept. The spend passes the limit by at
    most the calls out when it was reached.

    Once the endpoint refuses a setting (noted in `refusals`), no more conversations start: those not
    started are listed as such (not_started), and those in flight whose call was refused the same way as
    stopped there (refused_alike), so the one error says the refusal."""

    def __init__(
        self,
        suite: Suite,
        registry: EndpointRegistry,
        *,
        model: str | None = None,
        concurrency: int = 10,
        on_result: Callable[[EvalResult], None] | None = None,
        on_ended: Callable[[RunReport], None] | None = None,
        suite_ref: SuiteRef | None = None,
        files: Mapping[str, str] | None = None,
        on_wait: Callable[[RetryWait], None] | None = None,
        timeout: float | None = None,
        on_slow: Callable[[Slow], None] | None = None,
        slow_min_seconds: float = SLOW_MIN_SECONDS,
        code: CodeRunner | None = None,
        store: cache.ResponseStore | None = None,
        watched: set[Calls] | None = None,
        refusals: Refusals | None = None,
        unpriced: set[str] | None = None,
        on_spend: Callable[[float], None] | None = None,
    ) -> None:
        self.suite, self.model, self.suite_ref = suite, model, suite_ref
        self.unpriced: set[str] = unpriced if unpriced is not None else set()
        self.on_result, self.on_ended, self.on_wait = on_result, on_ended, on_wait
        self.on_spend = on_spend
        self.on_slow, self.slow_min_seconds = on_slow, slow_min_seconds
        self.playing: set[Calls] = watched if watched is not None else set()
        self.watch_calls = on_slow is not None or watched is not None
        self.ctx, self.endpoint = build_context(
            suite, registry, model, files, asynchronous=True, timeout=timeout, code=code,
            refusals=refusals, store=store,
        )  # fmt: skip
        self.jobs = [
            (index, iteration)
            for index, ev in enumerate(suite.evals)
            for iteration in range(ev.iterations or suite.iterations)
        ]
        self.cap = registry.max_concurrency(self.endpoint)
        self.workers = max(1, min(concurrency, self.cap, len(self.jobs)))
        self.results: list[EvalResult | None] = [None] * len(self.jobs)
        self.spent = 0.0
        self._refusal_said = False  # a conversation's error has said the refusal
        self.report: RunReport | None = None

    async def play(self, endpoint_slots: asyncio.Semaphore) -> None:
        """`workers` conversations at a time on the running loop: each awaits its model calls, and the loop
        plays another meanwhile; `endpoint_slots` bounds them with every other play's on the same endpoint."""
        started = time.monotonic()
        queue = iter(enumerate(self.jobs))
        latencies = Latencies()
        limit = self.suite.max_cost
        reason = cost.limit_reached(limit) if limit is not None else ""

        def over() -> bool | str:
            """Asked before each turn of each conversation (run_eval_async's should_stop)."""
            return limit is not None and self.spent >= limit and reason

        def over_with(pending: float) -> bool | str:
            """Asked before each call that grades a turn, with what the turn has spent so far."""
            return self.spent + pending >= limit and reason

        async def worker() -> None:
            refusals = self.ctx.refusals
            while limit is None or self.spent < limit:
                if refusals.first is not None:  # every later conversation would be refused the same way
                    return
                n, (index, iteration) = next(queue, (None, (None, None)))
                if n is None:
                    return
                calls = Calls(latencies)
                self.playing.add(calls)
                counted = [0.0]  # what this conversation's turns have added to the spend so far

                def on_turn(turn, counted=counted) -> None:
                    counted[0] += turn.spent
                    self._spend(turn.spent)

                try:
                    async with endpoint_slots:
                        with (
                            watching(calls if self.watch_calls else None),
                            cache.playing_iteration(iteration),
                            meter.calling(self.unpriced),
                        ):
                            result = await run_eval_async(
                                self.suite.evals[index], index, self.suite.eval_id(index), self.ctx,
                                on_turn=on_turn, should_stop=over, on_wait=self.on_wait,
                                over_limit=over_with if limit is not None else None,
                            )  # fmt: skip
                finally:
                    self.playing.discard(calls)
                self._spend(result.totals.cost - counted[0])  # graders that judge after the last turn
                result.iteration = iteration
                if self._refused_too(result):
                    # In flight when the first was refused, and refused alike: one error says it, the rest
                    # were sent, so they stopped, rather than never started or erred again.
                    result = refused_alike(result, str(refusals.first))
                self.results[n] = result
                if self.on_result is not None:
                    self.on_result(result)

        async def watch() -> None:
            while True:
                await asyncio.sleep(SLOW_CHECK_SECONDS)
                slow = slow_calls(list(self.playing), self.slow_min_seconds)
                if slow is not None:
                    self.on_slow(slow)

        watcher = asyncio.create_task(watch()) if self.on_slow is not None else None
        try:
            await asyncio.gather(*(worker() for _ in range(self.workers)))
        finally:
            if watcher is not None:
                watcher.cancel()
        self.report = self._report(time.monotonic() - started)
        if self.on_ended is not None:
            self.on_ended(self.report)

    def _spend(self, amount: float) -> None:
        if amount:
            self.spent += amount
            if self.on_spend is not None:
                self.on_spend(amount)

    def _refused_too(self, result: EvalResult) -> bool:
        """Whether the conversation ended on the setting the endpoint refused (at its first call, or at a
        judge's or the simulated user's call of a later turn), after another conversation's error said so."""
        refused = self.ctx.refusals.first
        if refused is None or not is_refused_alike(result, str(refused)):
            return False
        said, self._refusal_said = self._refusal_said, True
        return said

    def _report(self, duration: float) -> RunReport:
        suite, results, limit = self.suite, self.results, self.suite.max_cost
        refused = self.ctx.refusals.first
        stop_reason = None
        # Stopped by its limit when that left a conversation unplayed or cut one short (over() stopped it).
        limited = (
            limit is not None
            and self.spent >= limit
            and any(result is None or result.status == Status.CANCELLED for result in results)
        )
        if limited:
            stop_reason = cost.limit_reached(limit)
        elif refused is not None and (
            any(result is None or result.status == Status.CANCELLED for result in results)
        ):  # a refused setting stopped it: what it did not play is listed, not dropped
            stop_reason = str(refused)
        if stop_reason:
            results = [
                result or not_started(suite, *self.jobs[n], stop_reason) for n, result in enumerate(results)
            ]
        results = [result for result in results if result is not None]
        gates = evaluate_gates(suite.gates, results)
        iterated = iterated_results(suite, results)
        return RunReport(
            suite=self.suite_ref or SuiteRef(name=suite.name or ""),
            model=self.model or suite.model or "",
            endpoint=self.endpoint,
            mock=self.endpoint == MOCK,
            settings=settings_report(suite),
            status=Status.CANCELLED if limited else gated_status(results, gates, iterated),
            stop_reason=stop_reason,
            gates=gates,
            iterated=iterated,
            evals=results,
            totals=RunTotals.of(results, duration_s=round(duration, 3)),
            unpriced=sorted(self.unpriced),
        )


def run_plays(plays: list[Play]) -> list[RunReport]:
    """Play several suites together on one event loop (a matrix's variants), each `concurrency` at a time;
    an endpoint's cap bounds the conversations of all of them on it together. Their reports, in order."""

    async def main() -> None:
        slots: dict[str, asyncio.Semaphore] = {}
        for play in plays:
            slots.setdefault(play.endpoint, asyncio.Semaphore(play.cap))
        try:
            await asyncio.gather(*(play.play(slots[play.endpoint]) for play in plays))
        finally:
            await close_sessions()  # every endpoint's, shared by the plays: closed once all have ended
            await close_mcp_sessions()  # the MCP servers the conversations shared (engine.tools.mcp)

    _run_loop(main, sum(play.workers for play in plays))
    return [play.report for play in plays]


def is_refused_alike(result: EvalResult, refusal: str) -> bool:
    """Whether the conversation ended in error on `refusal`, the setting its run's endpoint refused."""
    return result.status == Status.ERROR and result.error == refusal


def refused_alike(result: EvalResult, refusal: str) -> EvalResult:
    """A conversation in flight when another's call was refused, ended by the same refusal: stopped where it was
    refused, its turns kept, rather than another error saying it again. Its verdict says the whole refusal, as a
    conversation's own page shows it alone: "stopped at its first call: the endpoint refused …"."""
    turns = result.turns
    where = f"after {plural(len(turns), 'turn')}" if turns else "at its first call"
    text = f"stopped {where}: {refusal}"
    # It ended where a stop ends one, not in error: a simulated conversation's ending is its last turn's.
    ending = (
        (turns[-1].termination, turns[-1].termination_kind, turns[-1].termination_detail)
        if turns and result.termination is not None
        else (None, None, None)
    )
    return result.model_copy(
        update={
            "status": Status.CANCELLED,
            "verdict": text,
            "reason": text,
            "error": None,
            "termination": ending[0],
            "termination_kind": ending[1],
            "termination_detail": ending[2],
        }
    )


def not_started(suite: Suite, index: int, iteration: int, why: str) -> EvalResult:
    """A conversation the run never started (its cost limit was reached first, or a refused setting), as a
    cancelled result."""
    ev = suite.evals[index]
    return EvalResult(
        index=index,
        id=suite.eval_id(index),
        tags=ev.tags,
        kind="single-turn",
        conversation=ev.style,
        iteration=iteration,
        prompt=ev.first_text,
        status=Status.CANCELLED,
        verdict=f"{NOT_STARTED}: {why}",
        reason=f"{NOT_STARTED}: {why}",
    )
