"""`evalsite run --set`: generation settings from the command line reach the endpoint, a wrong one is a one-line
user error naming it, and a setting the endpoint refuses is said once, with exit 3."""

from __future__ import annotations

from tests.engine.standalone import assert_one_line_error, run_on


def test_set_values_are_read_as_yaml_and_sent_per_role(fake, suite):
    fake.script("What is 15 * 7?", ["105"])
    fake.script("What is 2 + 2?", ["4"])
    result = run_on(
        fake, suite, "--set", "temperature=0.2", "--set", 'stop=["\\n", "END"]', "--set", "seed=7",
        "--set", "extra_body.store=false", "--set", "extra_headers.X-Team=evals", "--set", "judge.seed=1",
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    bodies = fake.chat_requests()
    assert len(bodies) == 2
    for body in bodies:
        assert (body["temperature"], body["stop"], body["seed"], body["store"]) == (
            0.2,
            ["\n", "END"],
            7,
            False,
        )
    assert [headers.get("x-team") for headers in fake.chat_headers()] == ["evals", "evals"]


def test_a_wrong_set_is_one_line_naming_it(fake, suite):
    result = run_on(fake, suite, "--set", "temperature=hot")
    assert_one_line_error(result, 2, "--set temperature=hot", "valid number")
    result = run_on(fake, suite, "--set", "temprature=0")
    assert_one_line_error(result, 2, "--set temprature=0", "no setting `temprature`", "temperature")
    result = run_on(fake, suite, "--set", "temperature=9")
    assert_one_line_error(result, 2, "--set temperature=9", "expected a number at most 2; found the number 9")
    result = run_on(fake, suite, "--set", "temperature=")
    assert_one_line_error(result, 2, "--set temperature=", "no value")
    result = run_on(fake, suite, "--set", "stop=[a, b")
    assert_one_line_error(result, 2, "--set stop=[a, b", "write a list as [a, b]")
    result = run_on(fake, suite, "--set", "extra_body.a=[&x [1, 1], *x]")
    assert_one_line_error(result, 2, "--set extra_body.a=[&x [1, 1], *x]", "anchor &x is not allowed")
    result = run_on(fake, suite, "--set", "extra_body.a={k: 1, k: 2}")
    assert_one_line_error(result, 2, "duplicate key `k`")
    result = run_on(fake, suite, "--model", "gpt-test,,other")
    assert_one_line_error(result, 2, "a name is missing between commas")
    assert fake.chat_requests() == []


def test_a_refused_setting_is_said_once_and_the_run_exits_3(fake, suite):
    fake.refuse("seed", "unrecognized")
    result = run_on(fake, suite, "--set", "seed=7", "--concurrency", "1")
    assert result.returncode == 3, result.stdout + result.stderr
    line = "the endpoint refused model_settings.seed: Unrecognized request argument supplied: seed"
    fix = "remove or change model_settings.seed (in the suite, or the --set that gives it) and run again"
    assert result.stderr.splitlines() == [f"{line}; no more conversations were started: {fix}"]
    assert len(fake.chat_requests()) == 1


def test_set_null_sends_none_of_the_suites_setting(fake, suite):
    """`--set seed=null` removes the suite's seed for the run, every eval's own included."""
    seeded = suite.read_text().replace("evals:", "model_settings: {seed: 7, temperature: 0.2}\nevals:", 1)
    suite.write_text(seeded.replace("checks:", "model_settings: {seed: 9}\n    checks:", 1))
    fake.script("What is 15 * 7?", ["105"])
    fake.script("What is 2 + 2?", ["4"])
    result = run_on(fake, suite, "--set", "seed=null")
    assert result.returncode == 0, result.stdout + result.stderr
    bodies = fake.chat_requests()
    assert len(bodies) == 2 and all("seed" not in body and body["temperature"] == 0.2 for body in bodies)
