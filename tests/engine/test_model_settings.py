"""Generation settings reach the wire: what the fake endpoint received from the model under test, the judge
and the simulated user; a setting the endpoint refuses ends the run's starts with one line naming it."""

from __future__ import annotations

import pytest

from engine.cache import MemoryStore
from engine.clients import EndpointConfig, EndpointRegistry, MockClient, OpenAIClient
from engine.clients.settings import Refusals
from engine.loader import load_suite
from engine.options import RunOptions, apply
from engine.outcomes import Status
from engine.report import Detail, format_report
from engine.runner import run_suite
from engine.schema import MockSpec
from engine.schema.settings import ModelSettings
from tests.fakeopenai import FakeOpenAI, Reply

JUDGE_SAYS = '{"score": 1, "reason": "fine"}'
SUITE = """
name: settings
model: agent-model
judge: judge-model
model_settings:
  temperature: 0.2
  max_tokens: 200
  seed: 7
  stop: ["END"]
  response_format: json_object
  reasoning_effort: low
  extra_body: {store: false, top_k: 5}
  extra_headers: {X-Trace: suite}
judge_settings: {temperature: 0, max_completion_tokens: 50, extra_headers: {X-Role: judge}}
user_settings: {temperature: 1.1, top_p: 0.9}
evals:
  - id: plain
    prompt: Say hello.
    checks: [{llm_judge: {criteria: It greets.}}]
  - id: own
    prompt: Say goodbye.
    model_settings: {temperature: 0.7, extra_body: {top_k: 9}}
    checks: [{contains: OK}]
  - id: talk
    prompt: Book me a table.
    simulate:
      persona: You want a table for two.
      max_turns: 2
    checks: [{contains: OK}]
"""


@pytest.fixture
def fake():
    with FakeOpenAI() as server:
        server.rule("Criteria:", JUDGE_SAYS)
        yield server


def registry_for(fake: FakeOpenAI) -> EndpointRegistry:
    return EndpointRegistry(
        default=EndpointConfig(name="default", base_url=fake.base_url, api_key_env="NO_KEY")
    )


def sent(fake: FakeOpenAI, model: str, first_user: str | None = None) -> list[dict]:
    return [body for body in fake.chat_requests(first_user) if body["model"] == model]


def test_each_role_sends_its_own_settings_and_an_eval_goes_over_the_suites(fake):
    report = run_suite(load_suite(SUITE), registry_for(fake), concurrency=1)
    assert [result.status for result in report.evals] != [Status.ERROR] * 3
    plain = sent(fake, "agent-model", "Say hello.")[0]
    assert {key: plain[key] for key in plain if key not in ("model", "messages")} == {
        "temperature": 0.2,
        "max_tokens": 200,
        "seed": 7,
        "stop": ["END"],
        "response_format": {"type": "json_object"},  # JSON mode as OpenAI takes it, from the shorthand
        "reasoning_effort": "low",
        "store": False,
        "top_k": 5,
    }
    own = sent(fake, "agent-model", "Say goodbye.")[0]
    assert (own["temperature"], own["top_k"], own["seed"], own["store"]) == (0.7, 9, 7, False)

    judged = [body for body in sent(fake, "judge-model") if "Criteria:" in body["messages"][-1]["content"]]
    assert judged and all(body["temperature"] == 0 and body["max_completion_tokens"] == 50 for body in judged)
    assert all("seed" not in body and "top_p" not in body for body in judged)
    user = [
        body for body in sent(fake, "judge-model") if "You are the user" in body["messages"][0]["content"]
    ]
    assert user and all((body["temperature"], body["top_p"]) == (1.1, 0.9) for body in user)
    assert all("max_completion_tokens" not in body for body in user)

    roles = [(entry["body"]["model"], entry["headers"]) for entry in fake.requests]
    assert {headers.get("x-trace") for model, headers in roles if model == "agent-model"} == {"suite"}
    judge_headers = [headers for model, headers in roles if model == "judge-model"]
    assert {headers.get("x-role") for headers in judge_headers} == {"judge", None}  # the user's: no header
    assert all("x-trace" not in headers for headers in judge_headers)


def test_the_threaded_client_sends_settings_headers_and_extra_body_last(fake):
    client = OpenAIClient(EndpointConfig(name="f", base_url=fake.base_url, api_key_env="NO_KEY"))
    settings = ModelSettings(temperature=0.5, seed=3, extra_body={"seed": 4}, extra_headers={"X-Env": "ci"})
    client.complete("m", [{"role": "user", "content": "hi"}], settings=settings)
    client.complete("m", [{"role": "user", "content": "hi"}], temperature=0.0, settings=settings)
    first, second = fake.chat_requests()
    assert (first["temperature"], first["seed"]) == (0.5, 4)  # extra_body as given, over `seed`
    assert second["temperature"] == 0.0  # the call's own temperature (a check's) over the settings'
    assert [headers.get("x-env") for headers in fake.chat_headers()] == ["ci", "ci"]


def test_a_launch_over_the_suite_sets_what_is_sent(fake):
    suite = apply(load_suite(SUITE), RunOptions(model_settings=ModelSettings(temperature=0.0, seed=11)))
    run_suite(suite, registry_for(fake), concurrency=1)
    bodies = sent(fake, "agent-model", "Say hello.")
    assert (bodies[0]["temperature"], bodies[0]["seed"], bodies[0]["max_tokens"]) == (0.0, 11, 200)
    own = sent(fake, "agent-model", "Say goodbye.")[0]
    assert (own["temperature"], own["seed"], own["top_k"]) == (0.0, 11, 9)  # over the eval's own, key by key


UNSET = """
name: unset
model: agent-model
cache: true
model_settings: {temperature: 0.2, max_tokens: 200, seed: 7, extra_body: {store: false}}
evals:
  - id: seeded
    prompt: Say hello.
    checks: [{contains: OK}]
  - id: unseeded
    prompt: Say goodbye.
    model_settings: {seed: null, temperature: null, extra_body: null}
    checks: [{contains: OK}]
"""


def test_a_null_in_an_evals_settings_sends_none_of_that_key_for_that_eval_alone(fake):
    run_suite(load_suite(UNSET), registry_for(fake), concurrency=1)
    [seeded] = sent(fake, "agent-model", "Say hello.")
    assert (seeded["seed"], seeded["temperature"], seeded["max_tokens"], seeded["store"]) == (
        7,
        0.2,
        200,
        False,
    )
    [unseeded] = sent(fake, "agent-model", "Say goodbye.")
    assert {key: unseeded[key] for key in unseeded if key not in ("model", "messages")} == {"max_tokens": 200}


def test_a_null_keeps_removing_through_a_launch_and_a_launchs_null_removes_the_suites_and_the_evals(fake):
    # The launch's settings go over the eval's (its null kept) and then over the suite's.
    over = RunOptions.model_validate({"model_settings": {"max_tokens": 50}})
    run_suite(apply(load_suite(UNSET), over), registry_for(fake), concurrency=1)
    [unseeded] = sent(fake, "agent-model", "Say goodbye.")
    assert {key: unseeded[key] for key in unseeded if key not in ("model", "messages")} == {"max_tokens": 50}
    fake.reset()
    fake.rule("Criteria:", JUDGE_SAYS)
    # As a run stores its launch's options and reads them back: the null survives the trip.
    removed = RunOptions.model_validate({"model_settings": {"max_tokens": None, "seed": 3}}).stored()
    assert removed == {"model_settings": {"max_tokens": None, "seed": 3}}
    run_suite(apply(load_suite(UNSET), removed), registry_for(fake), concurrency=1)
    [seeded] = sent(fake, "agent-model", "Say hello.")
    [unseeded] = sent(fake, "agent-model", "Say goodbye.")
    assert "max_tokens" not in seeded and "max_tokens" not in unseeded
    assert seeded["seed"] == unseeded["seed"] == 3  # a launch's value over the eval's null


def test_a_removed_setting_is_cached_apart_from_the_call_that_sent_it(fake):
    """The cache's key is what is sent: the seedless call is no hit for the seeded one's answer, and the same
    call made with no seed anywhere is a hit for it."""
    store = MemoryStore()
    seeded = load_suite(
        UNSET.replace("    model_settings: {seed: null, temperature: null, extra_body: null}\n", "")
    )
    run_suite(seeded, registry_for(fake), concurrency=1, store=store)
    assert [body.get("seed") for body in sent(fake, "agent-model", "Say goodbye.")] == [7]
    run_suite(load_suite(UNSET), registry_for(fake), concurrency=1, store=store)
    bodies = sent(fake, "agent-model", "Say goodbye.")
    assert [body.get("seed") for body in bodies] == [7, None]  # asked again, without the seed
    assert len(sent(fake, "agent-model", "Say hello.")) == 1  # the seeded eval was answered from the cache
    never = UNSET.replace("model_settings: {temperature: 0.2, max_tokens: 200, seed: 7, extra_body: {store: false}}",
                          "model_settings: {max_tokens: 200}")  # fmt: skip
    report = run_suite(load_suite(never), registry_for(fake), concurrency=1, store=store)
    assert len(sent(fake, "agent-model", "Say goodbye.")) == 2  # the same request: answered from the cache
    assert report.evals[1].turns[0].cached


REFUSED = """
name: refused
model: agent-model
model_settings: {seed: 7}
evals:
"""


@pytest.mark.parametrize(
    ("style", "said"),
    [
        ("unrecognized", "Unrecognized request argument supplied: seed"),
        ("unsupported", "Unsupported parameter: 'seed' is not supported with this model."),
        ("unnamed", "This model does not support one of the options sent."),  # the error's `param` names it
    ],
)
def test_a_refused_setting_is_asked_once_and_no_more_conversations_start(fake, style, said):
    fake.refuse("seed", style)
    suite = load_suite(
        REFUSED + "".join(f"  - {{prompt: Question {n}?, checks: [{{contains: OK}}]}}\n" for n in range(6))
    )
    refusals = Refusals()
    report = run_suite(suite, registry_for(fake), concurrency=1, refusals=refusals)
    assert len(fake.chat_requests()) == 1  # not retried, and no other conversation asked
    line = f"the endpoint refused model_settings.seed: {said}"
    # The conversations it kept from starting are listed as not started, not dropped from the report.
    assert [result.status for result in report.evals] == [Status.ERROR] + [Status.CANCELLED] * 5
    assert report.stop_reason == line and report.status == Status.ERROR
    assert {result.verdict for result in report.evals[1:]} == {f"not started: {line}"}
    assert str(refusals.first) == line
    assert report.evals[0].error == line


def test_conversations_in_flight_when_a_setting_is_refused_are_listed_not_errors_again(fake):
    fake.refuse("seed")
    fake.latency = 0.2  # the five calls of the first wave are all out before the first is refused
    suite = load_suite(
        REFUSED + "".join(f"  - {{prompt: Question {n}?, checks: [{{contains: OK}}]}}\n" for n in range(8))
    )
    report = run_suite(suite, registry_for(fake), concurrency=5)
    statuses = [result.status for result in report.evals]
    assert statuses.count(Status.ERROR) == 1 and statuses.count(Status.CANCELLED) == 7
    assert len(report.evals) == 8 and report.stop_reason.startswith(
        "the endpoint refused model_settings.seed"
    )
    assert "Overall: ⏹ STOPPED (the endpoint refused model_settings.seed" in format_report(
        report, Detail.COMPACT
    )
    assert format_report(report, Detail.COMPACT).count("💥 ERROR") == 1


@pytest.mark.parametrize(
    ("style", "said"), [("unsupported", "Unsupported"), ("unnamed", "This model does not")]
)
def test_a_refused_judge_setting_is_named_as_the_judges(fake, style, said):
    fake.refuse(
        "max_completion_tokens", style
    )  # judges go through the openai client, which reads `param` too
    report = run_suite(load_suite(SUITE), registry_for(fake), concurrency=1)
    errors = [result.error for result in report.evals if result.status == Status.ERROR]
    assert errors and errors[0].startswith(
        f"the endpoint refused judge_settings.max_completion_tokens: {said}"
    )
    # The conversations after it did not start: listed so, not played.
    assert report.evals[-1].status == Status.CANCELLED and report.evals[-1].verdict.startswith("not started")


def test_a_400_that_names_no_setting_is_an_ordinary_error(fake):
    fake.refuse("messages")
    suite = load_suite(
        REFUSED + "".join(f"  - {{prompt: Question {n}?, checks: [{{contains: OK}}]}}\n" for n in range(3))
    )
    report = run_suite(suite, registry_for(fake), concurrency=1)
    assert len(report.evals) == 3
    assert all("refused" not in (result.error or "") for result in report.evals)


def test_the_mock_cuts_its_reply_at_a_stop_sequence_and_at_max_tokens():
    mock = MockClient(MockSpec(default="Hello there. END of the long reply that goes on and on."))
    ask = [{"role": "user", "content": "hi"}]
    assert mock.complete("m", ask, settings=ModelSettings(stop="END")).text == "Hello there. "
    cut = mock.complete("m", ask, settings=ModelSettings(max_tokens=2))
    assert (cut.text, cut.finish_reason) == ("Hello th", "length")
    assert mock.complete("m", ask, settings=ModelSettings(temperature=0)).text.endswith("on and on.")


TOOL_SUITE = """
name: tool-settings
model: agent-model
judge: judge-model
model_settings: {seed: 3}
judge_settings: {temperature: 0, seed: 9}
tools:
  - name: book_table
    description: Books a table
    parameters: {type: object, properties: {restaurant: {type: string}}, required: [restaurant]}
    llm: true
evals:
  - prompt: Book a table at Roma.
    checks: [{contains: Tool results}]
"""


def test_a_model_playing_a_tool_is_sent_the_judges_settings(fake):
    fake.rule("You play the tool", '{"booking": 7}', where="system")
    report = run_suite(load_suite(TOOL_SUITE), registry_for(fake), concurrency=1)
    assert report.evals[0].status == Status.PASSED, report.evals[0].verdict
    played = [
        body for body in sent(fake, "judge-model") if "You play the tool" in body["messages"][0]["content"]
    ]
    assert played and all((body["temperature"], body["seed"]) == (0, 9) for body in played)
    agent = sent(fake, "agent-model")
    assert len(agent) == 2 and all(body["seed"] == 3 and "temperature" not in body for body in agent)


def test_a_400_that_only_uses_a_settings_word_is_no_refusal(fake):
    fake.script(
        "Question 0?", [Reply(status=400, text="Please stop: the messages are too long for this model.")]
    )
    suite = load_suite(
        "name: words\nmodel: agent-model\nmodel_settings: {stop: END}\nevals:\n"
        + "".join(f"  - {{prompt: Question {n}?, checks: [{{contains: OK}}]}}\n" for n in range(2))
    )
    report = run_suite(suite, registry_for(fake), concurrency=1)
    assert [result.status for result in report.evals] == [Status.ERROR, Status.PASSED]
    assert "refused" not in report.evals[0].error


def test_a_secret_in_the_model_settings_headers_is_sent_filled_and_stored_as_its_placeholder(
    fake, monkeypatch
):
    """A gateway's key in `model_settings.extra_headers` is written `{{secret:NAME}}`: the request carries the
    value, the results (and so the run's page) the placeholder, and a reply that echoes it is redacted."""
    monkeypatch.setenv("GATEWAY_KEY", "gw-secret-123")
    fake.default_reply = "your key is gw-secret-123"
    suite = load_suite(
        "name: gateway\nmodel: agent-model\nmodel_settings:\n"
        '  extra_headers: {X-Api-Key: "{{secret:GATEWAY_KEY}}", X-Team: evals}\n'
        "evals:\n  - {prompt: hi, checks: [{contains: key}]}\n"
    )
    report = run_suite(suite, registry_for(fake))
    assert [(h.get("x-api-key"), h.get("x-team")) for h in fake.chat_headers()] == [
        ("gw-secret-123", "evals")
    ]
    dumped = report.model_dump_json()
    assert "gw-secret-123" not in dumped and "{{secret:GATEWAY_KEY}}" in dumped
    monkeypatch.delenv("GATEWAY_KEY")
    unset = run_suite(suite, registry_for(fake))
    assert unset.evals[0].status == Status.ERROR and "GATEWAY_KEY" in unset.evals[0].error


def test_a_credential_header_in_clear_is_refused_where_written():
    from engine.source import SuiteError

    with pytest.raises(SuiteError, match=r"extra_headers\.Authorization holds a credential: write it as"):
        load_suite(
            "name: k\nmodel: m\nmodel_settings:\n  extra_headers: {Authorization: Bearer sk-live-1}\n"
            "evals: [{prompt: hi, checks: [{contains: x}]}]\n"
        )
    with pytest.raises(ValueError, match="holds a credential"):
        ModelSettings.model_validate({"extra_headers": {"x-api-key": "abc"}})
    assert ModelSettings.model_validate({"extra_headers": {"X-Api-Key": "{{secret:K}}", "X-Team": "a"}})
