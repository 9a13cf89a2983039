"""AgentV's older eval files, imported and played end to end: `evalsite import` of a fixture folder written in
AgentV's shapes (the `tests` / `criteria` / `assertions` files, v1 `testcases`), then `evalsite run` on the
fake OpenAI endpoint (a real HTTP server), asserting what AgentV would have done: every scripted user turn
sent, the judge shown the real reply, a case passing at a score of 0.8, weights and required assertions,
trials as iterations, and tags in results.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from engine import suitevars
from engine.imports import ImportProblem, convert
from engine.judge import JUDGE_SYSTEM
from engine.loader import load_suite
from tests.conftest import FAKE_KEY
from tests.engine.import_fixtures import has
from tests.engine.standalone import evalsite
from tests.fakeopenai import FakeOpenAI

FIXTURES = Path(__file__).parents[1] / "fixtures" / "imports"


def score(value: float, reason: str = "graded") -> str:
    return json.dumps({"score": value, "reason": reason})


@pytest.fixture
def fake():
    with FakeOpenAI(api_key=FAKE_KEY) as server:
        yield server


def import_and_run(fake: FakeOpenAI, folder: str, tmp: Path) -> tuple[int, dict, str]:
    """`evalsite import` every file of the fixture folder, then `evalsite run` the suite on the fake endpoint:
    (the run's exit code, its results.json, its output)."""
    given = sorted(str(path) for path in (FIXTURES / folder).iterdir())
    imported = evalsite("import", *given, "--out", "out/suite.yaml", cwd=tmp)
    assert imported.returncode in (0, 1), imported.stdout + imported.stderr
    env = {"OPENAI_BASE_URL": fake.base_url, "OPENAI_API_KEY": FAKE_KEY, "EVALSITE_MAX_RETRIES": "1"}
    ran = evalsite(
        "run", "out/suite.yaml", "--model", "gpt-test", "--json", "results.json", cwd=tmp,
        EVALSITE_VAR_DIR=str(tmp), **env,
    )  # fmt: skip
    assert (tmp / "results.json").is_file(), ran.stdout + ran.stderr
    return ran.returncode, json.loads((tmp / "results.json").read_text()), ran.stdout


def model_requests(fake: FakeOpenAI, first_user: str) -> list[list[dict]]:
    return [body["messages"] for body in fake.chat_requests(first_user) if not _is_judge(body)]


def judge_prompts(fake: FakeOpenAI) -> list[str]:
    return [body["messages"][-1]["content"] for body in fake.chat_requests() if _is_judge(body)]


def _is_judge(body: dict) -> bool:
    first = body["messages"][0]
    return first["role"] == "system" and first["content"].startswith(JUDGE_SYSTEM.split(".")[0])


def by_id(results: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for item in results["evals"]:
        out.setdefault(item["id"], []).append(item)
    return out


# --- mode: conversation ---------------------------------------------------------------------------------------


def test_live_conversation_sends_every_user_turn_and_grades_each_turn(fake, tmp_path):
    fake.script(
        "What is 15% of 200?", ["15% of 200 is 30.", "Doubled, that is 60.", "You asked about 15% and 200."]
    )
    fake.script("What is 2 + 2?", ["4", "That makes 13.", "11"])
    fake.rule("Calculates 15% of 200 as 30", score(1.0))
    fake.rule("Doubles the previous answer to 60", score(0.9))
    fake.rule("Recalls that the user asked about 15% and 200", score(1.0))
    fake.rule("Stays consistent with its earlier answers", score(0.85))

    code, results, out = import_and_run(fake, "agentv-conversation", tmp_path)

    # every scripted user turn is sent, after the system message, with the replies so far
    sent = model_requests(fake, "What is 15% of 200?")
    assert len(sent) == 3
    assert sent[-1] == [
        {"role": "system", "content": "You are a concise math tutor. Show your working."},
        {"role": "user", "content": "What is 15% of 200?"},
        {"role": "assistant", "content": "15% of 200 is 30."},
        {"role": "user", "content": "Now double that result."},
        {"role": "assistant", "content": "Doubled, that is 60."},
        {"role": "user", "content": "What were the original numbers I asked about?"},
    ]
    # each turn's judge sees that turn's real reply; the conversation-level one the whole conversation
    doubled = next(p for p in judge_prompts(fake) if "Doubles the previous answer to 60" in p)
    assert "Doubled, that is 60." in doubled
    whole = next(p for p in judge_prompts(fake) if "Stays consistent" in p)
    assert "15% of 200 is 30." in whole and "You asked about 15% and 200." in whole

    evals = by_id(results)
    retention = evals["context-retention"][0]
    assert retention["status"] == "passed" and retention["conversation"] == "turns"
    assert len(retention["turns"]) == 3 and retention["turns_total"] == 3
    assert retention["tags"] == ["conversation:tutor-math"]  # conversation_id, now in results.json

    # on_turn_failure: stop — turn 2 fails its regex, so turn 3 is never sent and the eval fails
    stopped = evals["stop-on-failure"][0]
    assert len(model_requests(fake, "What is 2 + 2?")) == 2
    assert stopped["status"] == "failed" and len(stopped["turns"]) == 2
    assert code == 1, out


def test_live_conversation_imports_to_turns_with_aggregation_and_on_turn_failure():
    folder = FIXTURES / "agentv-conversation"
    result = convert({path.name: path.read_text() for path in folder.iterdir()})
    assert result.lost == []
    raw = yaml.safe_load(result.source)
    retention, stop = raw["evals"]
    assert [turn["input"] for turn in retention["turns"]] == [
        "What is 15% of 200?",
        "Now double that result.",
        "What were the original numbers I asked about?",
    ]
    assert retention["turns"][0]["checks"] == [
        {"llm_judge": {"criteria": "Calculates 15% of 200 as 30", "threshold": 0.8}},
        {"contains": "30"},
    ]
    # the conversation-level assertion is a grader of the whole conversation, one more score beside the turns'
    assert "checks" not in retention and retention["graders"]["criteria"]["kind"] == "llm_judge"
    assert retention["pass_rule"] == {
        "weighted_average": {"criteria": 1.0},
        "threshold": 0.8,
        "with_turns": True,
    }
    assert retention["aggregation"] == "mean" and "on_turn_failure" not in retention
    assert (stop["aggregation"], stop["on_turn_failure"]) == ("min", "stop")
    assert raw["pass_threshold"] == 0.8
    suite = load_suite(result.source)
    assert [ev.style for ev in suite.evals] == ["turns", "turns"]


# --- graders: thresholds, weights, required, trials, placeholders, references -----------------------------


def test_assertions_keep_weights_the_08_pass_placeholders_and_trials(fake, tmp_path):
    fake.script("Can I return my order from 12 days ago?", ["Yes, you are within our 30-day window."])
    fake.script(
        "Invoice INV-9 from ACME, total 120 EUR. Return JSON.",
        ['{"invoice": "INV-9", "vendor": "ACME", "confidence": 0.95}'],
    )
    fake.script("Hello there", ["Hello! How can I help with your order?"])
    fake.script("When are you open?", ["We open at 9 every day. Sorry for any wait."])
    fake.script("Where is my parcel?", ["Use the tracking link in your email."])
    fake.rule("Score 1 when the answer states the refund window", score(0.8))
    fake.rule("Extracts the invoice fields", score(0.9, "all fields right; confidence close"))
    fake.rule("Greets the customer politely", score(0.7))

    code, results, out = import_and_run(fake, "agentv-graders", tmp_path)
    evals = by_id(results)

    # trials: {count: 3, strategy: pass_at_k} → every eval runs 3 times, one passing run is enough
    assert {name: len(runs) for name, runs in evals.items()} == {
        "refund-window": 3,
        "extraction": 3,
        "greeting": 3,
        "opening-hours": 3,
        "track-parcel": 3,
    }
    iterated = {item["id"]: item for item in results["iterated"]}
    assert iterated["refund-window"]["stats"]["pass_rate_threshold"] == pytest.approx(0.333)

    # the prompt file's {{ input }} / {{expected_output}} / {{ output }}: the judge sees the real reply
    policy = next(p for p in judge_prompts(fake) if "Score 1 when the answer states" in p)
    assert "Answer: Yes, you are within our 30-day window." in policy
    assert "Question: Can I return my order from 12 days ago?" in policy
    assert "Reference answer: Yes, you are within the 30-day window." in policy
    assert "{{" not in policy and "{submission}" not in policy

    # weighted mean (policy 0.8 × 3, mentions-window 1, keywords 1, no-apology 1) = 0.9 ≥ 0.8: passes (a
    # named grader's default threshold of 1.0 would have failed the 0.8 judge); the code-grader ran its
    # program on AgentV's payload, its own keys as config
    refund = evals["refund-window"][0]
    assert refund["status"] == "passed" and refund["score"] == pytest.approx(0.9)
    assert refund["tags"] == ["billing", "conversation:refunds-01"]
    assert {g["name"]: g["score"] for g in refund["graders"]} == {
        "policy": pytest.approx(0.8),
        "mentions-window": 1.0,
        "keywords": 1.0,
        "no-apology": 1.0,
    }

    # an object expected_output is the judge's reference (JSON text): confidence 0.95 against 0.92 is the
    # judge's to weigh, not a strict field comparison
    extraction = evals["extraction"][0]
    assert extraction["status"] == "passed"
    reference = next(p for p in judge_prompts(fake) if "Extracts the invoice fields" in p)
    assert '"confidence": 0.92' in reference and '"confidence": 0.95' in reference

    # text assertions are one rubric judge: 0.7 with no-apology 1.0 → 0.85 ≥ 0.8 passes
    assert evals["greeting"][0]["status"] == "passed"
    assert evals["greeting"][0]["score"] == pytest.approx(0.85)
    # the suite's negated `contains: Sorry` fails here: (1 + 0) / 2 = 0.5 < 0.8
    hours = evals["opening-hours"][0]
    assert hours["status"] == "failed" and hours["score"] == pytest.approx(0.5)
    assert evals["track-parcel"][0]["status"] == "passed"
    assert code == 1, out


def test_a_required_assertion_that_fails_fails_the_case_whatever_the_weighted_score(fake, tmp_path):
    # policy 1.0 × 3, mentions-window 0, keywords 0, no-apology 1: weighted 0.67; and with keywords met
    # (0.83) the required one still fails it
    fake.script("Can I return my order from 12 days ago?", ["Yes, you are within the window to return it."])
    fake.default_reply = "Fine."
    fake.rule("Score 1 when the answer states the refund window", score(1.0))
    fake.rule("Extracts the invoice fields", score(1.0))
    fake.rule("Greets the customer politely", score(1.0))

    _, results, _ = import_and_run(fake, "agentv-graders", tmp_path)
    refund = by_id(results)["refund-window"][0]
    assert refund["score"] == pytest.approx(5 / 6)
    assert refund["status"] == "failed" and "required mentions-window failed" in refund["verdict"]


def test_a_judge_under_08_fails_where_evalsite_default_judge_would_pass(fake, tmp_path):
    fake.default_reply = "Fine."
    fake.rule("Extracts the invoice fields", score(0.7))
    fake.rule("Score 1 when the answer states the refund window", score(1.0))
    fake.rule("Greets the customer politely", score(1.0))
    _, results, _ = import_and_run(fake, "agentv-graders", tmp_path)
    assert by_id(results)["extraction"][0]["status"] == "failed"


# --- v1 testcases ---------------------------------------------------------------------------------------------


def test_v1_testcases_send_the_user_messages_and_judge_against_the_first_assistant_message(fake, tmp_path):
    fake.default_reply = "Use reduce() and check that items is an array."
    fake.rule("Points out that the loop can use reduce", score(0.9))
    fake.rule("Returns a dictionary of file sizes", score(0.6))
    code, results, _ = import_and_run(fake, "agentv-v1", tmp_path)
    evals = by_id(results)
    assert evals["review-function"][0]["status"] == "passed"
    assert evals["follow-up"][0]["status"] == "failed"  # 0.6 < 0.8
    sent = model_requests(fake, "My script fails on missing files.")
    assert [m["role"] for m in sent[0]] == ["user", "user"]
    judged = next(p for p in judge_prompts(fake) if "Points out that the loop" in p)
    assert "Consider reduce() and validate that items is an array." in judged  # the reference answer
    assert "Use reduce() and check that items is an array." in judged  # the reply
    assert code == 1


# --- smaller shapes -------------------------------------------------------------------------------------------


def test_input_files_become_file_parts_before_the_text_and_are_attached():
    source = """
input_files: [../fixtures/style.md]
tests:
  - id: summarise
    criteria: Summarises the CSV
    input_files: [../fixtures/sales.csv]
    input: Summarise this.
  - id: alone
    criteria: Answers
    execution: {skip_defaults: true}
    input: Hi
"""
    result = convert({"s.eval.yaml": source, "sales.csv": "m,a\n1,2\n", "style.md": "Be brief."})
    summarise, alone = yaml.safe_load(result.source)["evals"]
    assert summarise["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "file", "value": "style.md"},
                {"type": "file", "value": "sales.csv"},
                {"type": "text", "value": "Summarise this."},
            ],
        }
    ]
    assert alone["messages"] == [{"role": "user", "content": "Hi"}]
    load_suite(result.source, files=result.files)


def test_dropped_graders_are_losses_and_a_case_with_none_left_is_listed():
    source = """
tests:
  - id: tools
    criteria: Calls the search tool
    input: Find flights
    assertions:
      - type: tool-trajectory
        mode: any_order
        expected: [{tool: search}]
      - type: contains
        value: flight
  - id: only-tools
    input: Book it
    assertions:
      - type: tool-trajectory
        expected: [{tool: book}]
"""
    result = convert({"t.eval.yaml": source})
    # any_order reads only `minimums` (AgentV passes it whatever is called); a grader with no mode is skipped
    assert has(result.unmapped, "tool-trajectory any_order with no `minimums`", "nothing to check")
    assert has(result.lost, "only-tools: assertion tool-trajectory-1 (tool-trajectory)", "mode null")
    assert any(line.startswith("only-tools: no criteria") for line in result.lost)
    raw = yaml.safe_load(result.source)
    assert [ev["id"] for ev in raw["evals"]] == ["tools"]
    assert raw["evals"][0]["graders"] == {
        "contains-2": {"kind": "check", "check": {"regex": "flight"}, "threshold": 0.8}
    }


def test_a_weighted_composite_becomes_its_members_weighted_by_their_share():
    source = """
tests:
  - id: gate
    criteria: Safe and useful
    input: Explain it
    assertions:
      - name: release
        type: composite
        weight: 2
        assertions:
          - {name: safety, type: contains, value: safe}
          - {name: quality, type: icontains, value: useful}
        aggregator: {type: weighted_average, weights: {safety: 0.25, quality: 0.75}}
      - {name: short, type: regex, value: "^.{0,200}$"}
      - name: vote
        type: composite
        aggregator: {type: threshold, threshold: 0.6}
        assertions: [{name: a, type: contains, value: x}]
"""
    result = convert({"c.eval.yaml": source})
    rule = yaml.safe_load(result.source)["evals"][0]["pass_rule"]
    assert rule["weighted_average"] == {"release-safety": 0.5, "release-quality": 1.5, "short": 1.0}
    assert any(line.startswith("assertion vote (composite): not converted") for line in result.lost)
    load_suite(result.source)


def test_javascript_regex_named_groups_are_read_and_a_pattern_python_cannot_run_is_a_loss():
    source = r"""
tests:
  - id: dates
    criteria: Gives a date
    input: When?
    assertions:
      - {name: date, type: regex, value: '(?<year>\d{4})-\k<year>', flags: i}
      - {name: broken, type: regex, value: '(unclosed'}
"""
    result = convert({"d.eval.yaml": source})
    graders = yaml.safe_load(result.source)["evals"][0]["graders"]
    assert graders["date"]["check"] == {"regex": r"(?i:(?P<year>\d{4})-(?P=year))"}
    assert "broken" not in graders
    assert any(
        line.startswith("assertion broken (regex): /(unclosed/ is not a regular expression")
        for line in result.lost
    )
    load_suite(result.source)


def test_the_suites_input_comes_before_every_cases_unless_skip_defaults():
    source = """
input:
  - role: system
    content: You are the support desk.
tests:
  - {id: one, criteria: Helps, input: Hello}
  - {id: two, criteria: Helps, input: Hi, execution: {skip_defaults: true}}
"""
    one, two = yaml.safe_load(convert({"s.eval.yaml": source}).source)["evals"]
    assert one["messages"] == [
        {"role": "system", "content": "You are the support desk."},
        {"role": "user", "content": "Hello"},
    ]
    assert two["messages"] == [{"role": "user", "content": "Hi"}]


def test_cases_in_a_jsonl_file_named_by_tests():
    suite_file = "name: basic-jsonl\ntarget: llm\ntests: ./dataset.jsonl\n"
    rows = '{"id": "a", "criteria": "Greets", "input": "Hi"}\n{"id": "b", "criteria": "Counts", "input": "1+1?"}\n'
    result = convert({"dataset.eval.yaml": suite_file, "dataset.jsonl": rows})
    assert [ev["id"] for ev in yaml.safe_load(result.source)["evals"]] == ["a", "b"]
    with pytest.raises(ImportProblem, match="keeps its cases in dataset.jsonl, which was not uploaded"):
        convert({"dataset.eval.yaml": suite_file})


def test_a_jsonl_eval_file_with_its_sidecar_is_a_suite_of_its_own(tmp_path):
    # AgentV's JSONL eval file: a case a line, its defaults in the sidecar `<name>.yaml` beside it.
    project = tmp_path / "evals"
    project.mkdir()
    for path in (FIXTURES / "agentv-jsonl").iterdir():
        (project / path.name).write_text(path.read_text())
    imported = evalsite("import", "evals", "--out", "out", cwd=tmp_path)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    [written] = list((tmp_path / "out").rglob("*.yaml"))
    suite = yaml.safe_load(written.read_text())
    assert suite["name"] == "refund-desk" and suite["description"] == "Refund questions, one case a line"
    evals = {ev["id"]: ev for ev in suite["evals"]}
    assert list(evals) == ["late-parcel", "opened-box", "order-json"]
    assert evals["late-parcel"]["messages"][-1] == {"role": "user", "content": "My parcel is two weeks late."}
    assert evals["opened-box"]["tags"] == ["conversation:returns"]
    judged = json.dumps(evals["order-json"]["checks"])
    assert "Answers with the order status as JSON" in judged and '\\"status\\": \\"shipped\\"' in judged
    assert load_suite(written.read_text(), files={}).evals  # valid as written
    # The sidecar alone is not a suite, and the JSONL without it is still one, named by its file.
    alone = convert({"refunds.jsonl": (FIXTURES / "agentv-jsonl" / "refunds.jsonl").read_text()})
    assert yaml.safe_load(alone.source)["name"] == "refunds"


def test_a_turn_without_assertions_counts_10_in_the_mean_as_agentv_scores_it(fake, tmp_path):
    fake.script("Hi, I just signed up.", ["Welcome aboard!", "Yoga and spinning."])
    fake.rule("Lists the three classes of the starter plan", score(0.7))  # alone it fails 0.8

    code, results, out = import_and_run(fake, "agentv-conversation-ungraded", tmp_path)

    assert len(model_requests(fake, "Hi, I just signed up.")) == 2
    case = by_id(results)["greet-then-explain"][0]
    assert case["turns_total"] == 2 and case["score"] == pytest.approx(0.85)  # AgentV: mean(1.0, 0.7)
    assert case["status"] == "passed" and code == 0, out


def test_v2_evaluator_weights_make_the_weighted_mean_agentv_passes_at_08(fake, tmp_path):
    fake.script("How long do I have to return my order?", ["You have 30 days."])
    fake.rule("Grade accuracy.", score(1.0))
    fake.rule("Grade tone.", score(0.4))  # alone it fails; weighted (3 x 1.0 + 0.4) / 4 = 0.85 passes

    code, results, out = import_and_run(fake, "agentv-v2-weights", tmp_path)

    case = by_id(results)["refund-window"][0]
    assert case["score"] == pytest.approx(0.85)
    assert case["status"] == "passed" and code == 0, out
    raw = yaml.safe_load((tmp_path / "out" / "suite.yaml").read_text())["evals"][0]
    assert raw["pass_rule"] == {"weighted_average": {"accuracy": 3, "tone": 1}, "threshold": 0.8}
    assert sorted(raw["graders"]) == ["accuracy", "tone"] and "checks" not in raw


def test_a_turn_whose_assertions_were_all_lost_is_not_passed_as_an_unasserted_one():
    text = (FIXTURES / "agentv-conversation-ungraded" / "onboarding.eval.yaml").read_text()
    text = text.replace(
        "      - input: Hi, I just signed up.\n",
        "      - input: Hi, I just signed up.\n        assertions:\n          - type: tool-trajectory\n",
    )
    result = convert({"onboarding.eval.yaml": text})
    turns = yaml.safe_load(result.source)["evals"][0]["turns"]
    assert "checks" not in turns[0]  # not `match: "*"`: AgentV grades this turn, evalsite cannot
    assert any("tool-trajectory" in line for line in result.lost)


def test_field_accuracy_in_the_assertions_format_becomes_a_grader_per_field(fake, tmp_path):
    """The `tests` / `assertions` shape: the same fields as today's format, weights kept as shares of the
    item's weight, `all_or_nothing` making every field required. Played: a total within its tolerance and a
    date in another format pass; a wrong currency fails the case."""
    text = (FIXTURES / "agentv-fields-v3" / "receipts.eval.yaml").read_text()
    result = convert({"receipts.eval.yaml": text})
    assert result.lost == []
    bakery = load_suite(result.source).evals[0]
    assert bakery.pass_rule.weighted_average == pytest.approx(
        {"receipt-shop": 0.25, "receipt-paid_on": 0.25, "receipt-total": 0.5}
    )  # currency has weight 0: AgentV counts it nowhere
    assert bakery.pass_rule.required == ["receipt-shop", "receipt-paid_on", "receipt-total"]
    total = bakery.graders["receipt-total"].check.field_equals
    assert (total.tolerance, total.relative) == (0.01, True)

    fake.script(
        "Read the bakery receipt as JSON.", ['{"shop": "Crumb", "paid_on": "2025-04-04", "total": 12.6}']
    )
    fake.script(
        "Read the florist receipt as JSON.", ['{"shop": "Bloom", "paid_on": "2025-04-05", "total": 30}']
    )
    code, results, output = import_and_run(fake, "agentv-fields-v3", tmp_path)
    runs = by_id(results)
    assert runs["bakery"][0]["status"] == "passed", output
    assert runs["florist"][0]["status"] == "failed", output


def test_assertions_format_word_bounds_and_environment_interpolation():
    """AgentV's earlier `${{ NAME }}` (read from the environment when it ran) becomes a suite variable, and its
    custom `word-count` assertion (the bound in `.agentv/assertions/word-count.ts`) a `min_words` check."""
    root = FIXTURES / "agentv-words-env-v3"
    files = {str(p.relative_to(root)): p.read_text() for p in sorted(root.rglob("*")) if p.is_file()}
    result = convert(files)
    assert result.lost == []
    suite = load_suite(result.source)
    assert suite.vars == {"SHOP_NAME": None, "PERSONA": None}
    assert "${{ VAR }}" not in result.source and "${{" not in result.source.split("evals:")[1]
    welcome, persona = suitevars.bind(suite, {"SHOP_NAME": "Crumb {bakery}", "PERSONA": "a pirate"}).evals
    assert persona.messages[0].content == "You are a pirate."
    criteria = persona.checks[0].llm_judge.criteria
    assert "Arr, I keep the shop Crumb {bakery}." in criteria and "var:" not in criteria
    bounds = {
        grader.check.kind: grader.check for grader in welcome.graders.values() if grader.kind == "check"
    }
    assert bounds["min_words"].min_words == 5 and bounds["max_words"].max_words == 20
