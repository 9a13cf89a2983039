"""The OpenAI client wrapper against the real fake server: retries, Retry-After, timeouts, usage, embeddings."""

from __future__ import annotations

import time

import pytest

from engine.clients import EndpointConfig, EndpointError, OpenAIClient
from engine.retries import LocalPauseBoard, RetryWait, retry_hooks
from tests.fakeopenai import FakeOpenAI, Reply

KEY_ENV = "EVALSITE_TEST_CLIENT_KEY"


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "sk-client")
    with FakeOpenAI(api_key="sk-client") as server:
        yield server


class FakeTime:
    """A sleep that returns at once but moves the client's clock on, so retry budgets run out as if it slept."""

    def __init__(self, sleeps: list[float]) -> None:
        self.sleeps = sleeps
        self.slept = 0.0

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.slept += seconds

    def clock(self) -> float:
        return time.monotonic() + self.slept


def client_for(
    fake: FakeOpenAI, sleeps: list[float] | None = None, pauses: LocalPauseBoard | None = None, **overrides
) -> OpenAIClient:
    config = EndpointConfig(
        name="fake",
        base_url=fake.base_url,
        api_key_env=KEY_ENV,
        price_input=2.0,
        price_output=10.0,
        **overrides,
    )
    fake_time = FakeTime(sleeps if sleeps is not None else [])
    # A board of its own: a pause one test leaves behind must not hold the next one back.
    return OpenAIClient(
        config, sleep=fake_time.sleep, clock=fake_time.clock, pauses=pauses or LocalPauseBoard()
    )


def test_completion_text_usage_and_cost(fake):
    """Usage comes from the response; cost from the endpoint's per-million prices."""
    fake.script(
        "hello there", [Reply("general kenobi", usage={"prompt_tokens": 1000, "completion_tokens": 500})]
    )
    completion = client_for(fake).complete("m", [{"role": "user", "content": "hello there"}])
    assert completion.text == "general kenobi"
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (1000, 500)
    assert not completion.usage.estimated
    assert completion.cost == pytest.approx((1000 * 2.0 + 500 * 10.0) / 1e6)


def test_missing_usage_is_estimated_and_marked(fake):
    fake.script("hi", [Reply("a reply of some length", omit_usage=True)])
    completion = client_for(fake).complete("m", [{"role": "user", "content": "hi"}])
    assert completion.usage.estimated
    assert completion.usage.completion_tokens == 6  # 23 characters / 4, rounded up


def test_429_honours_retry_after(fake):
    """The wait before the retry is the server's Retry-After, not our backoff."""
    fake.fail_next(2, status=429, retry_after=1.5)
    sleeps: list[float] = []
    completion = client_for(fake, sleeps).complete("m", [{"role": "user", "content": "x"}])
    assert completion.text == "OK"
    assert sleeps == [1.5, 1.5]


def test_5xx_is_retried_with_backoff_then_gives_up(fake):
    fake.fail_next(10, status=503)
    sleeps: list[float] = []
    with pytest.raises(EndpointError, match=r"HTTP 503 from fake: .*gave up after 4 attempts"):
        client_for(fake, sleeps, max_retries=3).complete("m", [{"role": "user", "content": "x"}])
    assert len(sleeps) == 3
    assert all(0 < delay <= 2 for delay in sleeps)  # full jitter under 0.5, 1, 2 s
    assert len(fake.chat_requests()) == 4  # one layer of retries: 1 try + 3 retries, no hidden extras


def test_4xx_other_than_429_is_not_retried(fake):
    fake.api_key = "sk-other"
    sleeps: list[float] = []
    with pytest.raises(EndpointError, match="HTTP 401 from fake: Incorrect API key"):
        client_for(fake, sleeps).complete("m", [{"role": "user", "content": "x"}])
    assert sleeps == []
    assert len(fake.requests) == 1


def test_a_key_echoed_in_an_error_never_reaches_the_message(fake):
    fake.api_key = "sk-other"  # so the key we send is refused, and the fake quotes it back
    with pytest.raises(EndpointError) as raised:
        client_for(fake, []).complete("m", [{"role": "user", "content": "x"}])
    assert "sk-client" in str(fake.requests[0]["headers"]["authorization"])
    assert "sk-client" not in str(raised.value) and "Incorrect API key provided: " in str(raised.value)


def test_timeout_is_explicit_and_retried(fake):
    fake.fail_next(1, hang=2)
    sleeps: list[float] = []
    completion = client_for(fake, sleeps, timeout=0.3).complete("m", [{"role": "user", "content": "x"}])
    assert completion.text == "OK"
    assert len(sleeps) == 1
    fake.fail_next(5, hang=2)
    with pytest.raises(EndpointError, match=r"timed out after 0.3s .*gave up after 2 attempts"):
        client_for(fake, timeout=0.3, max_retries=1).complete("m", [{"role": "user", "content": "x"}])


def test_unreachable_endpoint(monkeypatch):
    monkeypatch.setenv(KEY_ENV, "k")
    config = EndpointConfig(name="gone", base_url="http://127.0.0.1:9/v1", api_key_env=KEY_ENV, max_retries=1)
    with pytest.raises(EndpointError, match="cannot reach gone at http://127.0.0.1:9/v1"):
        OpenAIClient(config, sleep=lambda _: None).complete("m", [{"role": "user", "content": "x"}])


def test_embeddings(fake):
    vectors, usage, _ = client_for(fake).embed("e", ["the cat sat", "the cat sat"])
    assert len(vectors) == 2 and vectors[0] == pytest.approx(vectors[1])
    assert usage.prompt_tokens > 0


def test_key_is_read_from_the_named_variable(fake, monkeypatch):
    """The endpoint stores the variable's name; the key itself is only in the environment."""
    monkeypatch.setenv(KEY_ENV, "sk-client")
    client_for(fake).complete("m", [{"role": "user", "content": "x"}])
    assert fake.requests[-1]["headers"]["authorization"] == "Bearer sk-client"


UNREADABLE = [
    Reply(raw='{"choices": [ not json'),  # a JSON content type over a body cut short
    Reply(raw="<html><body>502 Bad Gateway</body></html>", content_type="text/html"),  # a proxy's page
    Reply(choices=[]),
    Reply(choices=[{"index": 0, "finish_reason": "stop"}]),  # a choice without a message
    Reply(choices=[{"index": 0, "message": None}]),
]


@pytest.mark.parametrize("answer", UNREADABLE, ids=["bad-json", "html", "no-choices", "no-message", "null"])
def test_a_200_that_is_no_chat_completion_is_retried_like_a_502(fake, answer):
    """A gateway's garbage with status 200 is asked again within the budget, then an EndpointError."""
    fake.fail_next(3, reply=answer)
    sleeps: list[float] = []
    assert client_for(fake, sleeps).complete("m", [{"role": "user", "content": "x"}]).text == "OK"
    assert len(sleeps) == 3 and len(fake.chat_requests()) == 4
    fake.fail_next(10, reply=answer)
    with pytest.raises(EndpointError, match=r"fake sent an unreadable reply: .*gave up after 3 attempts"):
        client_for(fake, max_retries=2).complete("m", [{"role": "user", "content": "x"}])


def test_unreadable_replies_are_counted_in_the_wait_reported(fake):
    """The page says what the call waits out, and how many unreadable replies it got so far."""
    fake.fail_next(12, reply=Reply(choices=[]))
    waits: list[RetryWait] = []
    with retry_hooks(waits.append):
        assert client_for(fake).complete("m", [{"role": "user", "content": "x"}]).text == "OK"
    assert waits  # the longer waits (1 s or more) are reported
    for wait in waits:
        times = "" if wait.attempts == 1 else f" ({wait.attempts} times)"
        assert wait.reason == f"endpoint sent an unreadable reply{times}"


def test_how_a_reply_ended_is_kept(fake):
    """finish_reason, a refusal and null content are read as sent, for the loop to judge (engine.replies)."""
    fake.script("a", [Reply("cut", finish_reason="length")])
    fake.script("b", [Reply(null_content=True, refusal="I can't help with that")])
    client = client_for(fake)
    cut = client.complete("m", [{"role": "user", "content": "a"}])
    assert (cut.text, cut.finish_reason, cut.refusal) == ("cut", "length", None)
    refused = client.complete("m", [{"role": "user", "content": "b"}])
    assert (refused.text, refused.finish_reason, refused.refusal) == ("", "stop", "I can't help with that")
