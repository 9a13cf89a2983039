"""The conversation drivers (engine.drivers): one per style, registered in one table, and pure — they plan
turns and judge outcomes from turn records, but never call a model. The simulated user is asked for as
data (a Step's `ask`), which the loop in engine.conversation sends; outcomes are read from the ending's
kind, not from its words.

No client at all here: a driver that tried to call a model would have nothing to call.
"""

from __future__ import annotations

import pytest

from engine.drivers import DRIVERS, GRADED_PER_TURN, Defaults, Driver, Ending, driver_for
from engine.drivers.simulated import Simulated
from engine.outcomes import Status, TerminationKind
from engine.results import ConditionResult, TurnRecord
from engine.schema import Style
from tests.engine.doubles import make_eval

EVALS = {
    Style.TREE: "prompt: Hi\nchecks: [{match: '*hi*'}]",
    Style.SCRIPTED: "input: [Hi, Again]\nground_truth: [hi, again]",
    Style.TURNS: "turns: [{input: Hi, checks: [{contains: hi}]}]",
    Style.HISTORY: "messages: [{role: user, content: Hi}]\nchecks: [{contains: hi}]",
    Style.SIMULATED: "prompt: Book a table.\nsimulate: {persona: A customer., max_turns: 3}",
}


def turn(number: int, prompt: str, response: str, **fields) -> TurnRecord:
    return TurnRecord(turn=number, prompt=prompt, response=response, **fields)


def test_every_style_has_one_driver_in_the_table():
    assert set(DRIVERS) == set(Style)
    for style, source in EVALS.items():
        ev = make_eval(source)
        assert ev.style is style
        driver = driver_for(ev, 0, Defaults())
        assert isinstance(driver, Driver) and type(driver) is DRIVERS[style]


def test_every_style_declares_whether_it_is_graded_per_turn():
    # On the driver's own class, never inherited: History and Given play as Scripted but grade one reply.
    for style, driver in DRIVERS.items():
        assert isinstance(vars(driver).get("graded_per_turn"), bool), f"{style}: {driver.__name__}"
    assert sorted(GRADED_PER_TURN) == [Style.SCRIPTED, Style.TURNS]


def test_the_simulated_user_is_asked_for_as_data_not_called():
    ev = make_eval(
        "prompt: Book a table.\nsimulate: {persona: A hungry customer., model: fast/llama, max_turns: 5}"
    )
    driver = driver_for(ev, 2, Defaults())
    first = driver.first()
    assert (first.prompt, first.ask, first.node) == ("Book a table.", None, "evals[2]")

    after = driver.next(first, [turn(1, "Book a table.", "For how many?")])
    assert after.prompt is None and after.node == "evals[2].simulate"
    assert after.ask.model == "fast/llama"
    system = after.ask.messages[0]["content"]
    assert system.startswith("A hungry customer.")
    assert system.endswith("You: Book a table.\nAgent: For how many?")


def test_scripted_follow_ups_come_before_the_simulated_user():
    ev = make_eval("prompt: Hi\nsimulate: {persona: P, follow_ups: [{input: Tomorrow, turns: 2}]}")
    driver = driver_for(ev, 0, Defaults())
    turns = [turn(1, "Hi", "When?")]
    assert driver.next(driver.first(), turns).prompt == "Tomorrow"
    turns.append(turn(2, "Tomorrow", "What time?"))
    assert driver.next(driver.first(), turns).prompt == "Tomorrow"
    turns.append(turn(3, "Tomorrow", "Sorry?"))
    assert driver.next(driver.first(), turns).ask is not None


def met(value: bool | None) -> ConditionResult:
    return ConditionResult(kind="after_turns", label="after_turns 2", met=value)


@pytest.mark.parametrize(
    "source, position, condition, expected",
    [
        ("{persona: P, max_turns: 3}", 1, met(True), Ending(TerminationKind.CONDITION_MET, "decided here")),
        ("{persona: P, max_turns: 3}", 3, met(True), Ending(TerminationKind.CONDITION_MET, "decided here")),
        ("{persona: P, max_turns: 3}", 3, met(False), Ending(TerminationKind.MAX_TURNS, "3")),
        ("{persona: P, max_turns: 3}", 2, met(False), None),
        ("{persona: P, max_turns: 3}", 2, None, None),
        ("{follow_ups: [{input: Again}], max_turns: 9}", 2, None, Ending(TerminationKind.INPUTS_EXHAUSTED)),
    ],
)
def test_the_simulated_driver_says_when_a_reply_ends_the_conversation(source, position, condition, expected):
    driver = driver_for(make_eval(f"prompt: Hi\nsimulate: {source}"), 0, Defaults())
    assert driver.ending(driver.first(), position, condition, "decided here") == expected


@pytest.mark.parametrize("style", [Style.TREE, Style.SCRIPTED, Style.TURNS, Style.HISTORY])
def test_other_drivers_end_when_their_script_does(style):
    driver = driver_for(make_eval(EVALS[style]), 0, Defaults())
    assert driver.ending(driver.first(), 1, met(True), "decided") is None


@pytest.mark.parametrize(
    "kind, words, status",
    [
        (TerminationKind.CONDITION_MET, "anything at all", Status.PASSED),  # on_condition_met: pass
        (TerminationKind.MAX_TURNS, "condition met: words that mislead", Status.FAILED),  # on_max_turns: fail
        (TerminationKind.INPUTS_EXHAUSTED, "condition met", Status.FAILED),
    ],
)
def test_the_simulated_verdict_reads_the_endings_kind_not_its_words(kind, words, status):
    driver = driver_for(make_eval(EVALS[Style.SIMULATED]), 0, Defaults())
    verdict = driver.verdict([turn(2, "x", "y", termination=words, termination_kind=kind)])
    assert verdict.outcome is status
    assert verdict.reason == f"{status} after 2 turns"
    assert verdict.text == f"{status} after 2 turns: {words}"


def test_a_record_with_the_ending_in_words_only_gets_its_kind():
    """Turn records stored before they carried the kind are still read right when a conversation resumes."""
    stored = {"turn": 3, "prompt": "x", "response": "y", "termination": "max turns (3)"}
    assert TurnRecord.model_validate(stored).termination_kind is TerminationKind.MAX_TURNS
    assert TurnRecord.model_validate({**stored, "termination": None}).termination_kind is None


def test_drivers_are_built_from_the_eval_alone():
    """A driver holds no client and no storage: only the eval, its index and the grading defaults."""
    driver = driver_for(make_eval(EVALS[Style.SIMULATED]), 0, Defaults())
    assert isinstance(driver, Simulated)
    assert set(vars(driver)) == {"ev", "sim", "node", "scripted", "forever"}
