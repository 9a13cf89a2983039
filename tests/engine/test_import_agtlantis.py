"""Import of @agtlantis/eval YAML (tests/fixtures/imports/agtlantis/, written in the shapes of agtlantis's own
eval files): what each construct becomes, and end to end on the fake endpoint, what agtlantis would have
done — the input object sent as JSON, the simulated user's turns, the stop condition or the turn limit
ending the conversation, the judge's reference answer and threshold."""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from engine.clients import EndpointConfig, EndpointRegistry
from engine.conditions import NATURAL_LANGUAGE_SYSTEM
from engine.imports import ImportProblem, convert, detect
from engine.loader import load_suite
from engine.outcomes import Status, TerminationKind
from engine.runner import run_suite
from engine.simulate import SIMULATOR_INSTRUCTIONS
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV

FIXTURES = Path(__file__).parents[1] / "fixtures" / "imports" / "agtlantis"


UPLOADS = {
    "single-turn": ("orders.eval.yaml",),
    "multi-turn": ("booking.eval.yaml",),
    "with-config": ("support.eval.yaml", "support-agent-1.0.0.yaml", "agent-eval.config.ts"),
}


def folder(name: str) -> dict[str, str]:
    """One upload: a suite and the files of the agtlantis project beside it."""
    return {file: (FIXTURES / file).read_text() for file in UPLOADS[name]}


def has(lines: list[str], *needles: str) -> bool:
    return any(all(needle in line for needle in needles) for line in lines)


def play(fake, result, *, every=False):
    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(name="default", base_url=fake.base_url, api_key_env=FAKE_KEY_ENV, max_retries=0)
    suite = load_suite(result.source, files=result.files)
    report = run_suite(suite, EndpointRegistry(config), model="agent", files=result.files, concurrency=1)
    return report if every else {r.id: r for r in report.evals}


def evals_of(result) -> dict[str, dict]:
    return {ev["id"]: ev for ev in yaml.safe_load(result.source)["evals"]}


def verdict(score: int) -> str:
    return json.dumps({"score": score, "reason": f"scored {score}"})


# --- what each construct becomes -------------------------------------------------------------------------


def test_agtlantis_files_are_detected_and_prompt_files_beside_them_are_not_suites():
    assert detect(folder("multi-turn")) == "agtlantis"
    assert detect(folder("with-config")) == "agtlantis"  # the prompt YAML beside it is not a second suite
    no_agent = "cases:\n  - id: a\n    input: {question: hi}\n"
    assert detect({"x.eval.yaml": no_agent}) == "agtlantis"
    with pytest.raises(ImportProblem, match="not a format Import knows"):
        detect({"x.yaml": "name: nothing\ncases: []\n"})  # agtlantis's own invalid-schema shape


def test_defaults_apply_to_each_case_with_the_case_winning_as_agtlantis_merges_them():
    result = convert(folder("multi-turn"))
    load_suite(result.source)
    evals = evals_of(result)
    confirms, hurried = evals["confirms-booking"], evals["hurried-guest"]
    asks, goodbye = evals["asks-for-date"], evals["polite-goodbye"]
    assert confirms["tags"] == ["booking", "p0"]  # the defaults' tags, then the case's
    assert confirms["simulate"]["max_turns"] == 6 and hurried["simulate"]["max_turns"] == 3
    confirmed = {"field_equals": {"path": "booking.status", "value": "confirmed"}}
    assert confirms["simulate"]["stop_when"] == confirmed == hurried["simulate"]["stop_when"]
    assert asks["simulate"]["stop_when"] == {"field_is_set": "question.topic"}  # replaces the default's
    assert "persona" not in asks["simulate"]  # an endWhen alone: one turn, then the condition decides
    assert goodbye["simulate"]["stop_when"] == {"natural_language": {"prompt": "The guest has said goodbye"}}
    assert goodbye["simulate"]["on_max_turns"] == "pass" and confirms["simulate"]["on_max_turns"] == "fail"
    assert confirms["simulate"]["persona"].startswith("You are a cooperative guest booking a table.")
    assert goodbye["simulate"]["persona"] == "You want to know the opening hours, then say goodbye."
    assert json.loads(confirms["prompt"]) == {
        "message": "I'd like a table for two",
        "restaurant": {"id": 7, "city": "Lyon"},
    }
    assert "Answers every question at once" in result.source  # the persona's description, as a comment
    assert not result.lost


def test_a_single_turn_case_is_judged_with_its_expected_output_as_reference_on_agtlantis_scale():
    result = convert(folder("single-turn"))
    load_suite(result.source)
    status = evals_of(result)["order-status"]
    assert "simulate" not in status
    (check,) = status["checks"]
    judge = check["llm_judge"]
    assert judge["scale"] == "0-100" and judge["threshold"] == 70  # agtlantis's default passThreshold
    assert [c["name"] for c in judge["criteria"]] == ["Accuracy", "Relevance"]
    assert all('"carrier": "DHL"' in c["criteria"] for c in judge["criteria"])
    assert has(result.unmapped, "judge", "agent-eval.config.ts was not uploaded", "stand in")
    assert "# - judge: agtlantis grades each case with the judge of its config" in result.source
    assert has(result.unmapped, "agent: order-lookup", "TypeScript")
    # agtlantis parses `expect` but never applies it: reported, not turned into a stricter check.
    assert has(result.unmapped, "cases[1].expect.minScore", "does not apply")
    assert not result.lost


def test_a_persona_missing_from_the_library_is_a_loss_not_a_refusal():
    text = (FIXTURES / "booking.eval.yaml").read_text().replace("persona: hurried", "persona: rude")
    result = convert({"booking.eval.yaml": text})
    load_suite(result.source)
    assert has(result.lost, "cases[1].persona", "'rude' is not in `personas`")
    assert "persona" not in evals_of(result)["hurried-guest"]["simulate"]


def test_the_cli_guides_multi_turn_block_is_read_as_the_cases_own_keys():
    text = """\
agent: booking-agent
personas:
  friendly: {name: Friendly, systemPrompt: You are friendly.}
cases:
  - id: happy-path
    input: {message: I want to make a reservation}
    persona: friendly
    multiTurn:
      maxTurns: 4
      onConditionMet: pass
"""
    result = convert({"booking.eval.yaml": text})
    simulate = evals_of(result)["happy-path"]["simulate"]
    assert simulate == {
        "persona": "You are friendly.",
        "max_turns": 4,
        "on_condition_met": "pass",
    }


def test_bad_values_are_listed_at_their_key():
    text = """\
agent: a
defaults: {maxTurns: 0, endWhen: {equals: 3}}
cases:
  - {id: one, input: {m: hi}, persona: {name: Nobody}}
  - {id: two, input: just text}
  - {id: three, input: {m: hi}, onMaxTurnsReached: maybe, endWhen: {field: done}}
"""
    result = convert({"bad.eval.yaml": text})
    load_suite(result.source)
    assert has(result.lost, "cases[0].persona", "no systemPrompt")
    assert has(result.lost, "cases[0].endWhen", "neither field nor naturalLanguage")
    assert has(result.lost, "cases[1].input", "object")
    assert has(result.lost, "cases[2].onMaxTurnsReached", "maybe")
    assert set(evals_of(result)) == {"one", "three"}


# --- end to end on the fake endpoint ---------------------------------------------------------------------


def test_multi_turn_cases_play_as_agtlantis_would(fake_openai):
    result = convert(folder("multi-turn"))
    evals = evals_of(result)
    prompt = {key: ev["prompt"] for key, ev in evals.items()}
    confirmed = '{"reply": "Booked!", "booking": {"status": "confirmed", "party": 2}}'
    fake_openai.script(prompt["confirms-booking"], ["For which day and time?", confirmed])
    fake_openai.script(prompt["hurried-guest"], ["Which day?", "Which time?", "How many?", "Never sent"])
    fake_openai.script(
        prompt["asks-for-date"], ['{"question": {"topic": "date"}, "text": "For which date?"}']
    )
    fake_openai.script(prompt["polite-goodbye"], ["We open at 9.", "You're welcome, goodbye!"])
    # The simulated users, by their persona; the stop condition's judge; the case's judge.
    fake_openai.rule("cooperative guest", "Friday at 8pm, two people.", where="system")
    fake_openai.rule("in a hurry", "Now.", where="system")
    fake_openai.rule("opening hours, then say goodbye", "Thanks, bye!", where="system")
    no, yes = '{"score": 0.1, "reason": "still talking"}', '{"score": 0.9, "reason": "said bye"}'
    fake_openai.rule(NATURAL_LANGUAGE_SYSTEM[:60], [no, yes], where="system")
    fake_openai.rule("Booked!", verdict(85))
    fake_openai.rule("For which date?", verdict(40))
    fake_openai.rule("goodbye!", verdict(90))
    fake_openai.rule("How many?", verdict(95))

    results = play(fake_openai, result)

    confirms = results["confirms-booking"]
    first = fake_openai.chat_requests(prompt["confirms-booking"])
    # The input object reached the agent as JSON text, as the case's first user message.
    assert json.loads(first[0]["messages"][-1]["content"]) == {
        "message": "I'd like a table for two",
        "restaurant": {"id": 7, "city": "Lyon"},
    }
    # Turn 2 was written by the simulated user, whose system prompt is the persona.
    assert [t.prompt for t in confirms.turns] == [prompt["confirms-booking"], "Friday at 8pm, two people."]
    simulated = [
        r
        for r in fake_openai.chat_requests()
        if SIMULATOR_INSTRUCTIONS in r["messages"][0]["content"]
        and "cooperative guest" in r["messages"][0]["content"]
    ]
    assert (
        len(simulated) == 1 and "Give the date, time and party size" in simulated[0]["messages"][0]["content"]
    )
    # endWhen ended it on the confirming reply, and the judge (85 ≥ 70) saw the reference answer.
    assert confirms.termination_kind == TerminationKind.CONDITION_MET
    assert confirms.status == Status.PASSED
    judged = [r for r in fake_openai.chat_requests() if "Booked!" in r["messages"][-1]["content"]]
    assert len(judged) == 2  # one call per criterion: Accuracy, Relevance
    for request in judged:
        text = request["messages"][-1]["content"]
        assert "Reference answer (the test case's expectedOutput)" in text and '"status": "confirmed"' in text

    # maxTurns 3 with a persona that never gets a confirmation: the turn limit ends it, a failure as in
    # agtlantis (onMaxTurnsReached: fail), although the judge liked the last reply.
    hurried = results["hurried-guest"]
    assert [t.prompt for t in hurried.turns] == [prompt["hurried-guest"], "Now.", "Now."]
    assert hurried.termination_kind == TerminationKind.MAX_TURNS and hurried.status == Status.FAILED

    # endWhen without a persona: one turn; the condition held, but the judge's 40 is under 70.
    asks = results["asks-for-date"]
    assert len(asks.turns) == 1 and asks.termination_kind == TerminationKind.CONDITION_MET
    assert asks.status == Status.FAILED

    # naturalLanguage: the judge said "no" after turn 1 and "yes" after the simulated goodbye.
    goodbye = results["polite-goodbye"]
    assert [t.prompt for t in goodbye.turns] == [prompt["polite-goodbye"], "Thanks, bye!"]
    assert goodbye.termination_kind == TerminationKind.CONDITION_MET and goodbye.status == Status.PASSED


def test_the_configs_judge_keeps_its_weights_and_pass_threshold(fake_openai):
    """accuracy ×2, relevance ×1, policy ×3 at passThreshold 80: 90, 90 and 60 make 75 — a failure in
    agtlantis, though its default threshold of 70 would have passed it. `run.iterations` 3 plays the case
    three times."""
    result = convert(folder("with-config"))
    prompt = evals_of(result)["refund-policy"]["prompt"]
    fake_openai.script(prompt, ["No: returns are accepted within 30 days."])
    fake_openai.rule("States the 30-day return policy", verdict(60))
    fake_openai.rule("Criteria:", verdict(90))

    report = play(fake_openai, result, every=True)

    assert [(r.id, r.iteration) for r in report.evals] == [("refund-policy", n) for n in range(3)]
    agent_call = fake_openai.chat_requests(prompt)[0]
    assert len(fake_openai.chat_requests(prompt)) == 3
    assert agent_call["messages"][0] == {
        "role": "system",
        "content": "You are the support agent of a kitchenware shop.\nReturns are accepted within 30 days of delivery.",
    }
    assert json.loads(agent_call["messages"][1]["content"]) == {
        "message": "Can I return a kettle after 40 days?"
    }
    refund = report.evals[0]
    assert refund.status == Status.FAILED
    (check,) = refund.turns[-1].checks
    assert check.score == pytest.approx(0.75)
    assert has(result.mapped, "agent-eval.config.ts", "passThreshold 80")
    assert has(result.mapped, "run.iterations 3", "pass rate of 0.5")


CONFIG_WITH_AGENT = """\
const qaAgent = {
  config: { name: 'qa-bot', description: 'Answers geography questions' },
  prompt: {
    id: 'qa-prompt',
    version: 'v1.0.0',
    system: 'You are a helpful Q&A assistant.',
    renderUserPrompt: (input: { question: string }) => input.question,
  },
  execute: async (input: { question: string }) => ({ result: { answer: input.question } }),
}

export default {
  agents: { 'qa-bot': qaAgent },
  judge: {
    criteria: [accuracy(), schema({ schema: AnswerSchema })],
    passThreshold: 60,
  },
  include: ['./*.eval.yaml'],
}
"""


def test_a_config_written_literally_gives_the_agents_system_prompt_and_its_judge():
    suite = "agent: qa-bot\ncases:\n  - id: capital\n    input: {question: Capital of France?}\n"
    result = convert({"geo.eval.yaml": suite, "agent-eval.config.ts": CONFIG_WITH_AGENT})
    assert load_suite(result.source).system == "You are a helpful Q&A assistant."
    judge = evals_of(result)["capital"]["checks"][0]["llm_judge"]
    assert [c["name"] for c in judge["criteria"]] == ["Accuracy"] and judge["threshold"] == 60
    assert has(result.lost, "judge.criteria[1]", "schema(")  # a validator is code: listed as lost
    without_prompt = CONFIG_WITH_AGENT.replace("system: 'You are a helpful Q&A assistant.',", "")
    result = convert({"geo.eval.yaml": suite, "agent-eval.config.ts": without_prompt})
    assert load_suite(result.source).system == "Answers geography questions"
    result = convert(
        {"geo.eval.yaml": suite, "agent-eval.config.ts": "export default { judge: makeJudge() }"}
    )
    assert has(result.lost, "judge is not written as an object literal")
    assert has(result.unmapped, "agent-eval.config.ts's judge could not be read", "criteria stand in")


STAND_IN = "judge: agtlantis grades each case with the judge of its config, and agent-eval.config.ts was not uploaded"


def test_a_folder_import_says_the_built_in_criteria_stand_in_as_one_file_does(tmp_path, capsys, fake_openai):
    """`evalsite import FOLDER` prints no mapped lines, only what was not converted: the stand-in judge is
    one of those, in each suite's report and header, and the written suite's judge uses those criteria."""
    from evalsite.cli.main import main

    project = tmp_path / "evals"
    project.mkdir()
    for name in ("orders.eval.yaml", "booking.eval.yaml"):
        (project / name).write_text((FIXTURES / name).read_text())
    assert main(["import", str(project), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert printed.count(STAND_IN) == 2  # each suite's report
    written = tmp_path / "out" / "orders.yaml"
    assert "# - judge: agtlantis grades each case with the judge of its config" in written.read_text()

    fake_openai.rule("Criteria:", verdict(90))
    report = play(fake_openai, SimpleNamespace(source=written.read_text(), files={}))
    assert report["order-status"].status == Status.PASSED
    judged = [r["messages"][-1]["content"] for r in fake_openai.chat_requests() if "Criteria:" in str(r)]
    # agtlantis's built-in Accuracy and Relevance, word for word, each asked of the judge
    assert any("is factually correct" in text for text in judged)
    assert any("directly addresses the input" in text for text in judged)
