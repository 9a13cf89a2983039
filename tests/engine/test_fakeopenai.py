"""Proves tests/fakeopenai/ behaves like the OpenAI API as seen through the real openai client.

No Django needed: ``python -m pytest tests/engine/test_fakeopenai.py -q -p no:django``.
"""

from __future__ import annotations

import math
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest

from tests.fakeopenai import EMBEDDING_DIMENSIONS, FakeOpenAI, Reply

QUESTION = "What is 10*10?"


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        yield server


def make_client(fake: FakeOpenAI, api_key: str = "test-key", **kwargs) -> openai.OpenAI:
    # max_retries=0 so every injected fault reaches the test instead of being retried away.
    return openai.OpenAI(base_url=fake.base_url, api_key=api_key, max_retries=0, **kwargs)


def ask(client: openai.OpenAI, messages: list[dict], **kwargs) -> str:
    response = client.chat.completions.create(model="gpt-test", messages=messages, **kwargs)
    return response.choices[0].message.content


def user(text: str) -> dict:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict:
    return {"role": "assistant", "content": text}


def cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=True))
    return dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)))


def test_script_replies_by_turn(fake):
    fake.script(QUESTION, ["100", "105"])
    client = make_client(fake)

    assert ask(client, [user(QUESTION)]) == "100"
    assert ask(client, [user(QUESTION), assistant("100"), user("Now add 5.")]) == "105"
    # Past the end of the script the last reply repeats.
    third_turn = [user(QUESTION), assistant("100"), user("Now add 5."), assistant("105"), user("Again?")]
    assert ask(client, third_turn) == "105"
    # Stateless: a redelivered first turn gets the first reply again.
    assert ask(client, [user(QUESTION)]) == "100"


def test_script_key_ignores_system_prompt_and_accepts_content_parts(fake):
    fake.script(QUESTION, ["100"])
    client = make_client(fake)
    messages = [
        {"role": "system", "content": "You are a calculator."},
        {"role": "user", "content": [{"type": "text", "text": QUESTION}]},
    ]
    assert ask(client, messages) == "100"


def test_rules_match_last_message_and_scripts_win(fake):
    fake.rule("Rate the answer", "SCORE: 4")
    fake.rule("Rate", "never reached: earlier rule wins")
    fake.script(QUESTION, ["100"])
    client = make_client(fake)

    assert ask(client, [user("Rate the answer below.\n\nAnswer: 100")]) == "SCORE: 4"
    # Only the last message counts for rules.
    assert ask(client, [user("Rate the answer"), assistant("ok"), user("thanks")]) == "OK"
    # Case-sensitive substring.
    assert ask(client, [user("rate the answer")]) == "OK"
    assert ask(client, [user(QUESTION)]) == "100"


def test_default_reply(fake):
    client = make_client(fake)
    assert ask(client, [user("anything")]) == "OK"
    fake.default_reply = "Sure."
    assert ask(client, [user("anything")]) == "Sure."


def test_rate_limit_exposes_retry_after(fake):
    fake.fail_next(1, status=429, retry_after=2)
    client = make_client(fake)

    with pytest.raises(openai.RateLimitError) as excinfo:
        ask(client, [user("hi")])
    assert excinfo.value.response.headers["retry-after"] == "2"
    assert excinfo.value.code == "rate_limit_exceeded"
    # The fault is used up.
    assert ask(client, [user("hi")]) == "OK"


def test_server_error_and_fault_scoped_to_conversation(fake):
    fake.fail_next(1, status=500, first_user="conversation A")
    client = make_client(fake)

    assert ask(client, [user("conversation B")]) == "OK"
    with pytest.raises(openai.InternalServerError) as excinfo:
        ask(client, [user("conversation A")])
    assert excinfo.value.status_code == 500
    assert ask(client, [user("conversation A")]) == "OK"


def test_scripted_error_reply(fake):
    fake.script(QUESTION, [Reply(status=429, retry_after=0.5, text="slow down"), "100"])
    client = make_client(fake)

    with pytest.raises(openai.RateLimitError) as excinfo:
        ask(client, [user(QUESTION)])
    assert excinfo.value.response.headers["retry-after"] == "0.5"
    assert excinfo.value.message.endswith("slow down")


def test_hang_triggers_client_timeout(fake):
    fake.script(QUESTION, [Reply(text="too late", hang=3)])
    client = make_client(fake, timeout=0.2)

    started = time.perf_counter()
    with pytest.raises(openai.APITimeoutError):
        ask(client, [user(QUESTION)])
    assert time.perf_counter() - started < 1.0

    fake.fail_next(1, hang=3)
    with pytest.raises(openai.APITimeoutError):
        ask(client, [user("hello")])
    # The hung request is already in the log, still unanswered.
    assert fake.requests[-1]["status"] is None


def test_api_key_mismatch_is_401():
    with FakeOpenAI(api_key="sk-right") as fake:
        with pytest.raises(openai.AuthenticationError) as excinfo:
            ask(make_client(fake, api_key="sk-wrong"), [user("hi")])
        assert excinfo.value.code == "invalid_api_key"
        # echoed, as some providers do
        assert excinfo.value.body["message"].startswith("Incorrect API key provided: sk-wrong. ")
        assert ask(make_client(fake, api_key="sk-right"), [user("hi")]) == "OK"


def test_down_and_up(fake):
    client = make_client(fake)
    fake.down()
    with pytest.raises(openai.InternalServerError) as excinfo:
        ask(client, [user("hi")])
    assert excinfo.value.status_code == 503
    fake.up()
    assert ask(client, [user("hi")]) == "OK"


def test_usage_counts_words(fake):
    fake.script(
        "Say hi please",
        ["hello there", Reply("x", omit_usage=True), Reply("y", usage={"prompt_tokens": 1000})],
    )
    client = make_client(fake)
    messages = [{"role": "system", "content": "You are terse."}, user("Say hi please")]

    usage = client.chat.completions.create(model="gpt-test", messages=messages).usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (6, 2, 8)

    second = messages + [assistant("hello there"), user("again")]
    assert client.chat.completions.create(model="gpt-test", messages=second).usage is None

    third = second + [assistant("x"), user("more")]
    usage = client.chat.completions.create(model="gpt-test", messages=third).usage
    assert (usage.prompt_tokens, usage.completion_tokens, usage.total_tokens) == (1000, 1, 1001)


def test_embeddings_cosine(fake):
    client = make_client(fake)
    texts = ["The cat sat on the mat.", "the CAT sat on the mat", "Quarterly revenue grew in Europe."]

    # Default path: the client asks for base64 and decodes it itself.
    response = client.embeddings.create(model="embed-test", input=texts)
    same, same_normalised, unrelated = (item.embedding for item in response.data)
    assert len(same) == EMBEDDING_DIMENSIONS
    assert cosine(same, same_normalised) == pytest.approx(1.0)
    assert cosine(same, unrelated) < 0.9
    assert response.usage.prompt_tokens == 6 + 6 + 5

    floats = client.embeddings.create(model="embed-test", input=texts[0], encoding_format="float")
    assert floats.data[0].embedding == pytest.approx(same, abs=1e-6)

    fake.embedding("special", [1.0, 0.0, 0.0])
    assert client.embeddings.create(model="embed-test", input="special").data[0].embedding == [1.0, 0.0, 0.0]


def test_models_lists_requested_models(fake):
    client = make_client(fake)
    ask(client, [user("hi")])
    ids = [model.id for model in client.models.list()]
    assert ids == ["fake-model", "gpt-test"]


def test_request_log_records_full_conversation(fake):
    client = make_client(fake)
    conversation = [{"role": "system", "content": "Be brief."}, user(QUESTION), assistant("100"), user("+5?")]
    ask(client, conversation)
    ask(client, [user("unrelated")])

    entry = fake.requests[0]
    assert entry["path"] == "/v1/chat/completions"
    assert entry["body"]["messages"] == conversation
    assert entry["headers"]["Authorization"] == "Bearer test-key"
    assert entry["status"] == 200
    assert [body["messages"] for body in fake.chat_requests(QUESTION)] == [conversation]
    assert len(fake.chat_requests()) == 2

    fake.rule("x", "y")
    fake.reset()
    assert fake.requests == []
    assert ask(client, [user("x")]) == "OK"


def test_per_reply_latency_overrides_global(fake):
    fake.latency = 0.5
    fake.script(QUESTION, [Reply("fast", latency=0.0)])
    client = make_client(fake)
    started = time.perf_counter()
    assert ask(client, [user(QUESTION)]) == "fast"
    assert time.perf_counter() - started < 0.4


def test_twenty_concurrent_requests_overlap():
    with FakeOpenAI(latency=0.1) as fake:
        client = make_client(fake)
        started = time.perf_counter()
        with ThreadPoolExecutor(max_workers=20) as pool:
            replies = list(pool.map(lambda i: ask(client, [user(f"request {i}")]), range(20)))
        elapsed = time.perf_counter() - started
    assert replies == ["OK"] * 20
    assert elapsed < 1.0


def test_stopped_server_refuses_reused_connections():
    fake = FakeOpenAI().start()
    client = make_client(fake, timeout=1.0)
    assert ask(client, [user("hi")]) == "OK"
    fake.stop()
    # The client's pooled keep-alive connection must not keep talking to a stopped fake.
    with pytest.raises(openai.APIConnectionError):
        ask(client, [user("hi")])


def test_models_can_be_made_to_fail(fake):
    client = make_client(fake)
    assert [model.id for model in client.models.list()] == ["fake-model"]
    fake.fail_models(404)
    with pytest.raises(openai.NotFoundError):
        client.models.list()
    fake.reset()
    assert [model.id for model in client.models.list()] == ["fake-model"]


def test_storm_fails_requests_at_its_rates_until_it_ends(fake):
    fake.storm(rate_429=0.3, rate_500=0.1, retry_after=2, seed=7)
    client = make_client(fake)
    outcomes = []
    for i in range(200):
        try:
            outcomes.append(ask(client, [user(f"question {i}")]))
        except openai.RateLimitError as exc:
            assert exc.response.headers["retry-after"] == "2"
            outcomes.append(429)
        except openai.InternalServerError as exc:
            outcomes.append(exc.status_code)
    assert 40 <= outcomes.count(429) <= 80 and 8 <= outcomes.count(500) <= 32
    assert outcomes.count("OK") == 200 - outcomes.count(429) - outcomes.count(500)
    fake.storm()
    assert [ask(client, [user("calm")]) for _ in range(20)] == ["OK"] * 20


def test_a_stopped_server_comes_back_on_the_same_port_and_never_answered_what_it_dropped():
    fake = FakeOpenAI(latency=2).start()
    try:
        base_url = fake.base_url
        client = make_client(fake, timeout=5.0)
        with ThreadPoolExecutor(max_workers=1) as pool:
            in_flight = pool.submit(ask, client, [user("cut off")])
            time.sleep(0.5)
            fake.stop()
            with pytest.raises(openai.APIConnectionError):
                in_flight.result()
        with pytest.raises(openai.APIConnectionError):  # refused while it is down
            ask(client, [user("hi")])
        fake.latency = 0
        fake.start()
        assert fake.base_url == base_url
        assert ask(client, [user("hi")]) == "OK"
        # The dropped request was never answered.
        assert [entry["status"] for entry in fake.requests] == [None, 200]
    finally:
        fake.stop()
