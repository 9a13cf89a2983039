"""Running a whole suite in-process, for the CLI: the same engine the workers use, without the web stack."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from .clients import MOCK, EndpointRegistry
from .conversation import Defaults, EngineContext, run_eval_async
from .results import EvalResult, RunReport, RunTotals, SuiteRef, evaluate_gates, gated_status
from .retries import RetryWait
from .schema import Suite
from .stats import iterated_results


def build_context(
    suite: Suite,
    registry: EndpointRegistry,
    model: str | None = None,
    files: Mapping[str, str] | None = None,
    *,
    asynchronous: bool = False,
) -> tuple[EngineContext, str]:
    """The engine context for a suite, and the endpoint name the model under test runs on; `asynchronous`:
    its model under test can be awaited (engine.conversation.run_eval_async)."""
    model_ref = model or suite.model
    if not model_ref:
        raise ValueError("no model: set `model` in the suite or pass one")
    endpoint_name, model_id = registry.resolve(model_ref)
    judge_ref = suite.judge or model_ref
    judge_endpoint, judge_model = registry.resolve(judge_ref)

    def resolve(ref: str):
        name, model_id = registry.resolve(ref)
        return registry.client(name, suite.mock), model_id

    ctx = EngineContext(
        agent=registry.client(endpoint_name, suite.mock, asynchronous=asynchronous),
        model=model_id,
        judge=registry.client(judge_endpoint, suite.mock),
        judge_model=judge_model,
        system=suite.system,
        resolve=resolve,
        files=files or {},
        defaults=Defaults.of(suite),
        judge_temperature=suite.judge_temperature,
    )
    return ctx, endpoint_name


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


def run_suite(
    suite: Suite,
    registry: EndpointRegistry,
    *,
    model: str | None = None,
    concurrency: int = 10,
    on_result: Callable[[EvalResult], None] | None = None,
    suite_ref: SuiteRef | None = None,
    files: Mapping[str, str] | None = None,
    on_wait: Callable[[RetryWait], None] | None = None,
) -> RunReport:
    ctx, endpoint_name = build_context(suite, registry, model, files, asynchronous=True)
    jobs = [
        (index, iteration)
        for index, ev in enumerate(suite.evals)
        for iteration in range(ev.iterations or suite.iterations)
    ]
    workers = max(1, min(concurrency, registry.max_concurrency(endpoint_name), len(jobs)))
    started = time.monotonic()
    results: list[EvalResult | None] = [None] * len(jobs)

    async def play_all() -> None:
        # `workers` conversations at a time on one event loop: each awaits its model calls, and the loop
        # plays another meanwhile. Threads only for what may call a model while grading (judges).
        queue = iter(enumerate(jobs))

        async def worker() -> None:
            for n, (index, iteration) in queue:
                result = await run_eval_async(
                    suite.evals[index], index, suite.eval_id(index), ctx, on_wait=on_wait
                )
                result.iteration = iteration
                results[n] = result
                if on_result is not None:
                    on_result(result)

        try:
            await asyncio.gather(*(worker() for _ in range(workers)))
        finally:
            for client in {id(ctx.agent): ctx.agent, id(ctx.judge): ctx.judge}.values():
                if hasattr(client, "aclose"):
                    await client.aclose()

    _run_loop(play_all, workers)
    gates = evaluate_gates(suite.gates, results)
    iterated = iterated_results(suite, results)
    return RunReport(
        suite=suite_ref or SuiteRef(name=suite.name or ""),
        model=model or suite.model or "",
        endpoint=endpoint_name,
        mock=endpoint_name == MOCK,
        status=gated_status(results, gates, iterated),
        gates=gates,
        iterated=iterated,
        evals=results,
        totals=RunTotals.of(results, duration_s=round(time.monotonic() - started, 3)),
    )
