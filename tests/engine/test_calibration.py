"""Calibration sets (the calibrate format), the agreement figures, and `evalsite calibrate`."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import pytest

from engine.agreement import Judgement, confusion, levels_for, metrics
from engine.calibration import Judged, load_calibration
from engine.calibration.report import compare, report
from engine.source import SuiteError
from tests.conftest import FAKE_KEY, ROOT
from tests.fakeopenai import FakeOpenAI

SET = """\
name: tutor-politeness
judge: {criteria: Polite and correct, scale: -3..3}
samples:
  - messages:
      - {role: user, content: "What is 2+2?"}
      - {role: assistant, content: "The answer is 4"}
    expected: {score: 3, reason: Correct answer}
    tags: [math]
  - messages:
      - {role: system, content: You are a tutor.}
      - {role: user, content: "Hi, I need help with math"}
      - {role: assistant, content: "What are you working on?"}
      - {role: user, content: "What is 2+2?"}
      - {role: assistant, content: "Figure it out yourself"}
    expected: {score: -2, reason: Rude}
"""


# --- the format ---------------------------------------------------------------------------------------------


def test_a_set_loads_its_samples_in_order_with_tags_and_the_whole_conversation():
    loaded = load_calibration(SET)
    assert [s.expected_score for s in loaded.samples] == [3.0, -2.0]
    assert loaded.samples[0].tags == ("math",)
    assert loaded.samples[1].messages[0] == {"role": "system", "content": "You are a tutor."}
    assert loaded.samples[1].reply == "Figure it out yourself"
    assert loaded.spec.all_judges[0].name == "judge" and loaded.spec.scale == "-3..3"
    assert loaded.warnings == []


@pytest.mark.parametrize(
    "sample, where, rule",
    [
        ("{expected: {score: 1}}", "16:5 samples[2].messages", "a sample must have a `messages` array"),
        ("{messages: [], expected: {score: 1}}", "16:6 samples[2].messages", "cannot be empty"),
        ("{messages: [{content: hi}], expected: 1}", "16:17 samples[2].messages[0].role",
         "each message must have a role string"),
        ("{messages: [{role: user, content: 3}], expected: 1}", "16:30 samples[2].messages[0].content",
         "each message must have a content string"),
        ("{messages: [{role: user, content: hi}], expected: 1}", "16:6 samples[2].messages",
         "no assistant message"),
        ("{messages: [{role: assistant, content: hi}]}", "16:5 samples[2]", "no `expected` score"),
        ("{userMessage: hi, assistantResponse: yo, expected: 1}", "16:5 samples[2]",
         "calibrate's old form"),
    ],
)  # fmt: skip
def test_a_sample_that_breaks_a_rule_is_skipped_with_a_warning_naming_it_and_the_rule(sample, where, rule):
    loaded = load_calibration(SET + f"  - {sample}\n")
    assert len(loaded.samples) == 2  # the others still count
    (warning,) = loaded.warnings
    assert str(warning).startswith(where) and "samples[2] skipped" in str(warning) and rule in str(warning)


AGENT_SAMPLE = """\
  - messages:
      - {role: user, content: "Weather in Paris?"}
      - role: assistant
        content: null
        tool_calls: [{id: c1, type: function, function: {name: get_weather, arguments: '{"city": "Paris"}'}}]
      - {role: tool, tool_call_id: c1, content: '{"temp_c": 21}'}
      - {role: assistant, content: "It is 21 degrees in Paris."}
    expected: {score: 3, reason: Used the tool and said what it returned}
"""


def test_an_agents_sample_keeps_its_tool_calls_for_the_judge(tmp_path):
    import os

    loaded = load_calibration(SET + AGENT_SAMPLE)
    assert loaded.warnings == []
    agent = loaded.samples[2]
    assert agent.reply == "It is 21 degrees in Paris."
    assert agent.messages[1]["tool_calls"][0]["function"]["name"] == "get_weather"
    assert agent.messages[2] == {"role": "tool", "content": '{"temp_c": 21}', "tool_call_id": "c1"}
    # What the judge reads: the call and its result under their markers, as in a live run's trajectory.
    with FakeOpenAI(api_key=FAKE_KEY) as fake:
        fake.rule("Grade", '{"score": 3, "reason": "fine"}', where="any")
        path = tmp_path / "set.yaml"
        path.write_text(SET.replace("scale: -3..3}", "scale: -3..3, model: judge-1}") + AGENT_SAMPLE)
        env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": FAKE_KEY,
               "EVALSITE_VAR_DIR": str(tmp_path / "var")}  # fmt: skip
        env.pop("DATABASE_URL", None)
        result = _cli("calibrate", str(path), env=env)
        requests = fake.chat_requests()
    assert result.returncode in (0, 1), result.stderr
    judged = next(r["messages"][1]["content"] for r in requests if "Paris" in str(r))
    assert (
        '[Assistant]:\n(calls get_weather {"city": "Paris"})\n\n[Tool get_weather]:\n{"temp_c": 21}' in judged
    )
    assert "[Assistant]:\nIt is 21 degrees in Paris." in judged


@pytest.mark.parametrize(
    "message, rule",
    [
        ("{role: assistant, tool_calls: []}", "`tool_calls` is a non-empty list"),
        ("{role: assistant, tool_calls: [{id: c1, function: {name: 3}}]}", "each tool call is"),
        ("{role: assistant, tool_calls: [get_weather]}", "each tool call is"),
        ("{role: tool, content: 3}", "a tool message's content is a string"),
    ],
)
def test_a_malformed_tool_message_skips_its_sample_naming_the_rule(message, rule):
    sample = f"  - {{messages: [{{role: user, content: hi}}, {message}, {{role: assistant, content: ok}}], expected: 1}}\n"
    loaded = load_calibration(SET + sample)
    (warning,) = loaded.warnings
    assert "samples[2] skipped" in str(warning) and rule in str(warning)


def test_an_expected_score_off_the_scale_is_an_error_with_its_location():
    with pytest.raises(SuiteError) as caught:
        load_calibration(SET.replace("score: -2,", "score: -5,"))
    (problem,) = caught.value.problems
    assert (problem.line, problem.path) == (15, "samples[1].expected.score")
    assert "expected score -5 is outside the judge's -3..3 scale" in problem.message


def test_judges_must_share_a_scale_and_have_distinct_names():
    two = SET.replace(
        "judge: {criteria: Polite and correct, scale: -3..3}",
        "judges:\n  - {criteria: Polite, scale: -3..3}\n  - {criteria: Correct, scale: 0-1}",
    )
    with pytest.raises(SuiteError, match="every judge needs the same scale") as caught:
        load_calibration(two)
    # Located at the judge that differs, not at the top of the set.
    (problem,) = caught.value.problems
    assert (problem.line, problem.path) == (4, "judges[1].scale")
    assert "this one is on 0-1, judges[0] on -3..3" in problem.message
    named = load_calibration(two.replace("scale: 0-1", "scale: -3..3"))
    assert [judge.name for judge in named.spec.all_judges] == ["judge-1", "judge-2"]
    with pytest.raises(SuiteError, match="two judges are named 'a'") as caught:
        load_calibration(
            two.replace("scale: 0-1", "scale: -3..3").replace("- {criteria", "- {name: a, criteria")
        )
    (problem,) = caught.value.problems
    assert (problem.line, problem.path) == (4, "judges[1].name")


def test_samples_come_from_an_attached_jsonl_or_calibrate_toml_file():
    jsonl = (
        json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
                    "expected": {"score": 1}}) + "\n\n"
        + json.dumps({"messages": [], "expected": {"score": 1}}) + "\n"
    )  # fmt: skip
    head = "name: s\njudge: {criteria: ok, scale: -3..3}\nsamples_file: "
    loaded = load_calibration(head + "rows.jsonl\n", files={"rows.jsonl": jsonl})
    assert [s.label for s in loaded.samples] == ["rows.jsonl line 1"]
    (warning,) = loaded.warnings
    assert (warning.file, warning.line) == ("rows.jsonl", 3) and "cannot be empty" in warning.message
    toml = """
[[samples]]
messages = [
  { role = "user", content = "What is 2+2?" },
  { role = "assistant", content = "The answer is 4" }
]
expected = { score = 3, reason = "Correct answer" }
"""
    loaded = load_calibration(head + "s.toml\n", files={"s.toml": toml})
    assert loaded.samples[0].expected_reason == "Correct answer"
    with pytest.raises(SuiteError, match="s.toml is not attached"):
        load_calibration(head + "s.toml\n")


def test_a_sets_samples_file_is_among_the_files_it_uses():
    from engine.loader import load_suite

    line = json.dumps({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}],
                       "expected": 1})  # fmt: skip
    source = "name: s\njudge: {criteria: ok, scale: 0-1}\nsamples_file: labels.jsonl\n"
    assert load_suite(source, files={"labels.jsonl": line + "\n"}).files_used() == ["labels.jsonl"]


def test_a_set_whose_every_sample_is_skipped_is_an_error():
    bad = "name: s\njudge: {criteria: ok}\nsamples:\n  - {messages: []}\n"
    with pytest.raises(SuiteError, match="no sample can be calibrated"):
        load_calibration(bad)


# --- the figures --------------------------------------------------------------------------------------------


def _judgements(pairs, tags=()):
    return [
        Judgement(i, 0, float(a), None if b is None else float(b), tags) for i, (a, b) in enumerate(pairs)
    ]


def test_plain_kappa_matches_the_published_worked_example():
    # Wikipedia's "Cohen's kappa" example: 50 proposals, both yes 20, A yes B no 5, A no B yes 10, both no 15.
    pairs = [(1, 1)] * 20 + [(1, 0)] * 5 + [(0, 1)] * 10 + [(0, 0)] * 15
    levels = levels_for("0-1", [a for a, _ in pairs], 0.5)
    assert levels.binary
    m = metrics(_judgements(pairs), "0-1", 0.5, levels)
    assert m.weighted_kappa == pytest.approx(0.4)
    assert m.pass_fail.kappa == pytest.approx(0.4)
    assert m.exact_agreement == pytest.approx(0.7) and m.within_one is None
    # Failures are the positives: the human failed 25, the judge caught 15 of them and failed 20 in all.
    assert (m.pass_fail.precision, m.pass_fail.recall) == (pytest.approx(15 / 20), pytest.approx(15 / 25))


def _quadratic_kappa(a, b, categories):
    """Cohen's weighted kappa written out from its definition, to check the wiring of levels and labels."""
    k = len(categories)
    index = {c: i for i, c in enumerate(categories)}
    observed = [[0.0] * k for _ in range(k)]
    for x, y in zip(a, b, strict=True):
        observed[index[x]][index[y]] += 1
    n = len(a)
    rows = [sum(observed[i]) for i in range(k)]
    cols = [sum(observed[i][j] for i in range(k)) for j in range(k)]
    weight = [[(i - j) ** 2 / (k - 1) ** 2 for j in range(k)] for i in range(k)]
    num = sum(weight[i][j] * observed[i][j] for i in range(k) for j in range(k))
    den = sum(weight[i][j] * rows[i] * cols[j] / n for i in range(k) for j in range(k))
    return 1 - num / den


def test_weighted_kappa_on_random_ordinal_data_matches_its_definition():
    rng = random.Random(7)
    for _ in range(20):
        expected = [rng.randint(-3, 3) for _ in range(60)]
        judged = [max(-3, min(3, e + rng.choice([-2, -1, 0, 0, 0, 1]))) for e in expected]
        levels = levels_for("-3..3", expected, 1)
        m = metrics(_judgements(zip(expected, judged, strict=True)), "-3..3", 1, levels)
        assert m.weighted_kappa == pytest.approx(_quadratic_kappa(expected, judged, list(range(-3, 4))))


def test_kappa_and_spearman_are_scikit_learns_and_scipys():
    """The site computes both itself (importing the libraries takes seconds); the libraries are the reference."""
    from scipy.stats import spearmanr
    from sklearn.metrics import cohen_kappa_score

    from engine.agreement import _cohen_kappa, _spearman

    rng = random.Random(31)
    for size in (2, 3, 7, 40, 200):
        for _ in range(10):
            a = [rng.randint(-3, 3) for _ in range(size)]
            b = [max(-3, min(3, x + rng.choice([-2, -1, 0, 0, 1]))) for x in a]
            labels = list(range(-3, 4))
            for weights in (None, "quadratic"):
                theirs = cohen_kappa_score(a, b, labels=labels, weights=weights)
                ours = _cohen_kappa(a, b, labels=labels, weights=weights)
                assert ours == (None if theirs != theirs else pytest.approx(theirs))  # NaN: None
            x = [rng.choice([0.0, 0.25, 0.5, 0.5, 1.0]) for _ in range(size)]
            y = [rng.random() if rng.random() < 0.8 else 0.5 for _ in range(size)]
            if len(set(x)) > 1 and len(set(y)) > 1:
                assert _spearman(x, y) == pytest.approx(spearmanr(x, y).statistic)


def test_errors_bias_within_one_spearman_and_the_confusion_matrix():
    pairs = [(3, 3), (3, 2), (-2, -1), (-2, None), (0, 2), (1, 1)]
    levels = levels_for("-3..3", [a for a, _ in pairs], 1)
    judgements = _judgements(pairs)
    m = metrics(judgements, "-3..3", 1, levels)
    assert (m.judgements, m.unscored, m.samples) == (6, 1, 6)
    assert m.exact_agreement == pytest.approx(2 / 5) and m.within_one == pytest.approx(4 / 5)
    assert m.mae == pytest.approx((0 + 1 + 1 + 2 + 0) / 5)
    assert m.bias == pytest.approx((0 - 1 + 1 + 2 + 0) / 5)  # the judge grades higher than the labels
    # Ranks (ties averaged): expected 4.5 4.5 1 2 3, judged 5 3.5 1 3.5 2; their Pearson r is 7.25 / 9.5.
    assert m.spearman == pytest.approx(7.25 / 9.5)
    grid = confusion(judgements, levels)
    assert grid.levels == [-3, -2, -1, 0, 1, 2, 3]
    assert grid.counts[6][6] == 1 and grid.counts[6][5] == 1 and grid.counts[1][2] == 1
    assert grid.counts[3][5] == 1 and sum(map(sum, grid.counts)) == 5


def test_continuous_scales_compare_on_bands_and_repeats_give_self_consistency():
    judgements = [
        Judgement(0, 0, 80, 84), Judgement(0, 1, 80, 77),  # both in the band of 80
        Judgement(1, 0, 20, 20), Judgement(1, 1, 20, 45),  # 20, then 50: inconsistent
    ]  # fmt: skip
    levels = levels_for("0-100", [80, 20], 50)
    m = metrics(judgements, "0-100", 50, levels)
    assert m.exact_agreement == pytest.approx(3 / 4) and m.consistency == pytest.approx(1 / 2)
    assert m.repeat_spread == pytest.approx((3.5 + 12.5) / 2)


def test_the_report_sorts_samples_by_disagreement_and_applies_gates():
    loaded = load_calibration(SET + "gates: {min_agreement: 0.9, min_kappa: 0.2}\nrepeats: 2\n")
    judged = [
        Judged("judge", 0, 0, 3, "great"), Judged("judge", 0, 1, 2, "good"),
        Judged("judge", 1, 0, 1, "meh"), Judged("judge", 1, 1, None, "unparseable", raw="??"),
    ]  # fmt: skip
    result = report(loaded, judged)
    (judge,) = result.judges
    assert [row.index for row in judge.samples] == [1, 0]  # off by 3, then by 0.5
    assert judge.samples[0].scores == [1, None] and judge.samples[0].raws == [None, "??"]
    assert judge.samples[1].agreement == pytest.approx(0.5) and judge.samples[1].judge_score == 2.5
    assert [(g.name, g.passed) for g in judge.gates] == [("min_agreement", False), ("min_kappa", True)]
    assert result.status == "failed" and not judge.passed
    assert set(judge.by_tag) == {"math"} and judge.by_tag["math"].judgements == 2


# --- the terminal -------------------------------------------------------------------------------------------


def _cli(*args, env):
    return subprocess.run(
        [sys.executable, "-m", "evalsite.cli", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_evalsite_calibrate_judges_through_a_real_endpoint_and_gates_the_exit_code(tmp_path):
    import os

    with FakeOpenAI(api_key=FAKE_KEY) as fake:
        # The judge sees the transcript in [Role]: form; it grades the polite reply 3 and the rude one 0.
        fake.rule("Figure it out yourself", '{"score": 0, "reason": "curt but not rude"}', where="any")
        fake.rule("The answer is 4", '{"score": 3, "reason": "correct and polite"}', where="any")
        path = tmp_path / "set.yaml"
        path.write_text(
            SET.replace("scale: -3..3}", "scale: -3..3, model: judge-1}") + "gates: {min_kappa: 0.9}\n"
        )
        out = tmp_path / "out.json"
        env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": FAKE_KEY,
               "EVALSITE_VAR_DIR": str(tmp_path / "var")}  # fmt: skip
        env.pop("DATABASE_URL", None)
        result = _cli("calibrate", str(path), "--json", str(out), env=env)
        requests = fake.chat_requests()
    assert result.returncode == 1, result.stderr  # kappa misses the gate
    assert len(requests) == 2 and {r["model"] for r in requests} == {"judge-1"}
    # The two samples are judged concurrently: find each one's request by its reply.
    polite = next(r["messages"][1]["content"] for r in requests if "The answer is 4" in str(r))
    assert "Conversation:\n[User]:\nWhat is 2+2?\n\n[Assistant]:\nThe answer is 4\n\nGrade" in polite
    assert "exact agreement 50%" in result.stdout and "gate min_kappa ≥ 0.9" in result.stdout
    assert "samples[1]: expected -2, judged 0 — curt but not rude" in result.stdout
    data = json.loads(out.read_text())
    assert data["format"] == "evalsite.calibration/1"
    (judge,) = data["judges"]
    assert set(judge["metrics"]) >= {"exact_agreement", "within_one", "mae", "bias", "weighted_kappa",
                                     "spearman", "consistency"}  # fmt: skip
    assert judge["metrics"]["mae"] == 1.0 and judge["metrics"]["bias"] == 1.0
    assert judge["samples"][0] | {} == judge["samples"][0]
    first = judge["samples"][0]
    assert (first["index"], first["expected_score"], first["judge_score"]) == (1, -2, 0)
    assert first["judge_reason"] == "curt but not rude" and first["agreement"] == 0
    assert judge["confusion"]["counts"][1][3] == 1  # expected -2, judged 0


def test_evalsite_validate_knows_a_calibration_set(tmp_path):
    import os

    path = tmp_path / "set.yaml"
    path.write_text(SET + "  - {messages: []}\n")
    env = {**os.environ, "EVALSITE_VAR_DIR": str(tmp_path / "var")}
    result = _cli("validate", str(path), env=env)
    assert result.returncode == 0, result.stderr
    assert "ok — calibration set 'tutor-politeness', 2 samples, 1 judge" in result.stdout
    assert f"warning: {path}:16:6 samples[2].messages: samples[2] skipped" in result.stderr


def test_comparing_two_calibrations_says_which_samples_moved_and_how_each_figure_did():
    loaded = load_calibration(SET)
    before = report(loaded, [Judged("judge", 0, 0, 1, "meh"), Judged("judge", 1, 0, 1, "fine")])
    after = report(loaded, [Judged("judge", 0, 0, 3, "great"), Judged("judge", 1, 0, 2, "ok")])
    (judge,) = compare(before, after)
    assert [c.label for c in judge.better] == ["samples[0]"]  # 1 → 3, expected 3
    assert [c.label for c in judge.worse] == ["samples[1]"]  # 1 → 2, expected -2
    mae = next(m for m in judge.metrics if m.name == "mae")
    assert (mae.before, mae.after, mae.delta, mae.better) == (2.5, 2.0, -0.5, True)
    bias = next(m for m in judge.metrics if m.name == "bias")
    assert (bias.before, bias.after, bias.better) == (0.5, 2.0, False)  # further from 0


def test_evalsite_calibrate_caches_the_first_answers_and_raises_its_concurrency(tmp_path):
    """--cache: a second calibration asks only the repeats again (each sample's first answer comes from the
    local cache); --no-cache asks everything; --concurrency 30 on the default endpoint plays 30 at once, where
    the endpoint's default cap held it at 10."""
    import os

    path = tmp_path / "set.yaml"
    samples = "".join(
        f"  - messages: [{{role: user, content: 'Q{n}'}}, {{role: assistant, content: 'A{n}'}}]\n"
        "    expected: {score: 3}\n"
        for n in range(20)
    )
    path.write_text(
        "name: politeness\njudge: {criteria: Polite, scale: -3..3, model: judge-1}\nrepeats: 2\nsamples:\n"
        + samples
    )
    with FakeOpenAI(api_key=FAKE_KEY, latency=0.2) as fake:
        fake.default_reply = '{"score": 3, "reason": "polite"}'
        env = {**os.environ, "OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": FAKE_KEY,
               "EVALSITE_VAR_DIR": str(tmp_path / "var"), "XDG_CACHE_HOME": str(tmp_path / "xdg")}  # fmt: skip
        env.pop("DATABASE_URL", None)
        calls = []
        for flags in (["--cache", "--concurrency", "30"], ["--cache"], ["--no-cache"]):
            before = len(fake.chat_requests())
            result = _cli("calibrate", str(path), *flags, env=env)
            assert result.returncode == 0, result.stderr
            calls.append(len(fake.chat_requests()) - before)
            if len(calls) == 1:
                assert fake.max_in_flight == 30
    assert calls == [40, 20, 40]
