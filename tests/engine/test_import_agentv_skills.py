"""Agent Skills `evals.json` and `*.evals.json`, which AgentV runs through its read adapter
(agentSkillsToAgentVYamlObject): recognised as AgentV's, not vibecheck's, and played on the fake OpenAI endpoint
(a real HTTP server) as AgentV runs them: the prompt sent with its files, `expected_output`, `assertions` and
`expectations` the criteria of one rubric, the case passing on the share of criteria met at 0.8."""

from __future__ import annotations

import json

import pytest
import yaml

from engine.imports import ImportProblem, convert, convert_all, looks_like
from tests.engine.promptfoo_play import judged, play, project, verdict


def files(*names: str) -> dict[str, str]:
    everything = project("agentv-skills")
    return {name: everything[name] for name in names}


def test_the_skills_shape_is_agentvs_not_vibechecks():
    data = json.loads(project("agentv-skills")["evals.json"])
    assert looks_like(data) == "agentv"
    result = convert(files("evals.json", "evals/files/sales.csv"), "agentv")  # `--kind agentv`
    assert result.kind == "agentv"
    with pytest.raises(ImportProblem, match="is an AgentV file, not a vibecheck one"):
        convert(files("evals.json"), "vibecheck")


def test_a_folder_import_finds_evals_json_and_named_evals_json():
    imported = convert_all(project("agentv-skills"))
    assert sorted(result.origin for result in imported.results) == ["evals.json", "greeting.evals.json"]
    assert imported.problems == [] and imported.ignored == []


def test_evals_become_a_user_message_with_its_files_and_criteria_judges():
    result = convert(files("evals.json", "evals/files/sales.csv"))
    assert result.lost == [] and result.needs_files == []
    top, total = yaml.safe_load(result.source)["evals"]
    assert (top["id"], total["id"]) == ("1", "total")
    parts = top["messages"][0]["content"]
    assert [part["type"] for part in parts] == ["file", "text"] and result.files["sales.csv"].startswith(
        "month"
    )
    # expected_output is a criterion (AgentV's adapter), not a reference answer, with the assertions
    assert list(top["graders"]) == ["expected-outcome", "assertion-1", "assertion-2", "assertion-3"]
    assert "ground_truth" not in top
    assert top["pass_rule"] == {
        "weighted_average": dict.fromkeys(top["graders"], 0.25),
        "threshold": 0.8,
    }
    assert list(total["graders"]) == [f"expectation-{n}" for n in range(1, 6)]


def test_played_it_passes_on_the_share_of_criteria_met(fake_openai):
    result = convert(files("evals.json", "evals/files/sales.csv"))
    # the judges' rules first: a judge's prompt holds the conversation, the user's question with it
    for criterion in ("Names November", "Lists exactly 3", "November ($22,500)"):
        fake_openai.rule(criterion, verdict(1.0))
    fake_openai.rule("Gives the revenue of each month", verdict(0.0, "no figures"))
    for criterion in (
        "States a single total",
        "The total is $191,900",
        "Uses the figures",
        "one short paragraph",
    ):
        fake_openai.rule(criterion, verdict(1.0))
    fake_openai.rule("Shows how the total was reached", verdict(0.0, "no working"))
    fake_openai.rule("Which 3 months", "November, September and December.")
    fake_openai.rule("total revenue for the year", "The total was $191,900.")

    report = play(fake_openai, result)

    by_id = {r.id: r for r in report.evals}
    # 3 of 4 criteria met: 0.75 < 0.8, AgentV fails it
    assert by_id["1"].status == "failed" and by_id["1"].score == pytest.approx(0.75)
    # 4 of 5 met: 0.8 passes, as AgentV passes it on its score though the criterion it missed is `required`
    assert by_id["total"].status == "passed" and by_id["total"].score == pytest.approx(0.8)
    # the model was sent the CSV with the prompt; each judge was shown the reply
    sent = [
        json.dumps(r["messages"]) for r in fake_openai.chat_requests() if "judge" not in str(r["messages"][0])
    ]
    (asked,) = [text for text in sent if "Which 3 months" in text]
    assert "November,22500" in asked
    (named,) = judged(fake_openai, "Names November")
    assert "November, September and December." in named


def test_what_agentv_does_not_run_is_listed():
    result = convert(files("greeting.evals.json"))
    (lost,) = result.lost
    assert lost.startswith("evals[1]: no `prompt`")
    assert any(
        line.startswith("evals[].should_trigger: not read by AgentV's adapter either")
        for line in result.unmapped
    )
    assert [ev["id"] for ev in yaml.safe_load(result.source)["evals"]] == ["1"]
    with pytest.raises(ImportProblem, match="`evals` is empty"):
        convert({"evals.json": json.dumps({"skill_name": "x", "evals": []})})


def test_evals_files_of_one_skill_get_distinct_names_from_their_paths():
    """AgentV names a suite after its file (yaml-parser.ts: the file's base name when it has no `name`); one
    skill's evals files, beside each other or in two folders, must not share a suite name in a project."""
    imported = convert_all(project("agentv-skills-twice"))
    names = {result.origin: yaml.safe_load(result.source)["name"] for result in imported.results}
    assert names == {
        "evals.json": "csv-analyzer (evals.json)",
        "csv-analyzer.evals.json": "csv-analyzer (csv-analyzer.evals.json)",
        "legacy/evals.json": "csv-analyzer (legacy/evals.json)",
    }
    # stable: the same files give the same names, and the description stays the adapter's
    again = convert_all(project("agentv-skills-twice"))
    assert [yaml.safe_load(result.source)["name"] for result in again.results] == list(names.values())
    assert {yaml.safe_load(result.source)["description"] for result in again.results} == {
        "Evals for csv-analyzer skill"
    }
    # a file imported alone is named after its own name
    alone = convert({"evals.json": project("agentv-skills-twice")["evals.json"]})
    assert yaml.safe_load(alone.source)["name"] == "csv-analyzer (evals.json)"
