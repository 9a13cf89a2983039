"""A hung endpoint is bounded and said: the request timeout comes from the command line, else the suite, else
the endpoint, and a call out longer than the run's usual latency is reported while it is out."""

from __future__ import annotations

import re
import time

import pytest

from engine.calls import Calls, Latencies, slow_since
from engine.clients import DEFAULT, EndpointConfig, EndpointRegistry
from engine.endpoint_checks import locator, warnings
from engine.loader import load_suite
from engine.runner import run_suite
from engine.schema import Suite
from engine.source import SuiteError
from tests.conftest import FAKE_KEY
from tests.engine.standalone import evalsite
from tests.fakeopenai import FakeOpenAI

KEY_ENV = "EVALSITE_TEST_TIMEOUT_KEY"


@pytest.fixture
def fake(monkeypatch):
    monkeypatch.setenv(KEY_ENV, FAKE_KEY)
    with FakeOpenAI(api_key=FAKE_KEY) as server:
        yield server


def suite(extra: str = "", model: str = "m") -> Suite:
    return load_suite(
        f"name: t\nmodel: {model}\n{extra}evals:\n  - prompt: hi\n    checks: [{{match: '*OK*'}}]\n".encode()
    )


def registry(fake: FakeOpenAI, timeout: float = 30.0) -> EndpointRegistry:
    def endpoint(name: str) -> EndpointConfig:
        return EndpointConfig(name=name, base_url=fake.base_url, api_key_env=KEY_ENV, timeout=timeout)

    return EndpointRegistry(default=endpoint(DEFAULT), named={"fast": endpoint("fast")})


def chat_times(fake: FakeOpenAI) -> list[float]:
    """When each chat request reached the fake."""
    return [entry["at"] for entry in fake.requests if entry["path"].endswith("/chat/completions")]


def timed_run(the_suite: Suite, the_registry: EndpointRegistry, **options):
    started = time.monotonic()
    report = run_suite(the_suite, the_registry, **options)
    return report, time.monotonic() - started


@pytest.mark.parametrize(
    ("extra", "model", "cli", "endpoint"),
    [
        ("request_timeout: 0.5\n", "m", None, 30.0),  # the suite's, for every endpoint
        ("request_timeout: {default: 0.5, fast: 30}\n", "m", None, 30.0),  # the suite's, per endpoint
        ("request_timeout: {default: 30, fast: 0.5}\n", "fast/m", None, 30.0),
        ("request_timeout: 30\n", "m", 0.5, 30.0),  # the command line's, over the suite's
        ("", "m", None, 0.5),  # the endpoint's own
    ],
)
def test_a_hung_call_times_out_after_the_timeout_in_force_and_is_retried(fake, extra, model, cli, endpoint):
    fake.fail_next(1, hang=20)
    report, took = timed_run(suite(extra, model), registry(fake, endpoint), timeout=cli)
    assert report.evals[0].status == "passed", report.evals[0].error
    hung, retried = chat_times(fake)  # the hung call, and its retry
    assert 0.5 <= retried - hung < 3  # 0.5 s and a backoff of at most a second or two, not 20 s nor 30 s


def test_a_timeout_for_another_endpoint_leaves_this_ones_alone(fake):
    """`fast: 0.5` does not apply to the default endpoint: its call outlasts 0.5 s and is answered."""
    fake.fail_next(1, hang=1.5)
    report, took = timed_run(suite("request_timeout: {fast: 0.5}\n"), registry(fake))
    assert report.evals[0].status == "passed" and len(fake.chat_requests()) == 1 and took >= 1.5


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("0", "request_timeout: a request timeout is 0.1 to 3600 seconds; found 0"),
        ("true", "request_timeout: expected a number of seconds, or {endpoint name: seconds}; found True"),
        ("{fast: 5000}", "request_timeout.fast: a request timeout is 0.1 to 3600 seconds; found 5000"),
        ("{Fast: 5}", "request_timeout.Fast: `Fast` is not an endpoint name"),
        ("{mock: 5}", "request_timeout.mock: the mock endpoint answers at once"),
    ],
)
def test_a_bad_request_timeout_is_a_located_problem(value, message):
    with pytest.raises(SuiteError) as raised:
        suite(f"request_timeout: {value}\n")
    assert any(message in str(problem) and problem.line == 3 for problem in raised.value.problems), [
        str(p) for p in raised.value.problems
    ]


def test_calls_out_longer_than_usual_are_reported_while_they_hang_and_no_longer_after(fake):
    """The runner tells on_slow of calls out past the minimum; once they are answered it says nothing more."""
    fake.fail_next(2, hang=2.5)
    said = []
    report, _ = timed_run(
        load_suite(
            b"name: t\nmodel: m\nevals:\n"
            + b"".join(f"  - prompt: q{n}\n    checks: [{{match: '*OK*'}}]\n".encode() for n in range(3))
        ),
        registry(fake),
        concurrency=3,
        on_slow=lambda slow: said.append((time.monotonic(), slow)),
        slow_min_seconds=1.0,
    )
    assert [result.status for result in report.evals] == ["passed"] * 3
    assert said, "no slow calls were reported"
    # The two hung calls (at first perhaps one, sent a moment before the other), never the third.
    assert max(slow.count for _, slow in said) == 2 and {slow.count for _, slow in said} <= {1, 2}
    assert all(1.0 <= slow.seconds < 2.6 for _, slow in said)  # nothing said once they were answered
    assert str(said[-1][1]).startswith("2 calls waiting on the model for ")


def test_slow_means_several_times_the_runs_median_latency_and_at_least_the_minimum():
    latencies = Latencies()
    calls = Calls(latencies)
    calls.out[1] = 100.0
    assert slow_since(calls, 104.0, minimum=5.0) is None  # below the minimum
    assert slow_since(calls, 105.0, minimum=5.0) == 100.0  # no latency known yet: the minimum
    latencies.seconds.extend([2.0, 3.0, 4.0])  # median 3 s: slow after 12 s
    assert slow_since(calls, 111.0, minimum=5.0) is None
    assert slow_since(calls, 112.0, minimum=5.0) == 100.0
    del calls.out[1]
    assert slow_since(calls, 200.0, minimum=5.0) is None


SUITE = """\
name: hung
model: gpt-test
{extra}evals:
  - prompt: What is 2 + 2?
    checks:
      - match: "*OK*"
"""


def test_the_command_line_says_calls_are_waiting_and_uses_its_timeout(tmp_path, fake):
    """`evalsite run --timeout` cuts a hung call short (over the suite's 30 s), and stderr says the call was
    waiting on the model while it hung."""
    (tmp_path / "hung.yaml").write_text(SUITE.format(extra="request_timeout: 30\n"))
    env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": FAKE_KEY, "EVALSITE_SLOW_CALL_SECONDS": "1"}
    fake.fail_next(1, hang=20)
    result = evalsite("run", "hung.yaml", "--timeout", "2.5", cwd=tmp_path, **env)
    assert result.returncode == 0, result.stdout + result.stderr
    hung, retried = chat_times(fake)
    assert 2.5 <= retried - hung < 5  # the timeout, and a short backoff
    assert re.search(r"^1 call waiting on the model for [12] s$", result.stderr, re.M), result.stderr


def test_timeout_on_the_command_line_is_checked(tmp_path):
    (tmp_path / "s.yaml").write_text(SUITE.format(extra=""))
    result = evalsite("run", "s.yaml", "--timeout", "0", cwd=tmp_path)
    assert (
        result.returncode == 2
        and "--timeout: '0' is not a number of seconds from 0.1 to 3600" in result.stderr
    )
    result = evalsite("run", "s.yaml", "--timeout", "5", "--server", "http://127.0.0.1:9", cwd=tmp_path)
    assert result.returncode == 2 and "set `request_timeout` in the suite" in result.stderr


def test_a_timeout_for_an_endpoint_that_does_not_exist_is_a_located_warning(fake):
    source = "name: t\nmodel: m\nrequest_timeout:\n  default: 5\n  fsat: 9\nevals:\n  - prompt: hi\n    checks: [{match: '*'}]\n"
    found = warnings(
        load_suite(source.encode()), registry(fake), environ={KEY_ENV: "k"}, locate=locator(source)
    )
    assert [(p.line, p.path) for p in found] == [(5, "request_timeout.fsat")]
    assert (
        "no endpoint is named `fsat` (did you mean `fast`?): this timeout applies to nothing"
        in found[0].message
    )
