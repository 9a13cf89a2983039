"""promptfoo configuration and today's AgentV format (one reader): imported from fixture folders written in
their shapes, validated, and played on the fake endpoint (a real HTTP server), checking what the tools
would have done: the user turns sent, the judge's prompt, thresholds, weights, required items, iterations."""

from __future__ import annotations

import json

import pytest

from engine.imports import convert, detect
from engine.loader import load_suite
from tests.engine.promptfoo_play import (
    judged,
    play,
    project,
    sent_user_turns,
    verdict,
)

# --- today's AgentV ----------------------------------------------------------------------------------------


def test_todays_agentv_is_detected_as_agentv_and_converts_with_its_losses_listed():
    files = project("agentv-vars")
    assert detect(files) == "agentv"
    result = convert(files)
    suite = load_suite(result.source, files=result.files)
    assert [ev.id for ev in suite.evals] == [
        "refund-weighted",
        "refund-required",
        "short-answer",
        "onboarding-conversation",
    ]
    assert suite.iterations == 3 and suite.pass_rate_threshold == pytest.approx(1 / 3, abs=1e-6)
    # any_order with `expected` and no `minimums`: AgentV passes it whatever is called, nothing to carry
    assert result.lost == []
    refund = suite.evals[0]
    assert set(refund.graders) == {"criteria", "tone", "contains"}
    assert all(g.threshold == 0.8 for g in refund.graders.values())  # AgentV's 0.8, not evalsite's 1.0
    assert refund.pass_rule.weighted_average == {"criteria": 1.0, "tone": 4.0, "contains": 1.0}
    assert refund.pass_rule.threshold == 0.8 and refund.pass_rule.required == []
    assert suite.evals[1].pass_rule.required == ["contains"]
    # The expected_output object is the judge's reference answer, not strict field checks.
    assert json.loads(refund.ground_truth) == {"answer": "five business days", "confidence": 0.92}
    assert "field_equals" not in result.source
    tone = refund.graders["tone"].rubric
    assert (
        "{submission}" in tone
        and "{input}" in tone
        and "{ground_truth}" in tone
        and "{{ output }}" not in tone
    )
    code = suite.evals[2].graders["length"].check.code
    assert code.command == ["python3", "check_length.py"] and code.dialect == "agentv"
    assert result.files["check_length.py"].startswith('"""AgentV code grader')


def test_todays_agentv_plays_as_agentv_would(fake_openai, tmp_path):
    """Every scripted turn is sent; the judge sees the reply; a 0.8 judge passes at 0.8; weights and a required
    item decide as in AgentV; a code grader reads AgentV's payload; three trials run."""
    fake = fake_openai
    result = convert(project("agentv-vars"))
    fake.script("How long does a refund take?", ["Refunds take five business days."])
    fake.script("How long does a refund take, exactly?", ["Refunds take five business days."])
    fake.script("Where is my order 1234?", ["It ships tomorrow."])
    fake.script(
        "Hi, I am Dana and I want to open an account.",
        ["Hello Dana, welcome!", "Bring your passport, Dana.", "Yes Dana, it can be done online."],
    )
    fake.rule("States that refunds take five business days", verdict(0.8, "states it"))
    fake.rule("You grade the tone of a support reply", verdict(1.0, "polite"))
    for criterion in (
        "Greets Dana by name",
        "Lists an identity document",
        "Says whether it can be done online",
    ):
        fake.rule(criterion, verdict(0.8))
    fake.rule("Keeps the customer's name", verdict(0.9))

    report = play(fake, result, tmp_path)

    assert len(report.evals) == 12  # 4 tests × 3 trials
    first = {r.id: r for r in report.evals if r.iteration == 0}
    # Weighted: (0.8×1 + 1.0×4 + 0×1) / 6 = 0.8 ≥ 0.8, although `contains Hello` failed.
    weighted = first["refund-weighted"]
    assert weighted.status == "passed", weighted.verdict
    assert weighted.score == pytest.approx(0.8)
    criteria = next(g for g in weighted.graders if g.name == "criteria")
    assert criteria.score == pytest.approx(0.8) and criteria.passed  # a 0.8 judge passes at AgentV's 0.8
    # The same test with `contains` required fails on it, whatever the mean.
    required = first["refund-required"]
    assert required.status == "failed" and "required contains failed" in required.verdict
    # The judge's prompt holds the reply and the reference answer, not AgentV's template variables.
    (tone,) = {text for text in judged(fake, "You grade the tone") if "exactly" not in text}
    assert "Refunds take five business days." in tone.split("[[ ## answer ## ]]")[1]
    assert '"confidence": 0.92' in tone and "How long does a refund take?" in tone
    assert "{{" not in tone and "{submission}" not in tone
    # The code grader got AgentV's payload and answered {score, hits, misses, reasoning}.
    short = first["short-answer"]
    assert short.status == "passed"
    (length,) = short.graders
    assert length.score == 1.0
    reason = length.grades[0].rationale
    assert "'Where is my order 1234?'" in reason and "expected 'It ships tomorrow.'" in reason
    # Every scripted user turn of the conversation was sent, in order, after the system message.
    talk = first["onboarding-conversation"]
    assert talk.status == "passed", talk.verdict
    assert [t.prompt for t in talk.turns] == [
        "Hi, I am Dana and I want to open an account.",
        "Which documents do I need?",
        "Can I do it online?",
    ]
    last = sent_user_turns(fake, "Hi, I am Dana and I want to open an account.")[-1]
    assert last == [
        "Hi, I am Dana and I want to open an account.",
        "Which documents do I need?",
        "Can I do it online?",
    ]
    assert judged(fake, "Keeps the customer's name")  # the conversation-level criterion was judged


def test_agentv_conversation_stops_at_a_failed_turn_and_takes_the_weakest_turn(fake_openai):
    """`on_turn_failure: stop` stops after a turn below 0.8; `aggregation: min` scores the weakest turn."""
    fake = fake_openai
    result = convert(project("agentv-vars"))
    fake.script("Hi, I am Dana and I want to open an account.", ["Hello there.", "A passport.", "Yes."])
    fake.rule("Greets Dana by name", verdict(0.3, "no name"))
    fake.rule("Keeps the customer's name", verdict(0.9))
    for needle in ("States that", "You grade the tone", "Lists an identity", "Says whether"):
        fake.rule(needle, verdict(1.0))
    fake.script("How long does a refund take?", ["Hello, five business days."])
    fake.script("How long does a refund take, exactly?", ["Hello, five business days."])
    fake.script("Where is my order 1234?", ["Tomorrow."])

    report = play(fake, result)

    talk = next(r for r in report.evals if r.id == "onboarding-conversation" and r.iteration == 0)
    assert talk.status == "failed"
    assert len(talk.turns) == 1  # stopped: the next scripted turns were not sent after a failed turn
    assert talk.score == pytest.approx(0.3)
    code = next(r for r in report.evals if r.id == "short-answer" and r.iteration == 0)
    assert code.status == "error" and "not enabled" in code.verdict  # no code runner here: said, not skipped


# --- promptfoo ---------------------------------------------------------------------------------------------


def test_promptfoo_config_is_detected_and_converts_its_assertions():
    files = project("promptfoo")
    assert detect(files) == "promptfoo"
    result = convert(files)
    assert result.lost == []
    suite = load_suite(result.source, files=result.files)
    assert [ev.id for ev in suite.evals] == ["capital-of-France", "json-booking", "capital-of-Italy"]
    assert suite.iterations == 2 and suite.pass_rate_threshold == 1.0
    france, booking, italy = suite.evals
    assert france.input == "You are a friendly travel assistant.\nWhat is the capital of France?"
    assert france.pass_rule is None  # promptfoo: every assertion passes (evalsite's `all`)
    assert france.graders["contains"].check.regex == "Paris"  # case-sensitive, as promptfoo's contains
    assert "Names Paris as the capital" in france.graders["accuracy"].rubric  # vars rendered in the rubric
    assert "Reply to grade: {submission}" in france.graders["accuracy"].rubric  # options.rubricPrompt
    assert booking.pass_rule.threshold == 0.75
    assert booking.pass_rule.weighted_average == {
        "not-icontains": 1.0,
        "is-json": 3.0,
        "regex": 1.0,
        "python": 1.0,
    }
    assert booking.graders["is-json"].check.is_json is True
    assert booking.graders["python"].check.code.function == "check_reply:get_assert"
    assert italy.graders["similar"].check.semantic.threshold == 0.8
    assert italy.graders["icontains"].check.contains == "rome"


def test_promptfoo_config_plays_with_its_pass_rules(fake_openai, tmp_path):
    fake = fake_openai
    result = convert(project("promptfoo"))
    france = "You are a friendly travel assistant.\nWhat is the capital of France?"
    booking = "You are a friendly travel assistant.\nGive the booking as JSON with a status field."
    italy = "You are a friendly travel assistant.\nWhat is the capital of Italy?"
    fake.script(france, ["Paris."])
    fake.script(booking, ['{"status": "confirmed"}'])
    fake.script(italy, ["Rome is the capital of Italy."])
    fake.rule("Names Paris as the capital", verdict(0.9))

    report = play(fake, result, tmp_path)

    assert len(report.evals) == 6  # repeat: 2
    first = {r.id: r for r in report.evals if r.iteration == 0}
    assert first["capital-of-France"].status == "passed"
    # equals fails but has weight 0; the weighted mean 1.0 passes the test's 0.75 threshold
    assert first["json-booking"].status == "passed", first["json-booking"].verdict
    python = next(g for g in first["json-booking"].graders if g.name == "python")
    assert python.passed and python.score == 1.0  # get_assert(output, context) saw the vars
    (rubric,) = set(judged(fake, "Names Paris as the capital"))
    assert "Reply to grade: Paris." in rubric


def test_promptfoo_conversation_sends_every_test_as_a_turn_of_one_conversation(fake_openai):
    fake = fake_openai
    result = convert(project("promptfoo-conversation"))
    suite = load_suite(result.source, files=result.files)
    (ev,) = suite.evals
    assert ev.id == "plays" and [t.input for t in ev.turns] == [
        "Who wrote Hamlet?",
        "When was he born?",
        "Where was he born?",
    ]
    fake.script("Who wrote Hamlet?", ["William Shakespeare.", "In 1564.", "In Stratford-upon-Avon."])
    fake.rule("Gives the year 1564", verdict(1.0))

    report = play(fake, result)

    (played,) = report.evals
    assert played.status == "passed", played.verdict
    assert sent_user_turns(fake, "Who wrote Hamlet?")[-1] == [
        "Who wrote Hamlet?",
        "When was he born?",
        "Where was he born?",
    ]
    request = [
        r for r in fake.chat_requests() if r["messages"][0]["content"] == "You are a helpful assistant."
    ][-1]
    assert [m["role"] for m in request["messages"]] == [
        "system",
        "user",
        "assistant",
        "user",
        "assistant",
        "user",
    ]


def test_a_promptfoo_test_threshold_lets_weights_decide(fake_openai):
    """Without `threshold` every assertion must pass; with one, the weighted mean decides (promptfoo)."""
    config = """
prompts: ["{{ q }}"]
providers: [openai:gpt-4.1-mini]
tests:
  - description: strict
    vars: {q: Say hi}
    assert:
      - {type: icontains, value: hello}
      - {type: icontains, value: hi, weight: 3}
  - description: lenient
    vars: {q: Say hi please}
    threshold: 0.7
    assert:
      - {type: icontains, value: hello}
      - {type: icontains, value: hi, weight: 3}
"""
    result = convert({"promptfooconfig.yaml": config})
    fake_openai.script("Say hi", ["hi"])
    fake_openai.script("Say hi please", ["hi"])
    report = play(fake_openai, result)
    by_id = {r.id: r for r in report.evals}
    assert by_id["strict"].status == "failed"
    assert by_id["lenient"].status == "passed" and by_id["lenient"].score == pytest.approx(0.75)


@pytest.mark.parametrize(
    ("kind", "value", "reply", "passes"),
    [
        ("not-contains", "sorry", "Sure, here it is", True),
        ("not-contains", "sorry", "I am sorry", False),
        ("not-icontains", "SORRY", "i am sorry", False),
        ("not-regex", "\\d+", "no digits", True),
        ("not-regex", "\\d+", "42", False),
        ("not-equals", "4", " 4 ", False),
        ("not-starts-with", "Sure", "Sure thing", False),
        ("contains-all", ["red", "blue"], "red and blue", True),
        ("contains-all", ["red", "blue"], "red only", False),
        ("icontains-any", ["RED", "green"], "a red car", True),
        ("not-contains-any", ["red", "green"], "a blue car", True),
        ("not-is-json", None, '{"a": 1}', False),
        ("ends-with", "done.", "All done.\n", True),
    ],
)
def test_promptfoo_not_and_any_assertions_grade_as_promptfoo_does(kind, value, reply, passes):
    from engine.checks import Reply, evaluate
    from engine.schema import Check

    item = {"type": kind} if value is None else {"type": kind, "value": value}
    config = {
        "prompts": ["{{ q }}"],
        "providers": ["echo"],
        "tests": [{"vars": {"q": "x"}, "assert": [item]}],
    }
    result = convert({"promptfooconfig.yaml": json.dumps(config)})
    assert result.lost == []
    (grader,) = load_suite(result.source).evals[0].graders.values()
    check = Check.model_validate(grader.check.model_dump(by_alias=True, exclude_none=True))
    assert evaluate(check, Reply(reply, None, []), None).passed is passes


def test_what_cannot_be_converted_is_lost_by_key():
    config = {
        "prompts": ["file://prompt.py:make", "Answer {{ q }} {% if x %}carefully{% endif %}"],
        "providers": ["openai:gpt-4.1-mini"],
        "tests": [
            {
                "vars": {"q": "2+2"},
                "assert": [
                    {"type": "javascript", "value": "output.length < 10"},
                    {"type": "not-llm-rubric", "value": "is rude"},
                    {"type": "contains", "value": "4"},
                ],
            }
        ],
    }
    result = convert({"promptfooconfig.yaml": json.dumps(config)})
    lost = "\n".join(result.lost)
    assert "prompts[0]: prompt.py is a prompt function" in lost
    assert "tests[0].assert[0]: javascript assertion" in lost
    assert "tests[0].assert[1]: not-llm-rubric" in lost
    assert "{% if x %}" in lost  # a tag the reader cannot render is listed, not sent in silence


def test_agentv_pass_at_k_passes_when_any_trial_passes(fake_openai):
    """`trials: {count: 3, strategy: pass_at_k}`: three runs, and the eval passes when one of them does; with
    `pass_all` the same runs fail it."""
    eval_file = """
providers: [llm]
prompts: ["{{ input }}"]
execution:
  trials: {count: 3, strategy: %s}
tests:
  - id: flaky
    assert: [Answers 42]
    vars: {input: What is six times seven?}
"""
    statuses = {}
    for strategy in ("pass_at_k", "pass_all"):
        fake_openai.reset()
        fake_openai.script("What is six times seven?", ["42"])
        fake_openai.rule("Answers 42", [verdict(0.2), verdict(0.2), verdict(0.9)])
        result = convert({"flaky.eval.yaml": eval_file % strategy})
        report = play(fake_openai, result)
        assert sorted(r.status for r in report.evals) == ["failed", "failed", "passed"]
        (iterated,) = report.iterated
        statuses[strategy] = iterated.status
    assert statuses == {"pass_at_k": "passed", "pass_all": "failed"}


def test_a_required_grader_must_grade_the_eval():
    from engine.source import SuiteError

    suite = """
name: s
evals:
  - input: hi
    graders:
      polite: {contains: hello}
    pass_rule: {weighted_average: {polite: 1}, threshold: 0.8, required: [kind]}
"""
    with pytest.raises(SuiteError) as raised:
        load_suite(suite)
    (problem,) = raised.value.problems
    assert problem.path == "evals[0].pass_rule.required[0]" and problem.line == 7
    assert "no grader named 'kind'" in problem.message


@pytest.mark.parametrize(
    ("reply", "wanted", "passes"),
    [
        ('{"a": [1, 2]}', True, True),
        ("Sure: {}", True, False),
        ("plain words", False, True),
        ("[1]", False, False),
    ],
)
def test_is_json_checks_the_whole_reply(reply, wanted, passes):
    from engine.checks import Reply, evaluate
    from engine.schema import Check

    assert evaluate(Check.model_validate({"is_json": wanted}), Reply(reply, None, []), None).passed is passes


def test_promptfoo_inline_python_runs_as_promptfoo_runs_it(fake_openai, tmp_path):
    """Inline python: one line is an expression; several lines a function body with `json` at hand, its last
    bare expression returned."""
    config = {
        "prompts": ["{{ q }}"],
        "providers": ["openai:gpt-4.1-mini"],
        "tests": [
            {
                "description": "inline",
                "vars": {"q": "Give JSON", "key": "status"},
                "assert": [
                    {"type": "python", "value": "output.startswith('{')"},
                    {
                        "type": "python",
                        "value": "data = json.loads(output)\ncontext['vars']['key'] in data\n",
                    },
                ],
            }
        ],
    }
    result = convert({"promptfooconfig.yaml": json.dumps(config)})
    assert sorted(result.files) == ["promptfoo_assert_1.py", "promptfoo_assert_2.py"]
    fake_openai.script("Give JSON", ['{"status": "ok"}'])
    (played,) = play(fake_openai, result, tmp_path).evals
    assert played.status == "passed", played.verdict
    assert [g.passed for g in played.graders] == [True, True]


def test_agentv_judge_prompt_on_a_given_history_names_the_question():
    """When the last user message has file parts the eval is a given history, with no live `{input}`: the
    judge prompt's `{{ input }}` is the question's text, written in."""
    eval_file = """
prompts: ["{{ input }}"]
tests:
  - id: review
    assert:
      - type: llm-grader
        prompt: "Question: {{ input }}\\nAnswer: {{ output }}"
    vars:
      input:
        - role: user
          content:
            - {type: text, value: Review this function.}
            - {type: file, value: code.py}
"""
    result = convert({"review.eval.yaml": eval_file, "code.py": "def f(): pass\n"})
    (ev,) = load_suite(result.source, files=result.files).evals
    assert ev.input is None and ev.messages[0].content[1].value == "code.py"
    assert ev.graders["llm-grader"].rubric == "Question: Review this function.\nAnswer: {submission}\n"


def test_a_glob_reads_the_files_beside_the_suite_not_every_suite_of_the_project():
    """`scenarios: [file://scenarios/*.yaml]` in a project: the scenario files in that folder, never the other
    suites of the project (which stay suites of their own)."""
    from engine.imports import convert_all

    config = (
        'prompts: ["Translate {{ phrase }} to {{ language }}"]\n'
        "providers: [echo]\n"
        "scenarios: [file://scenarios/*.yaml]\n"
    )
    scenario = (
        "- config: [{id: fr, vars: {language: French}}, {id: de, vars: {language: German}}]\n"
        "  tests: [{description: hello, vars: {phrase: hello}, assert: [{type: icontains, value: o}]}]\n"
    )
    other = 'prompts: ["{{ q }}"]\nproviders: [echo]\ntests: [{vars: {q: hi}, assert: [{type: contains, value: h}]}]\n'
    imported = convert_all(
        {
            "translate/promptfooconfig.yaml": config,
            "translate/scenarios/matrix.yaml": scenario,
            "other/promptfooconfig.yaml": other,
        }
    )
    assert imported.problems == []
    by_origin = {result.origin: result for result in imported.results}
    assert set(by_origin) == {"translate/promptfooconfig.yaml", "other/promptfooconfig.yaml"}
    suite = load_suite(by_origin["translate/promptfooconfig.yaml"].source)
    assert [(ev.id, ev.input) for ev in suite.evals] == [
        ("hello-fr", "Translate hello to French"),
        ("hello-de", "Translate hello to German"),
    ]


TODAYS_UNASSERTED_TURN = """\
description: An onboarding assistant greets, then explains the plan
providers: [openai:gpt-4o]
prompts: ["{{ input }}"]
tests:
  - id: greet-then-explain
    mode: conversation
    aggregation: mean
    vars:
      input:
        - role: system
          content: You are an onboarding assistant for a gym.
    turns:
      - input: Hi, I just signed up.
      - input: What does the starter plan include?
        assert:
          - Lists the three classes of the starter plan
"""


def test_todays_agentv_turn_without_assertions_counts_10_in_the_mean(fake_openai):
    fake = fake_openai
    result = convert({"onboarding.eval.yaml": TODAYS_UNASSERTED_TURN})
    assert result.kind == "agentv" and result.lost == []
    fake.script("Hi, I just signed up.", ["Welcome aboard!", "Yoga and spinning."])
    fake.rule("Lists the three classes of the starter plan", verdict(0.7))  # alone it fails 0.8

    report = play(fake, result)

    case = report.evals[0]
    assert len(sent_user_turns(fake, "Hi, I just signed up.")) == 2
    assert case.score == pytest.approx(0.85)  # AgentV: mean(1.0, 0.7)
    assert case.status == "passed"
