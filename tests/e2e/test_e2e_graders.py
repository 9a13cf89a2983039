"""An imported multi-grader suite end to end: Letta's suite with a model judge (a prompt_path
rubric, its own model and temperature) and an ascii_printable_only tool grader, a weighted gate and num_runs,
converted by Import, saved with its dataset and rubric file, and played by a real Celery worker against the
fake OpenAI server. Every score below is worked out by hand from what the fake answers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.imports import convert
from runs import selectors, services
from runs.models import Conversation
from suites.services import create_suite
from tests.conftest import FAKE_KEY
from tests.e2e.conftest import wait_for_run

pytestmark = [pytest.mark.e2e]

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "imports" / "letta-multi-grader"

# What the agent draws, by the user's message; what the judge (gpt-4.1-mini) says of each drawing.
DRAWINGS = {
    "Draw a cat in ASCII art.": "=^.^=",
    "Draw a house in ASCII art.": "/\\ |_|",
    "Draw a boat.": "a boat ⛵",  # not printable ASCII
    "Now add a sun above it.": "a boat under a sun",
}
QUALITY = {"a boat under a sun": 0.6, "=^.^=": 1.0, "/\\ |_|": 0.5, "a boat ⛵": 0.8}


def test_an_imported_multi_grader_suite_on_a_real_worker(user, fake_endpoint, fake_openai, start_worker):
    for prompt, drawing in DRAWINGS.items():
        fake_openai.rule(prompt, drawing, model="agent")
    for drawing, score in QUALITY.items():
        # The rubric has no placeholders, so the judge gets Letta's own prompt around it, the turn's reply
        # under "The Agent's Submission".
        fake_openai.rule(f"(What You Are Evaluating)\n{drawing}\n\n", json.dumps({"score": score, "rationale": "ok"}),
                         where="any", model="gpt-4.1-mini")  # fmt: skip
    # The judge model is on the default endpoint: the fake server too.
    start_worker(OPENAI_BASE_URL=fake_openai.base_url, OPENAI_API_KEY=FAKE_KEY)

    files = {
        "suite.yaml": (FIXTURE / "suite.yaml").read_text(),
        "dataset.jsonl": (FIXTURE / "dataset.jsonl").read_text(),
        "quality.md": (FIXTURE / "quality.md").read_text(),
    }
    imported = convert(files)
    assert imported.complete, imported.needs_files
    suite = create_suite(owner=user, source=imported.source, files=imported.files)
    run = wait_for_run(
        services.create_run(version=suite.latest_version, user=user, model="fake/agent"), timeout=90
    )

    conversations = list(Conversation.objects.filter(run=run).order_by("index", "iteration"))
    assert len(conversations) == 9  # 3 rows × num_runs 3
    by_eval = {}
    for conversation in conversations:
        scores = {item["name"]: item["score"] for item in conversation.graders}
        by_eval.setdefault(conversation.eval_id, []).append(scores)
    # cat: quality 1.0, ascii 1.0; house: 0.5, 1.0; boat, graded per turn: quality (0.8 + 0.6) / 2, ascii (0 + 1) / 2.
    expected = {"cat": (1.0, 1.0), "house": (0.5, 1.0), "boat-then-sun": (0.7, 0.5)}
    for eval_id, (quality, ascii_only) in expected.items():
        assert by_eval[eval_id] == [{"quality": pytest.approx(quality), "ascii_only": ascii_only}] * 3, (
            eval_id
        )

    report = selectors.report(run)
    boat = next(r for r in report.evals if r.id == "boat-then-sun")
    assert [[(g.name, g.score) for g in turn.grades] for turn in boat.turns] == [
        [("quality", 0.8), ("ascii_only", 0.0)], [("quality", 0.6), ("ascii_only", 1.0)],
    ]  # fmt: skip
    # The weighted gate: each eval's 0.7 × quality + 0.3 × ascii_only (1.0, 0.65, 0.64), averaged: 0.7633 >= 0.75.
    (gate,) = [g for g in report.gates if g.kind == "weighted_average"]
    assert gate.weights == {"quality": 0.7, "ascii_only": 0.3}
    assert gate.actual == pytest.approx((1.0 + 0.65 + 0.64) / 3) and gate.passed
    assert report.iterated and report.iterated[0].stats.iterations == 3
    judged = [r for r in fake_openai.chat_requests() if r["model"] == "gpt-4.1-mini"]
    assert judged and {r.get("temperature") for r in judged} == {0.2}
    assert "Rate the ASCII art drawing" in judged[0]["messages"][1]["content"]  # the prompt_path rubric
