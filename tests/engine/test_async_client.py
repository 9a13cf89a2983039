"""The asyncio path (engine.clients.AsyncOpenAIClient, engine.conversation.run_eval_async, engine.runner):
the same answers, retries, waits and errors as the threaded client, against the real fake server; and a
suite played on one event loop, its conversations overlapping."""

from __future__ import annotations

import asyncio

import pytest

from engine.clients import AsyncOpenAIClient, EndpointConfig, EndpointError, EndpointRegistry
from engine.loader import load_suite
from engine.retries import LocalPauseBoard, RetryWait, retry_hooks
from engine.runner import Play, run_plays, run_suite
from tests.engine.test_clients import KEY_ENV, UNREADABLE, FakeTime
from tests.fakeopenai import FakeOpenAI, Reply

ASK = [{"role": "user", "content": "x"}]


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-client")
    with FakeOpenAI(api_key="sk-client") as server:
        yield server


def client_for(fake: FakeOpenAI, sleeps: list[float] | None = None, **overrides) -> AsyncOpenAIClient:
    config = EndpointConfig(name="fake", base_url=fake.base_url, api_key_env=KEY_ENV, price_input=2.0,
                            price_output=10.0, **overrides)  # fmt: skip
    fake_time = FakeTime(sleeps if sleeps is not None else [])
    return AsyncOpenAIClient(config, sleep=fake_time.sleep, clock=fake_time.clock, pauses=LocalPauseBoard())


def complete(client: AsyncOpenAIClient, messages=ASK, **kwargs):
    async def call():
        try:
            return await client.acomplete("m", messages, **kwargs)
        finally:
            await client.aclose()

    return asyncio.run(call())


def test_text_usage_cost_and_the_request(fake):
    fake.script(
        "hello there", [Reply("general kenobi", usage={"prompt_tokens": 1000, "completion_tokens": 500})]
    )
    completion = complete(client_for(fake), [{"role": "user", "content": "hello there"}], temperature=0.2)
    assert completion.text == "general kenobi" and not completion.usage.estimated
    assert completion.cost == pytest.approx((1000 * 2.0 + 500 * 10.0) / 1e6)
    request = fake.chat_requests()[-1]
    assert request["model"] == "m" and request["temperature"] == 0.2
    assert fake.requests[-1]["headers"]["authorization"] == "Bearer sk-client"


def test_the_request_body_arrives_as_sent_and_the_reply_as_written(fake):
    # The body is encoded in C and falls back to the json module for what that refuses (an integer past 64
    # bits): either way the endpoint reads exactly what was sent, non-ASCII text included.
    text = 'caf\u00e9 "quoted" \\ \u2713 \U0001f4a1\nnext line'
    fake.script(text, [Reply("r\u00e9ponse \U0001f4a1")])
    tools = [{"type": "function", "function": {"name": "count", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer", "maximum": 2**70, "minimum": -1.5}}}}}]  # fmt: skip
    for offered in (None, tools):
        completion = complete(client_for(fake), [{"role": "user", "content": text}], tools=offered)
        assert completion.text == "r\u00e9ponse \U0001f4a1"
        request = fake.chat_requests()[-1]
        assert request["messages"] == [{"role": "user", "content": text}]
        assert request.get("tools") == offered
        assert fake.requests[-1]["headers"]["content-type"] == "application/json"


def test_missing_usage_is_estimated(fake):
    fake.script("x", [Reply("a reply of some length", omit_usage=True)])
    completion = complete(client_for(fake))
    assert completion.usage.estimated and completion.usage.completion_tokens == 6


def test_429_honours_retry_after_and_reports_the_wait(fake):
    fake.fail_next(2, status=429, retry_after=1.5)
    sleeps: list[float] = []
    waits: list[RetryWait] = []
    with retry_hooks(waits.append):
        assert complete(client_for(fake, sleeps)).text == "OK"
    assert sleeps == [1.5, 1.5]
    assert [wait.reason for wait in waits] == ["waiting for rate limit"] * 2


def test_5xx_is_retried_then_gives_up_with_the_same_words(fake):
    fake.fail_next(10, status=503)
    sleeps: list[float] = []
    with pytest.raises(EndpointError, match=r"HTTP 503 from fake: .*gave up after 4 attempts"):
        complete(client_for(fake, sleeps, max_retries=3))
    assert len(sleeps) == 3 and len(fake.chat_requests()) == 4


def test_a_refused_key_is_not_retried_and_never_quoted(fake):
    fake.api_key = "sk-other"
    sleeps: list[float] = []
    with pytest.raises(EndpointError, match="HTTP 401 from fake: Incorrect API key") as raised:
        complete(client_for(fake, sleeps))
    assert sleeps == [] and len(fake.requests) == 1 and "sk-client" not in str(raised.value)


def test_a_timeout_is_retried_then_explained(fake):
    fake.fail_next(1, hang=2)
    sleeps: list[float] = []
    assert complete(client_for(fake, sleeps, timeout=0.3)).text == "OK" and len(sleeps) == 1
    fake.fail_next(5, hang=2)
    with pytest.raises(EndpointError, match=r"timed out after 0.3s .*gave up after 2 attempts"):
        complete(client_for(fake, timeout=0.3, max_retries=1))


def test_an_unreachable_endpoint_says_so(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    config = EndpointConfig(name="gone", base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV, max_retries=1)
    with pytest.raises(EndpointError, match="cannot reach gone at http://127.0.0.1:9/v1"):
        complete(AsyncOpenAIClient(config, sleep=lambda _: None, pauses=LocalPauseBoard()))


def tree_suite(n: int) -> str:
    evals = "".join(
        f"  - prompt: conversation {i}\n    checks:\n      - match: '*done*'\n        prompt: try again\n"
        "        checks: [{match: '*done*'}]\n"
        for i in range(n)
    )
    return f"name: loop\nmodel: fake/m\nevals:\n{evals}"


def test_a_suite_plays_on_one_event_loop_with_its_conversations_overlapping(fake):
    """40 two-turn trees at concurrency 20, 50 ms a reply: every turn where it belongs, 20 calls in flight at
    once (one thread: only the event loop can have overlapped them), and the wall time near the ideal."""
    fake.latency = 0.05
    for i in range(40):
        fake.script(f"conversation {i}", ["not yet", f"done {i}"])
    registry = EndpointRegistry(
        EndpointConfig(name="default", base_url=fake.base_url, api_key_env=KEY_ENV),
        {
            "fake": EndpointConfig(
                name="fake", base_url=fake.base_url, api_key_env=KEY_ENV, max_concurrency=20
            )
        },
    )
    report = run_suite(load_suite(tree_suite(40)), registry, concurrency=20)
    assert report.status == "passed" and len(report.evals) == 40
    for i, result in enumerate(report.evals):
        assert [turn.response for turn in result.turns] == ["not yet", f"done {i}"]
        assert result.passed_on_turn == 2
    assert fake.max_in_flight == 20
    assert report.totals.duration_s < 2 * (40 / 20) * 2 * 0.05 + 0.5  # ideal 0.2 s, with room for a slow CI


@pytest.mark.parametrize(("endpoints", "in_flight"), [(("a", "a"), 10), (("a", "b"), 20)])
def test_plays_go_together_each_at_its_concurrency_within_their_endpoints_cap(fake, endpoints, in_flight):
    """Two suites played together (a matrix's variants), 10 at a time each: on one endpoint whose cap is 10,
    10 calls in flight in all; on two, 20, and both end in about the time of one."""
    fake.latency = 0.1
    for i in range(20):
        fake.script(f"conversation {i}", ["not yet", f"done {i}"])
    registry = EndpointRegistry(
        EndpointConfig(name="default", base_url=fake.base_url, api_key_env=KEY_ENV),
        {
            name: EndpointConfig(name=name, base_url=fake.base_url, api_key_env=KEY_ENV, max_concurrency=10)
            for name in ("a", "b")
        },
    )
    suite = load_suite(tree_suite(20))
    plays = [Play(suite, registry, model=f"{name}/m", concurrency=10) for name in endpoints]
    reports = run_plays(plays)
    assert [report.endpoint for report in reports] == list(endpoints)
    for report in reports:
        assert report.status == "passed" and len(report.evals) == 20
        assert [turn.response for turn in report.evals[7].turns] == ["not yet", "done 7"]
    assert fake.max_in_flight == in_flight
    assert len(fake.chat_requests()) == 2 * 20 * 2


def test_a_judge_runs_beside_the_loop_not_on_it(fake):
    """A judged check calls its model from a thread: the loop goes on playing the others meanwhile."""
    fake.latency = 0.05
    fake.rule("polite", '{"score": 0.9, "reason": "fine"}', where="any", model="j")
    source = "name: judged\nmodel: fake/m\njudge: fake/j\nevals:\n" + "".join(
        f"  - prompt: q{i}\n    checks: [{{llm_judge: {{criteria: Is it polite?, threshold: 0.5}}}}]\n"
        for i in range(10)
    )
    registry = EndpointRegistry(
        EndpointConfig(name="default", base_url=fake.base_url, api_key_env=KEY_ENV),
        {
            "fake": EndpointConfig(
                name="fake", base_url=fake.base_url, api_key_env=KEY_ENV, max_concurrency=10
            )
        },
    )
    report = run_suite(load_suite(source), registry, concurrency=10)
    assert report.status == "passed", [r.verdict for r in report.evals]
    assert all(result.turns[0].checks[0].score == pytest.approx(0.9) for result in report.evals)
    assert fake.max_in_flight >= 5  # judges and replies overlapped
    # The judges' calls, made from grading threads, went out on the loop (aiohttp), as the replies' did.
    agents = {request["headers"].get("user-agent", "").split("/")[0] for request in fake.requests}
    assert agents == {"Python"}, agents


def test_a_simulated_user_and_its_judged_stop_go_out_on_the_loop(fake):
    """A simulated user's messages and a judged stop condition are model calls too: they go out through the
    loop's HTTP client, as the agent's do, and the conversation plays to its stop."""
    fake.rule("Reply with the user's next message", "Book it for two, please.", where="any", model="u")
    fake.rule("Booked for two", '{"score": 1, "reason": "booked"}', where="any", model="j")
    fake.rule("Has the agent booked", '{"score": 0, "reason": "not yet"}', where="any", model="j")
    fake.script("I want a table", ["For how many?", "Booked for two: confirmed."])
    source = (
        "name: sim\nmodel: fake/m\njudge: fake/j\nevals:\n  - prompt: I want a table\n    simulate:\n"
        "      persona: A diner who wants a table for two.\n      model: fake/u\n      max_turns: 3\n"
        "      stop_when: {llm_judge: {criteria: Has the agent booked the table?, threshold: 0.5}}\n"
        "    checks: [{contains: Booked}]\n"
    )
    registry = EndpointRegistry(
        EndpointConfig(name="default", base_url=fake.base_url, api_key_env=KEY_ENV),
        {"fake": EndpointConfig(name="fake", base_url=fake.base_url, api_key_env=KEY_ENV)},
    )
    report = run_suite(load_suite(source), registry, concurrency=2)
    result = report.evals[0]
    assert result.status == "passed", result.verdict
    assert [turn.response for turn in result.turns] == ["For how many?", "Booked for two: confirmed."]
    assert {body["model"] for body in fake.chat_requests()} == {"m", "u", "j"}
    agents = {request["headers"].get("user-agent", "").split("/")[0] for request in fake.requests}
    assert agents == {"Python"}, agents


@pytest.mark.parametrize("answer", UNREADABLE, ids=["bad-json", "html", "no-choices", "no-message", "null"])
def test_a_200_that_is_no_chat_completion_is_retried_then_explained(fake, answer):
    fake.fail_next(3, reply=answer)
    sleeps: list[float] = []
    assert complete(client_for(fake, sleeps)).text == "OK"
    assert len(sleeps) == 3 and len(fake.chat_requests()) == 4
    fake.fail_next(10, reply=answer)
    with pytest.raises(EndpointError, match=r"fake sent an unreadable reply: .*gave up after 3 attempts"):
        complete(client_for(fake, max_retries=2))


def test_unreadable_replies_are_counted_in_the_wait_reported(fake):
    fake.fail_next(12, reply=Reply(choices=[]))
    waits: list[RetryWait] = []
    with retry_hooks(waits.append):
        assert complete(client_for(fake)).text == "OK"
    assert waits
    for wait in waits:
        times = "" if wait.attempts == 1 else f" ({wait.attempts} times)"
        assert wait.reason == f"endpoint sent an unreadable reply{times}"


def test_how_a_reply_ended_is_kept(fake):
    fake.script("x", [Reply(null_content=True, refusal="I can't help with that", finish_reason="stop")])
    refused = complete(client_for(fake))
    assert (refused.text, refused.finish_reason, refused.refusal) == ("", "stop", "I can't help with that")
    fake.script("x", [Reply("cut", finish_reason="content_filter")])
    assert complete(client_for(fake)).finish_reason == "content_filter"
