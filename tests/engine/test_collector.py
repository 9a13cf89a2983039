"""`evalsite run` collects reference cycles only after a million allocations (engine.collector): safe because
a run's conversations leave next to no cycles behind, which this test measures over real HTTP calls."""

from __future__ import annotations

import gc

from engine.clients import EndpointConfig, EndpointRegistry
from engine.collector import RUN_YOUNG_COLLECTION_EVERY, collect_for_one_run
from engine.loader import load_suite
from engine.runner import run_suite
from tests.fakeopenai import FakeOpenAI

SUITE = "name: cycles\nmodel: m\nevals:\n" + "".join(
    f"  - prompt: Question {n}?\n    checks: [{{contains: OK}}, {{llm_judge: {{criteria: Polite}}}}]\n"
    for n in range(200)
)


def test_a_run_leaves_next_to_no_reference_cycles_behind():
    suite = load_suite(SUITE)
    with FakeOpenAI() as fake:
        fake.default_reply = '{"score": 1, "reason": "OK"}'  # the reply, and the judge's verdict
        registry = EndpointRegistry(
            default=EndpointConfig(name="default", base_url=fake.base_url, max_retries=0)
        )
        run_suite(suite, registry, concurrency=20)  # warm: imports, sessions, caches
        gc.collect()
        threshold = gc.get_threshold()
        gc.disable()
        try:
            report = run_suite(suite, registry, concurrency=20)
            left = gc.collect()
        finally:
            gc.enable()
            gc.set_threshold(*threshold)
    assert (
        report.totals.evals == 200 and len(fake.chat_requests()) == 2 * 400
    )  # a reply and a judge each, twice
    # A handful of objects a conversation at most (a run of a million conversations: tens of megabytes).
    assert left < 5 * 200, left


def test_a_run_collects_after_a_million_allocations():
    threshold = gc.get_threshold()
    try:
        collect_for_one_run()
        assert gc.get_threshold()[0] == RUN_YOUNG_COLLECTION_EVERY == 1_000_000
    finally:
        gc.set_threshold(*threshold)
