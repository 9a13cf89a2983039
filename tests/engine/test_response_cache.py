"""engine/cache.py: the response cache, counted by the requests the fake endpoint receives."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest

from engine.cache import DiskStore, GuardedStore, MemoryStore, call_key, secrets_digest
from engine.calibration import load_calibration
from engine.calibration.playing import as_suite
from engine.clients import DEFAULT, EndpointConfig, EndpointRegistry
from engine.loader import load_suite
from engine.runner import run_suite
from engine.schema.settings import CacheRoles
from tests.conftest import ROOT
from tests.fakeopenai import FakeOpenAI

SUITE = """\
name: cached
model: m
cache: {cache}
evals:
  - id: greet
    prompt: {prompt}
    checks:
      - contains: hello
  - id: judged
    prompt: Say something kind
    checks:
      - llm_judge: {{criteria: Kind, threshold: 0.5}}
"""


@pytest.fixture(scope="module")
def server():
    with FakeOpenAI() as fake:
        yield fake


@pytest.fixture
def fake(server):
    server.reset()
    server.default_reply = '{"score": 1, "reason": "kind"}'
    server.rule("Say hello", "hello there")
    server.rule("Say hi", "hello you")
    yield server
    server.reset()


def _registry(fake) -> EndpointRegistry:
    endpoint = EndpointConfig(
        name=DEFAULT, base_url=fake.base_url, max_retries=0, price_input=1.0, price_output=2.0
    )
    return EndpointRegistry(default=endpoint)


def _suite(cache="true", prompt="Say hello", iterations: int | None = None):
    text = SUITE.format(cache=cache, prompt=prompt)
    if iterations:
        text = text.replace("cache:", f"iterations: {iterations}\ncache:")
    return load_suite(text)


def _judge_calls(fake) -> int:
    return sum(1 for body in fake.chat_requests() if body["messages"][0]["role"] == "system")


def _run(fake, suite, store):
    before = len(fake.chat_requests())
    report = run_suite(suite, _registry(fake), store=store)
    return report, len(fake.chat_requests()) - before


def test_an_unchanged_suite_is_answered_from_the_cache_with_no_model_call_and_its_cost_saved(fake):
    store = MemoryStore()
    first, calls = _run(fake, _suite(), store)
    assert calls == 3  # two replies, one judge
    assert first.status == "passed" and not any(turn.cached for ev in first.evals for turn in ev.turns)
    second, calls = _run(fake, _suite(), store)
    assert calls == 0
    assert second.status == "passed"
    assert [ev.turns[0].response for ev in second.evals] == [ev.turns[0].response for ev in first.evals]
    turns = [ev.turns[0] for ev in second.evals]
    assert all(turn.cached for turn in turns) and [turn.cached_calls for turn in turns] == [1, 2]
    assert all(turn.cost == 0 for turn in turns)
    spent_first = sum(ev.turns[0].cost + ev.turns[0].judge_cost for ev in first.evals)
    assert spent_first > 0 and sum(turn.saved_cost for turn in turns) == pytest.approx(spent_first)


def test_a_changed_message_misses(fake):
    store = MemoryStore()
    _run(fake, _suite(), store)
    report, calls = _run(fake, _suite(prompt="Say hi"), store)
    assert calls == 1  # the changed eval's reply only
    cached = {ev.id: ev.turns[0].cached for ev in report.evals}
    assert cached == {"greet": False, "judged": True}


def test_each_iteration_is_its_own_draw_and_is_cached_apart(fake):
    store = MemoryStore()
    _, calls = _run(fake, _suite(iterations=2), store)
    assert calls == 6  # the second iteration did not reuse the first's answers
    _, calls = _run(fake, _suite(iterations=3), store)
    assert calls == 3  # only the new third iteration asks


def test_the_judge_cache_is_off_while_the_model_cache_is_on(fake):
    store = MemoryStore()
    suite = _suite(cache="{model: true}")
    _run(fake, suite, store)
    before = _judge_calls(fake)
    report, calls = _run(fake, suite, store)
    assert calls == 1 and _judge_calls(fake) == before + 1
    judged = next(ev for ev in report.evals if ev.id == "judged").turns[0]
    assert judged.cached and judged.cached_calls == 1


def test_no_cache_key_means_every_call_is_made(fake):
    store = MemoryStore()
    _run(fake, _suite(cache="false"), store)
    _, calls = _run(fake, _suite(cache="false"), store)
    assert calls == 3 and not store.entries


def test_a_disk_store_expires_after_its_ttl_and_can_be_purged(fake, tmp_path):
    store = DiskStore(tmp_path / "one", ttl=1.0)
    _run(fake, _suite(), store)
    _, calls = _run(fake, _suite(), store)
    assert calls == 0
    time.sleep(1.2)
    _, calls = _run(fake, _suite(), store)
    assert calls == 3  # expired: asked again, and kept again

    _, calls = _run(fake, _suite(), store)
    assert calls == 0
    assert store.purge() == 3
    _, calls = _run(fake, _suite(), store)
    assert calls == 3
    store.close()


def test_a_disk_store_is_shared_by_two_processes_worth_of_handles(fake, tmp_path):
    _run(fake, _suite(), DiskStore(tmp_path / "shared"))
    _, calls = _run(fake, _suite(), DiskStore(tmp_path / "shared"))
    assert calls == 0


CALIBRATION = """\
name: politeness
judge: {criteria: Polite, scale: -3..3, model: judge-1}
repeats: 2
samples:
  - messages:
      - {role: user, content: "What is 2+2?"}
      - {role: assistant, content: "The answer is 4"}
    expected: {score: 3}
"""


# Without `repeats`, a sample's first answer comes from the cache and its second repeat asks again.
@pytest.mark.parametrize(("repeats", "second_calls"), [(False, 1), (True, 0)])
def test_a_calibrations_repeats_ask_the_judge_again_unless_the_cache_says_repeats(
    fake, repeats, second_calls
):
    fake.default_reply = '{"score": 3, "reason": "polite"}'
    suite = as_suite(load_calibration(CALIBRATION))
    suite = suite.model_copy(update={"cache": CacheRoles(model=True, judge=True, repeats=repeats)})
    store = MemoryStore()
    _, calls = _run(fake, suite, store)
    assert calls == 2
    _, calls = _run(fake, suite, store)
    assert calls == second_calls


def test_the_key_names_every_keyword_role_and_iteration():
    base = call_key("http://x/v1", "m", [{"role": "user", "content": "a"}], "model", 0)
    assert base == call_key(
        "http://x/v1", "m", [{"role": "user", "content": "a"}], "model", 0, temperature=None
    )
    others = {
        call_key("http://y/v1", "m", [{"role": "user", "content": "a"}], "model", 0),
        call_key("http://x/v1", "n", [{"role": "user", "content": "a"}], "model", 0),
        call_key("http://x/v1", "m", [{"role": "user", "content": "b"}], "model", 0),
        call_key("http://x/v1", "m", [{"role": "user", "content": "a"}], "judge", 0),
        call_key("http://x/v1", "m", [{"role": "user", "content": "a"}], "model", 1),
        call_key("http://x/v1", "m", [{"role": "user", "content": "a"}], "model", 0, temperature=0.5),
        call_key("http://x/v1", "m", [{"role": "user", "content": "a"}], "model", 0, tools=[{"x": 1}]),
    }
    assert base not in others and len(others) == 7


SECRET_SUITE = """\
name: with-a-secret
model: m
cache: true
system: "Authenticate with {{secret:CACHE_TEST_TOKEN}}."
evals:
  - id: greet
    prompt: Say hello
    checks:
      - contains: hello
  - id: judged
    prompt: Say something kind
    checks:
      - llm_judge: {criteria: Kind, threshold: 0.5}
"""


def test_a_changed_secret_asks_the_model_again_and_no_value_is_stored(fake, monkeypatch):
    """The messages keep the placeholder; the model under test's key holds a digest of its value, so the
    first token's answer is not the second's. The judge reads the placeholder, so its answer still holds."""
    store = MemoryStore()
    suite = load_suite(SECRET_SUITE)
    monkeypatch.setenv("CACHE_TEST_TOKEN", "first-token-5d1e")
    _, calls = _run(fake, suite, store)
    assert calls == 3  # two replies, one judge
    assert "Authenticate with first-token-5d1e." in fake.chat_requests()[0]["messages"][0]["content"]
    _, calls = _run(fake, suite, store)
    assert calls == 0
    monkeypatch.setenv("CACHE_TEST_TOKEN", "second-token-77ab")
    report, calls = _run(fake, suite, store)
    assert calls == 2 and "second-token-77ab" in fake.chat_requests()[-1]["messages"][0]["content"]
    judged = next(ev for ev in report.evals if ev.id == "judged").turns[0]
    assert not judged.cached and judged.cached_calls == 1  # the judge's verdict came from the cache
    monkeypatch.setenv("CACHE_TEST_TOKEN", "first-token-5d1e")
    _, calls = _run(fake, suite, store)
    assert calls == 0  # each value keeps its own answers
    kept = json.dumps(store.entries)
    assert "first-token-5d1e" not in kept and "second-token-77ab" not in kept
    assert len(store.entries) == 5  # two replies per token, one verdict


def test_the_secrets_digest_names_each_placeholder_with_its_value_and_is_absent_without_one():
    messages = [
        {"role": "system", "content": "key {{secret:A_TOKEN}}"},
        {"role": "user", "content": [{"type": "text", "text": "and {{ secret:B_TOKEN }}"}]},
    ]
    digest = secrets_digest(messages, {"A_TOKEN": "a", "B_TOKEN": "b"})
    assert digest is not None and len(digest) == 64
    assert digest == secrets_digest(messages, {"A_TOKEN": "a", "B_TOKEN": "b", "OTHER": "x"})
    assert digest != secrets_digest(messages, {"A_TOKEN": "a", "B_TOKEN": "c"})
    assert digest != secrets_digest(messages, {"A_TOKEN": "b", "B_TOKEN": "a"})  # names go with their values
    assert secrets_digest([{"role": "user", "content": "no {{var:x}} secret"}], {}) is None
    plain = [{"role": "user", "content": "a"}]
    assert call_key("http://x/v1", "m", plain, "model", 0) == call_key(
        "http://x/v1", "m", plain, "model", 0, secrets=None
    )
    assert call_key("http://x/v1", "m", plain, "model", 0, secrets=digest) != call_key(
        "http://x/v1", "m", plain, "model", 0
    )


def _cli(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "evalsite.cli", "run", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_evalsite_run_caches_with_cache_in_a_local_store_and_no_cache_overrides_the_suite(fake, tmp_path):
    path = tmp_path / "suite.yaml"
    path.write_text(SUITE.format(cache="false", prompt="Say hello"))
    env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test",
           "XDG_CACHE_HOME": str(tmp_path / "xdg"), "EVALSITE_VAR_DIR": str(tmp_path / "var")}  # fmt: skip
    env.pop("DATABASE_URL", None)
    first = _cli(str(path), "--cache", env=env)
    assert first.returncode == 0, first.stderr
    assert len(fake.chat_requests()) == 3 and "from the cache" not in first.stdout
    assert (tmp_path / "xdg" / "evalsite" / "responses").is_dir()

    second = _cli(str(path), "--cache", "--verbose", "--json", str(tmp_path / "out.json"), env=env)
    assert second.returncode == 0, second.stderr
    assert len(fake.chat_requests()) == 3  # no model call
    assert "3 calls from the cache" in second.stdout and "(from the cache: the reply)" in second.stdout
    totals = json.loads((tmp_path / "out.json").read_text())["totals"]
    assert totals["cached_calls"] == 3 and totals["cost"] == 0

    path.write_text(SUITE.format(cache="true", prompt="Say hello"))
    third = _cli(str(path), "--no-cache", env=env)
    assert third.returncode == 0, third.stderr
    assert len(fake.chat_requests()) == 6  # the suite's `cache: true` is overridden


SIMULATED = """\
name: simulated
model: m
judge: user-model
cache: {cache}
evals:
  - id: booking
    prompt: I want a table
    simulate: {{persona: A customer., max_turns: 2}}
    checks:
      - contains: score
"""


@pytest.mark.parametrize(("cache", "second_calls"), [("{simulated_user: true}", 2), ("{model: true}", 1)])
def test_the_simulated_user_is_cached_apart_from_the_model(fake, cache, second_calls):
    fake.rule("I want a table", "For when?", model="m")
    store = MemoryStore()
    suite = load_suite(SIMULATED.format(cache=cache))
    first, calls = _run(fake, suite, store)
    assert calls == 3  # reply, simulated user, reply
    second, calls = _run(fake, suite, store)
    assert calls == second_calls
    turn = second.evals[0].turns[1]
    if cache == "{simulated_user: true}":
        assert (
            not turn.cached and turn.cached_calls == 1
        )  # the user's message came from the cache, not the reply
    else:
        assert turn.cached and turn.cached_calls == 1  # the reply only: the user's message was asked afresh


def test_a_cached_reply_keeps_its_tokens_so_a_max_tokens_check_grades_it_as_before(fake):
    """A cached call spends nothing, but the reply still holds its tokens: `max_tokens` fails it both times."""
    fake.rule("Say a lot", "one two three four five six seven eight nine ten eleven twelve")
    suite = load_suite(
        "name: long\nmodel: m\ncache: true\nevals:\n  - prompt: Say a lot\n    checks: [{max_tokens: 2}]\n"
    )
    store = MemoryStore()
    first, calls = _run(fake, suite, store)
    second, again = _run(fake, suite, store)
    assert (calls, again) == (1, 0)
    before, after = first.evals[0].turns[0], second.evals[0].turns[0]
    assert after.cached and after.usage.completion_tokens == before.usage.completion_tokens > 2
    assert [check.passed for check in after.checks] == [check.passed for check in before.checks] == [False]
    assert second.totals.cost == 0 and first.totals.cost > 0


def test_the_secrets_digest_is_keyed_by_the_stores_pepper_kept_apart_from_its_entries(tmp_path):
    messages = [{"role": "user", "content": "token {{secret:A_TOKEN}}"}]
    plain = secrets_digest(messages, {"A_TOKEN": "a"})
    store = DiskStore(tmp_path / "store")
    assert len(store.pepper) == 32 and (tmp_path / "store" / "pepper").stat().st_mode & 0o077 == 0
    assert DiskStore(tmp_path / "store").pepper == store.pepper  # every process of this store shares it
    assert DiskStore(tmp_path / "other").pepper != store.pepper
    # Without the pepper a guess of the value cannot be checked against a key.
    assert secrets_digest(messages, {"A_TOKEN": "a"}, pepper=store.pepper) != plain


class _Broken:
    """A store whose server is away: every read and write raises."""

    def get(self, key):
        raise ConnectionError("the cache's server is away")

    def put(self, key, value):
        raise ConnectionError("the cache's server is away")


def test_a_store_that_fails_costs_a_miss_said_once_never_the_conversation(fake):
    said: list[str] = []
    store = GuardedStore(_Broken(), said.append)
    report, calls = _run(fake, _suite(), store)
    assert report.status == "passed" and calls == 3
    assert len(said) == 1 and "could not be read (ConnectionError: the cache's server is away)" in said[0]


def test_a_damaged_entry_is_a_miss_and_the_models_answer_replaces_it(fake, tmp_path):
    store = DiskStore(tmp_path / "damaged")
    _run(fake, _suite(), store)
    for key in list(store.cache.iterkeys()):
        store.cache.set(key, {"usage": None})  # written otherwise: no text
    report, calls = _run(fake, _suite(), store)
    assert report.status == "passed" and calls == 3
    _, calls = _run(fake, _suite(), store)
    assert calls == 0  # the answers asked again were kept in the damaged entries' place
    store.close()


def test_a_shortened_ttl_holds_for_answers_kept_before_and_a_ttl_of_0_keeps_nothing(fake, tmp_path):
    _run(fake, _suite(), DiskStore(tmp_path / "ttl", ttl=3600))
    time.sleep(1.1)
    _, calls = _run(fake, _suite(), DiskStore(tmp_path / "ttl", ttl=1))
    assert calls == 3  # kept more than a second ago: too old for today's TTL
    store = DiskStore(tmp_path / "none", ttl=0)
    _run(fake, _suite(), store)
    _, calls = _run(fake, _suite(), store)
    assert calls == 3 and len(store.cache) == 0


@pytest.mark.parametrize("damage", ["not a database", "a file where the folder goes"])
def test_evalsite_run_goes_on_without_a_local_cache_it_cannot_use(fake, tmp_path, damage):
    cache_home = tmp_path / "xdg"
    if damage == "not a database":
        folder = cache_home / "evalsite" / "responses"
        folder.mkdir(parents=True)
        (folder / "cache.db").write_bytes(os.urandom(5000))
    else:
        cache_home.mkdir()
        (cache_home / "evalsite").write_text("a file")
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE.format(cache="true", prompt="Say hello"))
    env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test",
           "XDG_CACHE_HOME": str(cache_home), "EVALSITE_VAR_DIR": str(tmp_path / "var")}  # fmt: skip
    env.pop("DATABASE_URL", None)
    result = _cli(str(suite), env=env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Traceback" not in result.stderr
    notes = [line for line in result.stderr.splitlines() if "response cache" in line]
    assert len(notes) == 1 and "this run goes without it" in notes[0]


def test_a_semantic_checks_embeddings_are_cached_with_the_judges_calls(fake):
    suite = load_suite(
        "name: meaning\nmodel: m\ncache: {cache}\nevals:\n"
        "  - prompt: Say hello\n    checks:\n      - semantic: {{expected: hello there, threshold: 0.1}}\n".replace(
            "{cache}", "{judge: true}"
        )
        .replace("{{", "{")
        .replace("}}", "}")
    )
    store = MemoryStore()

    def embedding_calls() -> int:
        return sum(1 for request in fake.requests if request["path"].endswith("/embeddings"))

    first, _ = _run(fake, suite, store)
    assert first.status == "passed" and embedding_calls() == 1
    second, _ = _run(fake, suite, store)
    assert second.status == "passed" and embedding_calls() == 1  # answered from the cache
    assert second.evals[0].turns[0].cached_calls == 1
    assert second.evals[0].turns[0].checks[0].score == first.evals[0].turns[0].checks[0].score


def test_a_cache_role_is_true_or_false_not_a_number():
    from engine.source import SuiteError

    with pytest.raises(SuiteError, match=r"cache\.model: expected true or false; found the number 1"):
        _suite(cache="{model: 1}")
    assert _suite(cache="{model: true}").cache.model is True


def test_repeats_belong_to_a_calibration_and_a_suite_that_says_it_is_told_where():
    from engine.source import SuiteError

    with pytest.raises(SuiteError) as refused:
        load_suite(
            "name: s\ncache:\n  model: true\n  repeats: true\nevals:\n  - prompt: hi\n    checks: [{contains: x}]\n"
        )
    (problem,) = refused.value.problems
    assert (problem.line, problem.path) == (4, "cache.repeats")
    assert "calibration" in problem.message
    calibration = as_suite(load_calibration(CALIBRATION + "cache: {judge: true, repeats: true}\n"))
    assert calibration.cache.repeats


ACCOUNT_KEY_ENV = "EVALSITE_TEST_CACHE_ACCOUNT_KEY"
OTHER_ACCOUNT_KEY_ENV = "EVALSITE_TEST_CACHE_OTHER_ACCOUNT_KEY"


def _named(fake, **prices_by_name) -> EndpointRegistry:
    """Named endpoints all at the fake's URL: name -> (price_input, price_output, the variable of its key)."""
    named = {
        name: EndpointConfig(name, fake.base_url, key_env, price_input=price_in, price_output=price_out)
        for name, (price_in, price_out, key_env) in prices_by_name.items()
    }
    return EndpointRegistry(default=EndpointConfig(name=DEFAULT, base_url=fake.base_url), named=named)


def _run_on(fake, registry, model, store):
    before = len(fake.chat_requests())
    report = run_suite(_suite(), registry, model=model, store=store)
    return report, len(fake.chat_requests()) - before


def test_two_names_for_one_endpoint_share_answers_and_each_saves_at_its_own_prices(fake, monkeypatch):
    from engine.report import format_summary

    monkeypatch.setenv(ACCOUNT_KEY_ENV, "sk-one-account")
    registry = _named(
        fake,
        fk=(1.0, 2.0, ACCOUNT_KEY_ENV),
        free=(0.0, 0.0, ACCOUNT_KEY_ENV),
        dear=(10.0, 20.0, ACCOUNT_KEY_ENV),
    )
    store = MemoryStore()
    first, calls = _run_on(fake, registry, "fk/alpha", store)
    assert calls == 3 and first.totals.cost > 0 and first.totals.saved_cost == 0

    # The same URL, key and model: the same upstream model, so the same answers, none asked again. What they
    # saved is unknown: `free` has no prices, and fk's are not this run's.
    unpriced, calls = _run_on(fake, registry, "free/alpha", store)
    assert calls == 0 and unpriced.totals.cached_calls == 3
    assert unpriced.unpriced == ["free"] and unpriced.totals.saved_cost == 0
    summary = format_summary(unpriced)
    assert "3 calls from the cache" in summary and "saved" not in summary

    dear, calls = _run_on(fake, registry, "dear/alpha", store)
    assert calls == 0 and dear.totals.cached_calls == 3
    assert dear.totals.saved_cost == pytest.approx(10 * first.totals.cost)
    assert f"${dear.totals.saved_cost:.6f} saved" in format_summary(dear)


def test_an_endpoint_with_another_api_key_is_another_account_and_asks_again(fake, monkeypatch):
    monkeypatch.setenv(ACCOUNT_KEY_ENV, "sk-one-account")
    monkeypatch.setenv(OTHER_ACCOUNT_KEY_ENV, "sk-another-account")
    registry = _named(fake, fk=(1.0, 2.0, ACCOUNT_KEY_ENV), theirs=(1.0, 2.0, OTHER_ACCOUNT_KEY_ENV))
    store = MemoryStore()
    _run_on(fake, registry, "fk/alpha", store)
    report, calls = _run_on(fake, registry, "theirs/alpha", store)
    assert calls == 3 and report.totals.cached_calls == 0
    assert {headers["authorization"] for headers in fake.chat_headers()[-3:]} == {"Bearer sk-another-account"}
    # The key is in no entry: a digest of it, keyed by the store's pepper, is part of the cache key only.
    assert "sk-one-account" not in json.dumps(store.entries)
    _, calls = _run_on(fake, registry, "theirs/alpha", store)
    assert calls == 0  # that account's own answers are cached for it


def test_a_turns_line_says_what_came_from_the_cache_in_one_wording_whichever_role_it_was(fake):
    from engine.report import format_eval

    def lines(report) -> dict[str, str]:
        return {ev.id: format_eval(ev, unpriced=report.unpriced) for ev in report.evals}

    store = MemoryStore()
    _run(fake, _suite(cache="{judge: true}"), store)
    judges_only, _ = _run(fake, _suite(cache="{judge: true}"), store)
    judged = next(ev for ev in judges_only.evals if ev.id == "judged").turns[0]
    assert not judged.cached and judged.cached_calls == 1 and judged.saved_cost > 0
    assert f"(from the cache: 1 call, ${judged.saved_cost:.6f} saved)" in lines(judges_only)["judged"]
    assert "from the cache" not in lines(judges_only)["greet"]

    _run(fake, _suite(), store)
    every, calls = _run(fake, _suite(), store)
    assert calls == 0
    greet, judged = (next(ev for ev in every.evals if ev.id == name).turns[0] for name in ("greet", "judged"))
    assert f"(from the cache: the reply, ${greet.saved_cost:.6f} saved)" in lines(every)["greet"]
    said = f"(from the cache: the reply and 1 more call, ${judged.saved_cost:.6f} saved)"
    assert said in lines(every)["judged"]


def _calibrate(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "evalsite.cli", "calibrate", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_evalsite_calibrate_says_how_many_judge_calls_came_from_the_cache_and_what_they_saved(fake, tmp_path):
    fake.default_reply = '{"score": 3, "reason": "polite"}'
    path = tmp_path / "set.yaml"
    path.write_text(CALIBRATION)
    env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": "sk-test",
           "EVALSITE_DEFAULT_PRICE_INPUT": "1", "EVALSITE_DEFAULT_PRICE_OUTPUT": "2",
           "XDG_CACHE_HOME": str(tmp_path / "xdg"), "EVALSITE_VAR_DIR": str(tmp_path / "var")}  # fmt: skip
    env.pop("DATABASE_URL", None)
    first = _calibrate(str(path), "--cache", env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert len(fake.chat_requests()) == 2 and "from the cache" not in first.stdout

    out = tmp_path / "calibration.json"
    second = _calibrate(str(path), "--cache", "--json", str(out), env=env)
    assert second.returncode == 0, second.stdout + second.stderr
    assert len(fake.chat_requests()) == 3  # the first repeat answered from the cache, the second asked again
    figures = json.loads(out.read_text())
    assert figures["cached_calls"] == 1 and figures["saved_cost"] > 0 and figures["unpriced"] == []
    assert f"1 judge call from the cache, ${figures['saved_cost']:.6f} saved" in second.stdout
