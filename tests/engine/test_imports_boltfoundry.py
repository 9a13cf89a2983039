"""Bolt Foundry calibrate (aibff) files: keyed TOML samples, JSONL samples, and grader decks as the judge.

The fixtures in tests/fixtures/imports/boltfoundry are written in aibff's shapes: a grader deck
(`decks/support-tone.deck.md`) that embeds a base card from another folder (`cards/grader-base.deck.md`,
which embeds its `[contexts.*]` TOML) and its keyed samples (`decks/support-samples.deck.toml`), with a
bff-eval JSONL samples file beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from engine.calibration import load_calibration
from engine.imports import convert, detect, looks_like
from engine.imports.boltfoundry import OUTPUT_FORMAT
from engine.loader import load_suite
from engine.schema import Suite
from engine.source import SuiteError
from tests.conftest import FAKE_KEY, ROOT
from tests.fakeopenai import FakeOpenAI

FOLDER = Path(__file__).parents[1] / "fixtures" / "imports" / "boltfoundry"

# aibff writes each sample's messages before the table that holds its score, as its own fixtures do.
KEYED = """\
[[samples.exact.messages]]
role = "user"
content = "Say hello world"

[[samples.exact.messages]]
role = "assistant"
content = "hello world"

[samples.exact]
score = 3
description = "Exactly what was asked"

[[samples.shouted.messages]]
role = "user"
content = "Say hello world"

[[samples.shouted.messages]]
role = "assistant"
content = "HELLO WORLD!"

[samples.shouted]
score = -2
description = "Wrong case and punctuation"

[samples.older-form]
userMessage = "Say hello world"
assistantResponse = "Hello"
score = -3
explanation = "Half of it"
"""

JSONL = """\
{"id": "ship-1", "userMessage": "Do you ship abroad?", "assistantResponse": "Yes, to most of Europe.", "score": 2, "description": "Short and right"}
{"userMessage": "Hi", "assistantResponse": "Go away.", "score": -3, "id": "rude", "description": "Rude"}
{"id": "open", "userMessage": "Any sales?", "assistantResponse": "Yes, 10% off this week.", "score": null, "description": null}
"""


def fixture_files() -> dict[str, str]:
    return {
        str(path.relative_to(FOLDER)): path.read_text()
        for path in sorted(FOLDER.rglob("*"))
        if path.is_file()
    }


def samples_of(result) -> list[dict]:
    (text,) = result.files.values()
    return [json.loads(line) for line in text.splitlines()]


# --- samples --------------------------------------------------------------------------------------------------


def test_keyed_toml_samples_are_all_read_with_their_id_score_and_description():
    result = convert({"hello.toml": KEYED})
    assert result.kind == "calibrate"
    rows = samples_of(result)
    assert [row["id"] for row in rows] == ["exact", "shouted", "older-form"]
    assert [row["expected"] for row in rows] == [
        {"score": 3, "reason": "Exactly what was asked"},
        {"score": -2, "reason": "Wrong case and punctuation"},
        {"score": -3, "reason": "Half of it"},
    ]
    assert rows[2]["messages"] == [
        {"role": "user", "content": "Say hello world"},
        {"role": "assistant", "content": "Hello"},
    ]
    loaded = load_calibration(result.source, files=result.files)
    assert loaded.spec.scale == "-3..3" and len(loaded.samples) == 3
    assert "exact" in loaded.samples[0].label  # the id names the sample in the figures
    # No deck came with the samples: the judge is a placeholder, and the import says it lost the grader.
    assert any("the grader" in line for line in result.lost)


def test_jsonl_samples_are_read_as_jsonl_and_an_unlabelled_one_is_compared_with_1_as_aibff_does():
    assert detect({"samples.jsonl": JSONL}) == "calibrate"
    result = convert({"samples.jsonl": JSONL})
    rows = samples_of(result)
    assert [row["id"] for row in rows] == ["ship-1", "rude", "open"]
    assert rows[0]["messages"][1] == {"role": "assistant", "content": "Yes, to most of Europe."}
    assert rows[1]["expected"] == {"score": -3, "reason": "Rude"}
    assert rows[2]["expected"] == {"score": 1} and rows[2]["tags"] == ["unlabelled"]
    assert len(load_calibration(result.source, files=result.files).samples) == 3


def test_a_jsonl_dataset_beside_a_suite_is_still_a_dataset():
    files = {"data.jsonl": '{"input": "a"}\n', "rows.csv": "input\na\n"}
    assert looks_like([{"input": "a"}]) is None
    with pytest.raises(Exception, match="no suite file among"):
        convert(files)


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        ({"samples": {"a": {"score": 1, "messages": []}}}, "calibrate"),
        ({"samples": {"a": {"userMessage": "x", "assistantResponse": "y"}}}, "calibrate"),
        ({"contexts": {"userMessage": {"assistantQuestion": "What was asked?"}}}, "calibrate"),
        ([{"userMessage": "x", "assistantResponse": "y", "score": 2}], "calibrate"),
        ({"samples": [{"messages": []}]}, "calibrate"),
        (
            {"name": "x", "judge": {"criteria": "c"}, "samples": [{"messages": []}]},
            None,
        ),  # evalsite's own set
        ({"tests": [{"input": "hi"}]}, "agentv"),
    ],
)
def test_calibrate_shapes_are_detected_and_others_are_left_to_their_tools(data, kind):
    assert looks_like(data) == kind


# --- decks ----------------------------------------------------------------------------------------------------

DECK_TEXT = """\
# Support Tone Grader

# Grader Base

You are a **grading assistant**. You read a user's message and an assistant's
response and say how well the response meets the criteria that follow.

## How to grade

1. Read the sample: a user message and the assistant's response.
2. Compare the response with the evaluation criteria.
3. Give a score from -3 (the opposite of the goal) to +3 (the best possible
   example of the goal). Give 0 only when the criteria do not apply.

### Output Format

Return a JSON object with `score` (a number from -3 to 3) and `reason` (a
string). Return ONLY the JSON object, no other text.

## Specific Task

You grade the tone of a bookshop's support replies: warm, brief and helpful.

## Scoring Guide

- **+3**: Warm, brief and answers the question [^kind-and-brief]
- **+1**: Helpful but wordy [^wordy]
- **-2**: Curt or dismissive [^curt]
- **-3**: Rude

[^kind-and-brief]:

[^wordy]:

[^curt]:"""

JUDGE_MESSAGES = [
    {"role": "system", "content": "{{criteria}}"},
    {"role": "assistant", "content": "What was the user's original message?"},
    {"role": "user", "content": "{{input}}"},
    {"role": "assistant", "content": "What was the assistant's response?"},
    {"role": "user", "content": "{{output}}"},
    {"role": "assistant", "content": "What format would you like for the output?"},
    {"role": "user", "content": OUTPUT_FORMAT},
    {"role": "assistant", "content": "Who reads the replies?"},
    {"role": "user", "content": "Customers of a small online bookshop"},
]


def test_a_deck_folder_becomes_one_set_whose_judge_is_the_deck_as_aibff_assembles_it():
    files = fixture_files()
    assert detect(files) == "calibrate"
    result = convert(files)
    loaded = load_calibration(result.source, files=result.files)
    (judge,) = loaded.spec.all_judges
    # The base card is inlined where it is embedded; TOML embeds and the +++ front matter are gone.
    assert judge.criteria == DECK_TEXT
    assert [m.model_dump() for m in judge.messages] == JUDGE_MESSAGES
    assert judge.scale == "-3..3"
    ids = [s.label.split("(")[-1].rstrip(")") for s in loaded.samples]
    assert ids == ["kind-and-brief", "wordy", "curt", "refund-polite", "refund-rude", "gift-wrap"]
    assert result.lost == []
    assert not any("uploaded, but" in line for line in result.unmapped)  # every file was read


def test_an_embed_that_is_not_among_the_files_is_a_listed_loss():
    files = {name: text for name, text in fixture_files().items() if not name.startswith("cards/")}
    result = convert(files)
    (loss,) = result.lost
    assert loss.startswith("decks/support-tone.deck.md: ![…](../cards/grader-base.deck.md) is not among")
    suite = load_suite(result.source, files=result.files)
    judge = suite.calibration.spec.all_judges[0]
    assert "Grader Base" not in judge.criteria
    # No context asks for the sample, so the judge is asked what bff-eval asked every grader deck.
    assert [m.model_dump() for m in judge.messages] == [JUDGE_MESSAGES[0], *JUDGE_MESSAGES[1:7]]


def test_several_grader_decks_on_one_samples_file_are_calibrated_side_by_side():
    files = fixture_files()
    files["decks/support-tone-v2.deck.md"] = (
        "# Support Tone v2\n\nOnly warmth counts: score it from -3 to 3.\n\n"
        "![samples](./support-samples.deck.toml)\n"
    )
    loaded = load_calibration(*_source_and_files(convert(files)))
    judges = {judge.name: judge for judge in loaded.spec.all_judges}
    assert set(judges) == {"support-tone", "support-tone-v2"}
    assert (
        judges["support-tone-v2"].criteria
        == "# Support Tone v2\n\nOnly warmth counts: score it from -3 to 3."
    )
    assert judges["support-tone"].criteria == DECK_TEXT


# The deck whose replies the grader grades (aibff's actor deck, as its fastpitch curator beside the
# sports-relevance graders): it embeds the same samples, and answers with a reply, not a score.
AGENT_DECK = """\
# Bookshop Support Agent

You answer the customers of a small online bookshop. Reply in two sentences at most, as JSON:
{"reply": "<your answer>", "topic": "<shipping | refunds | other>"}.

![](./support-samples.deck.toml)
"""
LEFT_OUT = "decks/support-agent.deck.md: left out of the judges, not a grader deck"


def test_a_deck_that_writes_the_graded_replies_is_left_out_of_the_judges_and_the_report_says_so():
    from engine.imports.boltfoundry import plan

    files = {**fixture_files(), "decks/support-agent.deck.md": AGENT_DECK}
    (unit,) = plan(files)[0]
    assert (unit.graders, unit.left_out) == (["decks/support-tone.deck.md"], ["decks/support-agent.deck.md"])
    result = convert(files)
    loaded = load_calibration(*_source_and_files(result))
    (judge,) = loaded.spec.all_judges
    assert judge.criteria == DECK_TEXT
    assert loaded.spec.name == "support-tone"  # named after its grader
    assert any(
        line.startswith(LEFT_OUT) and "asks neither for the sample" in line for line in result.unmapped
    )
    assert "# - decks/support-agent.deck.md: left out of the judges" in result.source  # the set's own comment
    assert result.lost == [] and len(loaded.samples) == 6


def test_a_folder_import_leaves_the_deck_that_grades_nothing_out_and_says_so():
    from engine.imports import convert_all

    files = {f"bf/{name}": text for name, text in fixture_files().items()}
    imported = convert_all({**files, "bf/decks/support-agent.deck.md": AGENT_DECK})
    (result,) = imported.results
    assert result.origin == "bf/decks/support-tone.deck.md"
    assert any(line.startswith(f"bf/{LEFT_OUT}") for line in result.unmapped)
    assert "bf/decks/support-agent.deck.md" not in imported.ignored  # said of the set, not "not read"


def test_a_deck_that_shows_no_sign_of_grading_is_still_the_judge_of_samples_nothing_else_grades():
    files = {"decks/support-agent.deck.md": AGENT_DECK, "decks/support-samples.deck.toml": fixture_files()[
        "decks/support-samples.deck.toml"]}  # fmt: skip
    result = convert(files)
    (judge,) = load_calibration(*_source_and_files(result)).spec.all_judges
    assert judge.criteria.startswith("# Bookshop Support Agent")
    assert any("shows no sign of grading" in line and "check that it answers with a score" in line
               for line in result.unmapped)  # fmt: skip


def test_samples_no_deck_embeds_are_graded_by_the_grader_named_like_them_not_the_deck_beside_it():
    files = {
        "graders/support-agent.deck.md": AGENT_DECK.replace("![](./support-samples.deck.toml)\n", ""),
        "graders/support-tone-grader.deck.md": "# Support tone\n\nWarm replies score high.\n",
        "graders/support-samples.jsonl": JSONL,
    }
    (judge,) = load_calibration(*_source_and_files(convert(files))).spec.all_judges
    assert judge.criteria == "# Support tone\n\nWarm replies score high."


def test_an_imported_folder_with_a_deck_that_grades_nothing_calibrates_the_grader_alone(tmp_path):
    shutil.copytree(FOLDER, tmp_path / "bf")
    (tmp_path / "bf" / "decks" / "support-agent.deck.md").write_text(AGENT_DECK)
    imported = _cli("import", "bf", "--out", "out", cwd=tmp_path)
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert LEFT_OUT in imported.stdout
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == ["support-tone"]
    with FakeOpenAI(api_key=FAKE_KEY) as fake:
        fake.default_reply = json.dumps({"score": 1, "reason": "fine"})
        ran = _cli(
            "calibrate", "out/support-tone/support-tone.yaml", "--model", "judge-x", cwd=tmp_path,
            OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY=FAKE_KEY,
        )  # fmt: skip
        requests = fake.chat_requests()
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert len(requests) == 6  # one judge, each sample once
    assert all(body["messages"][0] == {"role": "system", "content": DECK_TEXT} for body in requests)
    assert not any("Bookshop Support Agent" in json.dumps(body) for body in requests)


def _source_and_files(result):
    return result.source, "set.yaml", result.files


# --- the judge's own messages ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("messages", "error"),
    [
        ([{"role": "user", "content": "Grade {{reply}}"}], "unknown placeholder {{reply}}"),
        ([{"role": "user", "content": "Grade {{input}}"}], "never show the reply"),
    ],
)
def test_judge_messages_must_show_the_reply_and_name_known_placeholders(messages, error):
    suite = {
        "name": "x",
        "model": "mock",
        "evals": [{"prompt": "hi", "checks": [{"llm_judge": {"criteria": "c", "messages": messages}}]}],
    }
    with pytest.raises(SuiteError) as caught:
        load_suite(json.dumps(suite))
    assert error in str(caught.value)
    assert "messages" in str(caught.value)
    assert Suite  # the schema module is importable alongside (docs are checked in test_docs)


# --- the terminal -------------------------------------------------------------------------------------------------


def _cli(*args, cwd, **env):
    full = {**os.environ, "EVALSITE_VAR_DIR": str(Path(cwd) / "var"), **env}
    full.pop("DATABASE_URL", None)
    return subprocess.run(
        [str(Path(sys.executable).parent / "evalsite"), *args],  # the command a user runs
        cwd=cwd, env={**full, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_import_kind_calibrate_converts_instead_of_crashing(tmp_path):
    (tmp_path / "hello.toml").write_text(KEYED)
    result = _cli("import", "--kind", "calibrate", "hello.toml", "--out", "out/set.yaml", cwd=tmp_path)
    assert "Traceback" not in result.stderr, result.stderr
    # Written and valid, with the grader deck that was not given listed.
    assert "ok — calibration set 'hello', 3 samples" in result.stdout, result.stdout + result.stderr
    assert "the grader (a *.deck.md deck) is not among the files" in result.stdout + result.stderr
    assert (tmp_path / "out" / "set.yaml").is_file() and (tmp_path / "out" / "hello.samples.jsonl").is_file()


def test_validate_and_calibrate_read_the_samples_file_beside_the_set(tmp_path):
    (tmp_path / "set.yaml").write_text(
        "name: beside\njudge: {criteria: Polite, scale: -3..3, model: mock}\nsamples_file: labels.jsonl\n"
    )
    rows = [
        {"id": "a", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
         "expected": {"score": 3}},
        {"id": "b", "messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "go"}],
         "expected": {"score": -3}},
    ]  # fmt: skip
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    validated = _cli("validate", "set.yaml", cwd=tmp_path)
    assert validated.returncode == 0, validated.stderr
    assert "calibration set 'beside', 2 samples" in validated.stdout
    calibrated = _cli("calibrate", "set.yaml", cwd=tmp_path)
    assert "is not attached" not in calibrated.stderr
    assert "2 samples on -3..3" in calibrated.stdout, calibrated.stderr


def test_an_imported_deck_folder_calibrates_with_the_deck_as_the_judges_prompt(tmp_path):
    shutil.copytree(FOLDER, tmp_path / "bf")
    imported = _cli("import", "bf", "--out", "out", cwd=tmp_path)  # the folder, as aibff lays it out
    assert imported.returncode == 0, imported.stdout + imported.stderr
    work = tmp_path
    assert sorted(path.name for path in (work / "out" / "support-tone").iterdir()) == [
        "support-tone.samples.jsonl",
        "support-tone.yaml",
    ]
    replies = {  # the judge's score for each sample, found by its reply
        "We do! Orders to Canada": 3,
        "Thank you so much for reaching out": 2,
        "Send it back.": -2,
        "Refunds reach your card": 3,
        "Not my problem.": -3,
        "Yes, for 2 euros": 1,
    }
    with FakeOpenAI(api_key=FAKE_KEY) as fake:
        for reply, score in replies.items():
            fake.rule(reply, json.dumps({"score": score, "reason": f"scored {score}"}), where="any")
        ran = _cli(
            "calibrate", "out/support-tone/support-tone.yaml", "--model", "judge-x", "--json", "out/figures.json",
            cwd=work,
            OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY=FAKE_KEY,
        )  # fmt: skip
        requests = fake.chat_requests()
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert len(requests) == 6  # every sample graded once
    for body in requests:
        messages = body["messages"]
        assert body["model"] == "judge-x"
        assert messages[0] == {"role": "system", "content": DECK_TEXT}  # the deck is the judge's prompt
        assert [m["content"] for m in messages[1::2]] == [m["content"] for m in JUDGE_MESSAGES[1::2]]
    curt = next(b["messages"] for b in requests if "Send it back." in str(b))
    assert curt[2] == {"role": "user", "content": "My book arrived damaged, what can I do?"}
    assert curt[4] == {"role": "user", "content": "Send it back."}
    figures = json.loads((work / "out" / "figures.json").read_text())
    (judge,) = figures["judges"]
    assert judge["metrics"]["judgements"] == 6 and judge["metrics"]["unscored"] == 0
    wordy = next(row for row in judge["samples"] if "wordy" in row["label"])
    assert (wordy["expected_score"], wordy["judge_score"]) == (1, 2)
    assert wordy["expected_reason"] == "Helpful, but far longer than the question needs"


# --- a folder of several decks ------------------------------------------------------------------------------------

OTHER_SAMPLES = """\
[samples.only]
score = 2

[[samples.only.messages]]
role = "user"
content = "Ping"

[[samples.only.messages]]
role = "assistant"
content = "Pong"
"""


def test_a_second_calibration_set_in_the_folder_is_listed_as_lost_and_planned_apart():
    from engine.imports.boltfoundry import plan

    files = fixture_files()
    files["other/pong.deck.md"] = "# Pong grader\n\n![](./pong.deck.toml)\n"
    files["other/pong.deck.toml"] = OTHER_SAMPLES
    units, _ = plan(files)
    assert [unit.graders for unit in units] == [["decks/support-tone.deck.md"], ["other/pong.deck.md"]]
    assert units[1].files == ["other/pong.deck.md", "other/pong.deck.toml"]
    result = convert(files)
    assert (
        "other/pong.deck.md: another calibration set among the files, not in this one; import it apart"
        in (result.lost)
    )
    assert len(samples_of(result)) == 6  # the first set's samples only


def test_the_graders_a_decks_front_matter_lists_are_calibrated_beside_it():
    files = {
        "demo/evaluator.deck.md": '+++\ngraders = ["./graders/warmth.deck.md"]\n+++\n\n# Evaluator\n\n![](./pong.toml)\n',
        "demo/graders/warmth.deck.md": "# Warmth\n\nIs the reply warm?\n",
        "demo/pong.toml": OTHER_SAMPLES,
    }
    loaded = load_calibration(*_source_and_files(convert(files)))
    assert [judge.name for judge in loaded.spec.all_judges] == ["evaluator", "warmth"]
    assert loaded.spec.all_judges[1].criteria == "# Warmth\n\nIs the reply warm?"


def test_samples_no_deck_embeds_are_graded_by_the_deck_named_like_them():
    files = {
        "graders/team-summary-grader.deck.md": "# Team summaries\n\nPlain words score high.\n",
        "graders/sports-grader.deck.md": "# Sports\n\nStarpower scores high.\n",
        "graders/team-summary-samples.jsonl": JSONL,
    }
    result = convert(files)
    loaded = load_calibration(*_source_and_files(result))
    (judge,) = loaded.spec.all_judges
    assert judge.criteria == "# Team summaries\n\nPlain words score high."
    assert [m.content for m in judge.messages][2::2] == ["{{input}}", "{{output}}", OUTPUT_FORMAT]
    assert result.lost == []
    # A guess, said where a folder import's report and the set's header say it too.
    (note,) = [line for line in result.unmapped if "samples no deck embeds" in line]
    assert "graders/team-summary-grader.deck.md" in note and "check that they were scored" in note


def test_a_deck_uploaded_without_its_folders_is_assembled_by_file_name():
    """The Import page sends file names without folders: an embed finds the one file of its name."""
    flat = {path.rsplit("/", 1)[-1]: text for path, text in fixture_files().items()}
    result = convert(flat)
    (judge,) = load_calibration(result.source, files=result.files).spec.all_judges
    assert judge.criteria == DECK_TEXT and result.lost == []


def test_a_broken_jsonl_line_or_a_score_that_is_no_number_loses_that_sample_only():
    text = JSONL + '{"id": "cut", "userMessage": "Hi", "assistant\n'
    text += '{"id": "text-score", "userMessage": "Hi", "assistantResponse": "Hello!", "score": "2"}\n'
    text += '{"id": "yes-score", "userMessage": "Hi", "assistantResponse": "Hey", "score": true}\n'
    result = convert({"samples.jsonl": text})
    assert [row["id"] for row in samples_of(result)] == ["ship-1", "rude", "open", "text-score"]
    assert samples_of(result)[3]["expected"] == {"score": 2}
    assert any(line.startswith("samples.jsonl line 4: not valid JSON") for line in result.lost)
    assert any(line.startswith("score true is not a number") for line in result.lost)


def test_a_set_reads_calibrates_keyed_toml_as_its_samples_file():
    source = "name: keyed\njudge: {criteria: Says hello world, scale: -3..3}\nsamples_file: hello.toml\n"
    loaded = load_calibration(source, files={"hello.toml": KEYED})
    scored = [(s.label, s.expected_score, s.expected_reason) for s in loaded.samples]
    assert scored == [
        ("hello.toml sample exact", 3.0, "Exactly what was asked"),
        ("hello.toml sample shouted", -2.0, "Wrong case and punctuation"),
    ]
    (skipped,) = loaded.warnings  # the older form is Import's to convert
    assert "older-form" in str(skipped) and "userMessage/assistantResponse" in str(skipped)


def test_the_aibff_guis_ground_truth_examples_are_samples():
    text = (
        '[[examples]]\ninput = \'{"message": "hello world"}\'\nexpected_output = "YES"\nscore = 3\n'
        'reasoning = "Exact match"\n'
    )
    (row,) = samples_of(convert({"ground-truth.deck.toml": text}))
    assert row["messages"] == [
        {"role": "user", "content": '{"message": "hello world"}'},
        {"role": "assistant", "content": "YES"},
    ]
    assert row["expected"] == {"score": 3, "reason": "Exact match"}


def test_a_folder_import_that_lost_the_grader_exits_1_with_the_loss_listed(tmp_path):
    (tmp_path / "bf").mkdir()
    (tmp_path / "bf" / "samples.jsonl").write_text(JSONL)
    result = _cli("import", "bf", "--out", "out", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "the grader (a *.deck.md deck) is not among the files" in result.stderr
    assert "calibration set 'samples', 3 samples" in result.stdout


def test_a_project_holding_a_deck_folder_and_another_tools_suite_imports_both():
    from engine.imports import convert_all

    letta = Path(__file__).parents[1] / "fixtures" / "imports" / "letta-rubric"
    files = {f"bf/{name}": text for name, text in fixture_files().items()}
    files |= {f"letta/{p.name}": p.read_text() for p in letta.iterdir() if p.is_file()}
    imported = convert_all(files)
    kinds = sorted((result.kind, result.origin) for result in imported.results)
    assert kinds == [("calibrate", "bf/decks/support-tone.deck.md"), ("letta", "letta/suite.yaml")]
    assert not any(path.startswith("bf/") for path in imported.ignored)


def test_samples_beside_several_sets_join_the_one_whose_deck_is_named_like_them():
    from engine.imports.boltfoundry import plan

    files = fixture_files()
    files["decks/pong.deck.md"] = "# Pong grader\n\n![](./pong.deck.toml)\n"
    files["decks/pong.deck.toml"] = OTHER_SAMPLES
    units, _ = plan(files)
    support = next(unit for unit in units if "decks/support-tone.deck.md" in unit.graders)
    assert "decks/support-samples.jsonl" in support.sample_files  # support-samples… beside support-tone
    assert len(units) == 2


def test_a_folder_of_decks_without_samples_says_what_calibrate_needs(tmp_path):
    (tmp_path / "bf").mkdir()
    (tmp_path / "bf" / "actor.deck.md").write_text("# Actor\n\n![](./actor.deck.toml)\n")
    result = _cli("import", "bf", "--out", "out", cwd=tmp_path)
    assert result.returncode == 2
    assert "no calibrate samples among the files" in result.stderr
    assert "![…](./actor.deck.toml) is not among the files" in result.stderr
