"""Letta Evals folders imported and played on the fake endpoint: the judge gets the prompt Letta sends, the
reward scores as Letta's does, custom Python graders run, and the agent's facts reach the model."""

from __future__ import annotations

import json
import os
import string
from pathlib import Path

import pytest
import yaml

from engine.clients import EndpointConfig, EndpointRegistry
from engine.codegrade.run import CodeRunner
from engine.imports import convert
from engine.loader import load_suite
from engine.runner import run_suite
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV

FIXTURES = Path(__file__).parents[1] / "fixtures" / "imports"


def folder(name: str, **replaced: str) -> dict[str, str]:
    files = {p.name: p.read_text() for p in sorted((FIXTURES / name).iterdir())}
    return {**files, **replaced}


def has(lines: list[str], *needles: str) -> bool:
    return any(all(needle in line for needle in needles) for line in lines)


def play(fake_openai, result, **options):
    suite = load_suite(result.source, files=result.files)
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(
        name="default", base_url=fake_openai.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0
    )
    return run_suite(suite, EndpointRegistry(config), files=result.files, concurrency=1, **options)


def letta_prompt(rubric: str, sample: dict, submission: str) -> str:
    """Letta's build_judge_prompt (letta_evals/graders/prompt_utils.py): the rubric filled by str.format with
    input, ground_truth ("" when the row has none), submission and the row's rubric_vars."""
    values = {
        "input": str(sample["input"]),
        "ground_truth": str(sample["ground_truth"]) if sample.get("ground_truth") is not None else "",
        "submission": submission,
        **{key: str(value) for key, value in (sample.get("rubric_vars") or {}).items()},
    }
    return string.Formatter().vformat(rubric, (), values)


AUTUMN = "red leaves drift down\nslow wind carries them away\nthe branch stands bare"
SEA = "waves fold into foam ☀\nthe tide keeps its time\nsalt on every stone"


def test_a_rubric_with_placeholders_reaches_the_judge_as_letta_fills_it_and_the_reward_scores(fake_openai):
    """Today's Letta sends the rubric alone, filled with str.format ({input}, {submission}, {ground_truth},
    rubric_vars; `{{Answer}}` becomes `{Answer}`), with no system message. The custom reward 0.7 quality +
    0.3 ascii_only is the eval's score, and nothing fails on it: Letta's reward has no pass line."""
    result = convert(folder("letta-today"))
    assert result.lost == []
    raw = yaml.safe_load(result.source)
    assert raw["model"] == "openai/gpt-5-mini"
    assert raw["pass_rule"] == {"weighted_average": {"quality": 0.7, "ascii_only": 0.3}, "threshold": 0.0}

    fake_openai.rule("autumn leaves", AUTUMN, model="openai/gpt-5-mini")
    fake_openai.rule("about the sea", SEA, model="openai/gpt-5-mini")
    fake_openai.rule("theme must be autumn", '{"score": 0.8, "rationale": "on theme"}', model="judge-model")
    fake_openai.rule("theme must be the sea", '{"score": 0.5, "rationale": "loose"}', model="judge-model")
    report = play(fake_openai, result)

    rubric = (FIXTURES / "letta-today" / "rubric.txt").read_text()
    rows = [
        json.loads(line) for line in (FIXTURES / "letta-today" / "dataset.jsonl").read_text().splitlines()
    ]
    judged = [r for r in fake_openai.chat_requests() if r["model"] == "judge-model"]
    sent = {r["messages"][-1]["content"] for r in judged}
    assert sent == {letta_prompt(rubric, rows[0], AUTUMN), letta_prompt(rubric, rows[1], SEA)}
    for request in judged:
        assert [m["role"] for m in request["messages"]] == ["user"]  # no system message, no transcript
        text = request["messages"][0]["content"]
        assert "{Answer}" in text and "{{Answer}}" not in text and "{input}" not in text
        assert text.startswith("You grade a haiku") and "Conversation:" not in text
        assert request["temperature"] == 0.0

    by_id = {r.id: r for r in report.evals}
    autumn, sea = by_id["autumn"], by_id["sea"]
    assert [(g.name, g.score) for g in autumn.graders] == [("quality", 0.8), ("ascii_only", 1.0)]
    assert [(g.name, g.score) for g in sea.graders] == [("quality", 0.5), ("ascii_only", 0.0)]
    assert autumn.score == pytest.approx(0.7 * 0.8 + 0.3 * 1.0)
    assert sea.score == pytest.approx(0.7 * 0.5)
    assert autumn.status == "passed" and sea.status == "passed"  # a score, not a 1.0 pass line

    # the row's agent_args reach the model as a system message before its input
    (asked,) = [r for r in fake_openai.chat_requests() if "autumn leaves" in r["messages"][-1]["content"]
                and r["model"] == "openai/gpt-5-mini"]  # fmt: skip
    system = asked["messages"][0]
    assert system["role"] == "system" and "style_guide: Lowercase only. No title." in system["content"]
    assert (
        "- fall" in system["content"] and "poetry" not in system["content"]
    )  # the agent's tags are not facts


def test_a_metric_reward_is_the_graders_score_with_no_pass_line():
    """`reward: {kind: metric}` names the score; it used to become a pass threshold of 1.0, failing a 0.8."""
    text = (FIXTURES / "letta-today" / "suite.yaml").read_text()
    text = text.replace(
        "kind: custom\n  function: rewards.py:weighted_quality_ascii", "kind: metric\n  metric_key: quality"
    )
    result = convert(folder("letta-today", **{"suite.yaml": text}))
    raw = yaml.safe_load(result.source)
    assert raw["pass_rule"] == {"weighted_average": {"quality": 1.0}, "threshold": 0.0}
    assert raw["pass_threshold"] == 0.0
    assert has(result.mapped, "reward (metric quality) → pass_rule")


def test_reward_weights_that_do_not_sum_to_one_are_said_where_every_import_says_what_differs():
    """evalsite divides a weighted average by its weights' sum: a score Letta's reward does not give, so the
    report says it under what was not converted, which a folder import prints and the suite's header keeps."""
    composer = (
        (FIXTURES / "letta-today" / "rewards.py").read_text().replace("(0.3 * ascii_only)", "ascii_only")
    )
    result = convert(folder("letta-today", **{"rewards.py": composer}))
    assert yaml.safe_load(result.source)["pass_rule"]["weighted_average"] == {
        "quality": 0.7,
        "ascii_only": 1.0,
    }
    assert has(result.unmapped, "weights sum to 1.7", "Letta's reward divided by 1.7")
    assert "its weights sum to 1.7" in result.source


def test_a_reward_composer_that_branches_is_listed_as_lost():
    text = (
        (FIXTURES / "letta-today" / "suite.yaml")
        .read_text()
        .replace("weighted_quality_ascii", "quality_if_ascii")
    )
    result = convert(folder("letta-today", **{"suite.yaml": text}))
    assert has(result.lost, "reward.function rewards.py:quality_if_ascii", "branches", "mean of its graders")
    assert yaml.safe_load(result.source)["pass_rule"]["threshold"] == 0.0


def test_a_rubric_written_for_the_earlier_letta_is_sent_inside_its_judge_prompt(fake_openai):
    """Before Letta sent rubrics as written, it sent its own system message and put the rubric (braces as
    written) above the question, the ground truth and the submission."""
    from engine.imports.letta.rubrics import WRAPPED_SYSTEM

    older = "Grade the haiku. Theme: {theme}. Answer {{Answer}} as JSON.\n"
    result = convert(folder("letta-today", **{"rubric.txt": older}))
    fake_openai.rule("autumn leaves", AUTUMN, model="openai/gpt-5-mini")
    fake_openai.rule("about the sea", SEA, model="openai/gpt-5-mini")
    fake_openai.rule("Evaluation Rubric", '{"score": 1, "rationale": "fine"}', model="judge-model")
    play(fake_openai, result)
    judged = {
        r["messages"][-1]["content"]: r for r in fake_openai.chat_requests() if r["model"] == "judge-model"
    }
    expected = "\n".join([
        "You are an evaluation judge. An agent was given a task and returned a submission for that task.",
        "Your job is to evaluate the quality of that submission according to the rubric below.",
        "",
        "IMPORTANT: Do NOT answer the original question yourself. You are ONLY evaluating someone else's answer.",
        "", "---", "", "## Evaluation Rubric",
        "Grade the haiku. Theme: autumn. Answer {{Answer}} as JSON.\n",
        "", "---", "", "## Original Question Given to the Agent", "Write a haiku about autumn leaves.",
        "", "## Expected Answer (Ground Truth)", "red leaves drift",
        "", "---", "", "## The Agent's Submission (What You Are Evaluating)", AUTUMN,
        "", "---", "", "## Your Instructions", "",
        "1. Review the evaluation rubric carefully",
        "2. Compare the agent's submission against the original question and rubric criteria",
        "3. Determine a score between 0.0 (complete failure) and 1.0 (perfect)",
        "4. Return your evaluation as JSON with:",
        "   - score: a float between 0.0 and 1.0",
        "   - rationale: your reasoning for the score",
    ])  # fmt: skip
    assert expected in judged
    assert judged[expected]["messages"][0] == {"role": "system", "content": WRAPPED_SYSTEM}
    sea = next(text for text in judged if "about the sea" in text)
    assert "Ground Truth" not in sea  # Letta leaves the section out for a row without one


def test_a_custom_python_grader_runs_as_letta_calls_it_and_the_agent_file_is_the_system(fake_openai):
    """A @grader with its own @extractor runs in the letta dialect (Letta's decorators and types stood in
    for), given the row's Sample (extra_vars included); the .af file's system prompt and memory blocks
    are the system message and its model the suite's; a memory_block grader is lost, the rest kept."""
    result = convert(folder("letta-custom"))
    assert has(result.lost, "graders.remembered (tool contains): not converted", "memory_block")
    assert list(result.files) == ["triage_graders.py"]
    suite = load_suite(result.source, files=result.files)
    assert suite.model == "openai/gpt-4.1-mini"
    assert "You triage support tickets" in suite.system and "<teams>" in suite.system

    fake_openai.rule("Checkout fails", 'Routing it: {"team": "payments", "urgency": "high"}')
    fake_openai.rule("typo on the pricing", '{"team": "payments", "urgency": "low"}')
    report = play(fake_openai, result, code=CodeRunner(files=result.files))

    by_id = {r.id: r for r in report.evals}
    outage, typo = by_id["outage"], by_id["typo"]
    assert [(g.name, g.score) for g in outage.graders] == [("triage", 1.0), ("mentions_team", 1.0)]
    assert [(g.name, g.score) for g in typo.graders] == [("triage", 0.5), ("mentions_team", 1.0)]
    assert "team wrong (web), urgency ok" in typo.graders[0].grades[0].rationale
    (gate,) = report.gates
    assert gate.actual == pytest.approx(0.75) and gate.passed  # Letta's gate: avg_score gte 0.75
    asked = fake_openai.chat_requests()[0]
    assert asked["model"] == "openai/gpt-4.1-mini"
    assert (
        asked["messages"][0]["role"] == "system" and "payments: checkout" in asked["messages"][0]["content"]
    )


def test_an_agent_factory_gives_its_constant_prompt_and_model():
    """`agent_script` creates the agent in Python: its constant memory blocks and model are plain-text
    facts, carried; a block computed per row is left to the rows' agent_args."""
    script = """from letta_evals.decorators import agent_factory


@agent_factory
async def make_agent(client, sample):
    facts = sample.agent_args["facts"]
    agent = await client.agents.create(
        memory_blocks=[
            {"label": "persona", "value": "You answer from your memory only."},
            {"label": "facts", "value": facts},
        ],
        model="openai/gpt-4o-mini",
    )
    return agent.id
"""
    text = (
        (FIXTURES / "letta-today" / "suite.yaml")
        .read_text()
        .replace(
            "  model_handles:\n    - openai/gpt-5-mini\n    - anthropic/claude-haiku-4-5\n",
            "  agent_script: make_agent.py:make_agent\n",
        )
    )
    result = convert(folder("letta-today", **{"suite.yaml": text, "make_agent.py": script}))
    suite = load_suite(result.source, files=result.files)
    assert suite.model == "openai/gpt-4o-mini"
    assert "<persona>\n<value>\nYou answer from your memory only.\n</value>\n</persona>" in suite.system
    assert has(result.unmapped, "memory blocks facts are computed per row")


def test_a_rubric_placeholder_a_row_does_not_fill_is_kept_as_written_and_listed_as_lost():
    rows = '{"id": "bare", "input": "Write a haiku about snow.", "ground_truth": "white"}\n'
    result = convert(folder("letta-today", **{"dataset.jsonl": rows}))
    assert has(
        result.lost, "dataset.jsonl: rubric placeholder {theme}: the row has no rubric_vars.theme", "line 1"
    )
    suite = load_suite(result.source, files=result.files)
    rubric = suite.graders["quality"].rubric
    assert "Its theme must be {{theme}};" in rubric  # evalsite's format sends `{theme}`, as written


def test_a_custom_grader_on_a_per_turn_row_sees_each_turn_alone(fake_openai):
    """Letta grades a row with a ground truth per turn turn by turn: the Sample holds that turn's input and
    ground truth, the trajectory that turn's replies only (first_assistant is the turn's own reply)."""
    grader = (
        "from letta_evals.decorators import grader\n"
        "from letta_evals.models import GradeResult\n\n\n"
        "@grader\n"
        "def echo(sample, submission):\n"
        "    return GradeResult(score=1.0, rationale=f'{sample.input}|{sample.ground_truth}|{submission}')\n"
    )
    suite = (
        "name: per-turn\ndataset: dataset.jsonl\n"
        "graders:\n  echo:\n    kind: tool\n    function: echo_grader.py:echo\n    extractor: first_assistant\n"
        "reward:\n  kind: metric\n  metric_key: echo\n"
    )
    row = {"id": "two", "input": ["First?", "Second?"], "ground_truth": ["one", "two"]}
    result = convert({"suite.yaml": suite, "dataset.jsonl": json.dumps(row) + "\n", "echo_grader.py": grader})
    fake_openai.script("First?", ["reply one", "reply two"])
    report = play(fake_openai, result, model="agent", code=CodeRunner(files=result.files))
    (ev,) = report.evals
    assert [[g.rationale for g in turn.grades] for turn in ev.turns] == [
        ['code "echo_grader:echo": score 1.00 (threshold 1): First?|one|reply one'],
        ['code "echo_grader:echo": score 1.00 (threshold 1): Second?|two|reply two'],
    ]


PER_TURN_SUITE = """\
name: multiturn-per-turn-grading-test
dataset: dataset.jsonl
target:
  kind: letta_code
  model_handles:
    - openai/gpt-5-mini
graders:
  correctness:
    kind: tool
    display_name: "Correctness"
    function: contains
    extractor: last_assistant
reward:
  kind: metric
  metric_key: correctness
"""
PER_TURN_ROWS = [
    {"input": ["Capital of France?", "Capital of Germany?", "Capital of Italy?"],
     "ground_truth": ["Paris", "Berlin", "Rome"]},
    {"input": ["Result of 2 + 2?", "Result of 3 * 4?"], "ground_truth": ["4", "12"]},
]  # fmt: skip


def test_a_reward_over_per_turn_rows_marks_each_turn_as_letta_does_and_fails_no_eval(fake_openai):
    """Letta marks a turn passed at a score of 1 whatever the reward (`2/3 passed: ✓ ✓ ✗`), while the
    reward itself has no pass line: the eval passes with the turns' mean as its score. A wrong answer is
    a failed turn, and the report counts it so."""
    from engine.report import format_eval, format_line

    rows = "".join(json.dumps(row) + "\n" for row in PER_TURN_ROWS)
    result = convert({"suite.yaml": PER_TURN_SUITE, "dataset.jsonl": rows})
    assert result.lost == []
    raw = yaml.safe_load(result.source)
    assert raw["graders"] == {"correctness": {"kind": "contains", "threshold": 1.0}}
    assert raw["pass_rule"] == {"weighted_average": {"correctness": 1.0}, "threshold": 0.0}
    assert has(result.mapped, "per turn", "threshold: 1", "Letta marks a turn passed")
    answers = {"France": "Paris", "Germany": "Berlin", "Italy": "Madrid", "2 + 2": "5", "3 * 4": "11"}
    for asked, answer in answers.items():
        fake_openai.rule(asked, answer, model="openai/gpt-5-mini")
    report = play(fake_openai, result)

    capitals, sums = report.evals
    assert [turn.passed for turn in capitals.turns] == [True, True, False]
    assert (capitals.turns_passed, capitals.turns_total) == (2, 3)
    assert capitals.status == "passed" and capitals.score == pytest.approx(2 / 3)
    assert [turn.passed for turn in sums.turns] == [False, False]
    assert (sums.status, sums.score, sums.turns_passed, sums.turns_total) == ("passed", 0.0, 0, 2)
    shown = format_eval(capitals)
    assert "❌ FAIL correctness 0.00: does not contain 'Rome'" in shown
    assert "  Turns: 2/3 ✓✓✗" in shown
    assert capitals.verdict == "weighted score 0.67 ≥ 0.00: correctness 0.67 < 1.00; 2 of 3 turns passed"
    assert f"Overall: ✅ PASS ({capitals.verdict})" in shown
    assert "3/3" not in shown
    # the one line a passing conversation gets in the terminal counts the turns too
    assert format_line(sums).endswith(
        "(weighted score 0.00 ≥ 0.00: correctness 0.00 < 1.00; 0 of 2 turns passed)"
    )


def test_a_grader_key_letta_does_not_have_is_said_to_be_left_out():
    """Letta's grader specs forbid unknown keys; one written anyway (`max_tokens`) is reported, not dropped
    without a word."""
    text = (FIXTURES / "letta-today" / "suite.yaml").read_text()
    text = text.replace("    max_retries: 3\n", "    max_retries: 3\n    max_tokens: 77\n", 1)
    result = convert(folder("letta-today", **{"suite.yaml": text}))
    assert has(result.unmapped, "graders.quality.max_tokens: 77", "not an option of Letta's graders")
    assert "max_tokens" not in yaml.safe_load(result.source).get("judge_settings", {})


JUDGED_SUITE = """\
name: per-turn-judged
dataset: dataset.jsonl
target:
  kind: letta_code
  model_handles: [openai/gpt-5-mini]
graders:
  quality:
    kind: model_judge
    prompt_path: rubric.txt
    model: judge-model
    extractor: last_assistant
gate:
  metric_key: quality
  aggregation: accuracy
  op: gte
  value: 100
  pass_threshold: 0.5
"""
JUDGED_RUBRIC = "Answer: {submission}\nExpected: {ground_truth}\nScore it from 0 to 1 as JSON.\n"


def test_a_gate_pass_threshold_is_the_rows_line_while_each_turn_is_marked_passed_at_1(fake_openai):
    """Letta marks a turn of a per-turn row passed at a score of 1 (`1/3 passed: ✓ ✗ ✗`), and its accuracy
    gate's pass_threshold is the line a row's score (the turns' mean) must reach: a turn the judge scores
    0.5 is a failed turn, though the row passes at 0.5. The turn marks, the count and the verdict say so."""
    from engine.report import format_eval

    row = {"input": ["Capital of France?", "Capital of Germany?", "Capital of Italy?"],
           "ground_truth": ["Paris", "Berlin", "Rome"]}  # fmt: skip
    result = convert(
        {"suite.yaml": JUDGED_SUITE, "dataset.jsonl": json.dumps(row) + "\n", "rubric.txt": JUDGED_RUBRIC}
    )
    assert result.lost == []
    raw = yaml.safe_load(result.source)
    assert {key: raw["graders"]["quality"][key] for key in ("threshold", "turn_threshold")} == {
        "threshold": 0.5,
        "turn_threshold": 1.0,
    }
    assert raw["gates"] == [{"metric": "accuracy", "grader": "quality", "op": ">=", "value": 1.0}]
    assert has(result.mapped, "graders.quality.turn_threshold: 1", "Letta marks a turn passed")
    for asked, answer in {"France": "Paris", "Germany": "Berlin, I believe", "Italy": "Madrid"}.items():
        fake_openai.rule(asked, answer, model="openai/gpt-5-mini")
    for answer, score in {"Paris": 1.0, "Berlin, I believe": 0.5, "Madrid": 0.0}.items():
        fake_openai.rule(
            f"Answer: {answer}\n", json.dumps({"score": score, "rationale": "graded"}), model="judge-model"
        )
    report = play(fake_openai, result)

    (ev,) = report.evals
    assert [[grade.score for grade in turn.grades] for turn in ev.turns] == [[1.0], [0.5], [0.0]]
    assert [turn.passed for turn in ev.turns] == [True, False, False]
    assert (ev.turns_passed, ev.turns_total) == (1, 3)
    assert ev.status == "passed" and ev.score == pytest.approx(0.5)
    assert [(g.name, g.score, g.threshold, g.passed) for g in ev.graders] == [("quality", 0.5, 0.5, True)]
    assert [gate.passed for gate in report.gates] == [True]
    assert ev.verdict == "quality 0.50 ≥ 0.50; 1 of 3 turns passed"
    shown = format_eval(ev)
    assert "  Turns: 1/3 ✓✗✗" in shown
    assert f"  Overall: ✅ PASS ({ev.verdict})" in shown
