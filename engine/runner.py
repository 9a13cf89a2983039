"""Running a whole suite in-process, for the CLI: the same engine the workers use, without the web stack."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor

from .clients import MOCK, EndpointRegistry
from .conversation import Defaults, EngineContext, run_eval
from .results import EvalResult, RunReport, RunTotals, SuiteRef, evaluate_gates, gated_status
from .retries import RetryWait
from .schema import Suite
from .stats import iterated_results


def build_context(
    suite: Suite, registry: EndpointRegistry, model: str | None = None, files: Mapping[str, str] | None = None
) -> tuple[EngineContext, str]:
    """The engine context for a suite, and the endpoint name the model under test runs on."""
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
        agent=registry.client(endpoint_name, suite.mock),
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
    ctx, endpoint_name = build_context(suite, registry, model, files)
    jobs = [
        (index, iteration)
        for index, ev in enumerate(suite.evals)
        for iteration in range(ev.iterations or suite.iterations)
    ]
    workers = max(1, min(concurrency, registry.max_concurrency(endpoint_name), len(jobs)))
    started = time.monotonic()

    def one(job: tuple[int, int]) -> EvalResult:
        index, iteration = job
        result = run_eval(suite.evals[index], index, suite.eval_id(index), ctx, on_wait=on_wait)
        result.iteration = iteration
        if on_result is not None:
            on_result(result)
        return result

    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        results = list(pool.map(one, jobs))
    finally:
        # After Ctrl-C, the queued conversations are dropped and the caller need not wait for those in flight.
        pool.shutdown(wait=False, cancel_futures=True)
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
