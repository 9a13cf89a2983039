"""Transcripts, endpoint resolution, the mock client, the terminal report, run_suite on the demo, and the
results JSON shape; plus a guard that the engine never imports Django.

Run without Django: ``python -m pytest tests/engine/test_engine_misc.py -q -p no:django``.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.checks import cosine
from engine.clients import (
    DEFAULT,
    MOCK,
    EndpointConfig,
    EndpointError,
    EndpointRegistry,
    MockClient,
    OpenAIClient,
    bag_of_words_vector,
    estimate_tokens,
    message_text,
)
from engine.loader import load_suite
from engine.report import format_eval, format_report
from engine.results import RunReport, Usage
from engine.runner import build_context, run_suite
from engine.schema import MockSpec
from engine.transcript import format_transcript, has_structure

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "demo-mock.yaml"


def sys_(text):
    return {"role": "system", "content": text}


def user(text):
    return {"role": "user", "content": text}


def assistant(text):
    return {"role": "assistant", "content": text}


# --- transcript (seed 004) -----------------------------------------------------------------------------


def test_transcript_flat_for_system_and_user():
    """System text + one user message: flat, joined by a blank line, no markers (seed 004 single-turn)."""
    messages = [sys_("You are a helpful assistant."), user("What is 2+2?")]
    assert format_transcript(messages) == "You are a helpful assistant.\n\nWhat is 2+2?"
    assert not has_structure(messages)


def test_transcript_flat_for_a_single_user_message():
    """A lone user message is just its text."""
    assert format_transcript([user("  Hello  ")]) == "Hello"


def test_transcript_flat_when_system_has_no_text():
    """A system message without text (a file part) plus a user message is flat: just the user text."""
    messages = [
        {"role": "system", "content": [{"type": "file", "value": "coding-guidelines.instructions.md"}]},
        user("Please review this code."),
    ]
    assert format_transcript(messages) == "Please review this code."


def test_transcript_markers_when_an_assistant_message_exists():
    """Any assistant message gives [Role]: markers for every message (seed 004 multi-turn example)."""
    messages = [
        sys_("You are a debugging expert."),
        user("I have a bug in my code."),
        assistant("Can you share the code?"),
        user("Here it is: [code snippet]"),
    ]
    assert format_transcript(messages) == (
        "[System]:\nYou are a debugging expert.\n\n"
        "[User]:\nI have a bug in my code.\n\n"
        "[Assistant]:\nCan you share the code?\n\n"
        "[User]:\nHere it is: [code snippet]"
    )


def test_transcript_markers_for_user_then_assistant_without_system():
    """User + assistant with no system message: markers."""
    assert format_transcript([user("Hi"), assistant("Hello")]) == "[User]:\nHi\n\n[Assistant]:\nHello"


def test_transcript_markers_for_several_user_messages():
    """Two user messages with text and no assistant: markers."""
    messages = [user("First."), user("Second.")]
    assert has_structure(messages)
    assert format_transcript(messages) == "[User]:\nFirst.\n\n[User]:\nSecond."


def test_transcript_empty_user_message_does_not_count_as_structure():
    """An empty user message is dropped and does not trigger markers."""
    messages = [sys_("S"), user("   "), user("Real question")]
    assert format_transcript(messages) == "S\n\nReal question"


def test_transcript_other_roles_get_capitalised_markers():
    """Tool (or any non system/user) roles force markers, capitalised."""
    out = format_transcript([user("Call it"), {"role": "tool", "content": "42"}])
    assert out == "[User]:\nCall it\n\n[Tool]:\n42"


def test_transcript_reads_openai_text_parts():
    """List content: the text parts are joined with newlines."""
    message = {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}
    assert message_text(message) == "a\nb"
    assert format_transcript([message]) == "a\nb"


# --- endpoint registry ---------------------------------------------------------------------------------


@pytest.fixture
def registry():
    return EndpointRegistry(
        default=EndpointConfig(name=DEFAULT, base_url="http://default.invalid/v1"),
        named={"fast": EndpointConfig(name="fast", base_url="http://fast.invalid/v1", max_concurrency=2)},
    )


@pytest.mark.parametrize(
    ("ref", "expected"),
    [
        ("gpt-4o", (DEFAULT, "gpt-4o")),
        ("  gpt-4o  ", (DEFAULT, "gpt-4o")),
        ("anthropic/claude-3.5-sonnet", (DEFAULT, "anthropic/claude-3.5-sonnet")),
        ("fast/gpt-x", ("fast", "gpt-x")),
        ("fast/org/model-y", ("fast", "org/model-y")),
        ("slow/gpt-x", (DEFAULT, "slow/gpt-x")),
        ("mock", (MOCK, MOCK)),
        ("mock/x", (MOCK, "x")),
    ],
)
def test_registry_resolve(registry, ref, expected):
    """resolve: plain and unknown-prefix ids go whole to default; known endpoint/model splits; mock."""
    assert registry.resolve(ref) == expected


def test_registry_clients(registry):
    """client(): mock gives a MockClient with the suite's rules; named gives an OpenAIClient; unknown errors."""
    spec = MockSpec(rules=[{"when": "*", "reply": "hi"}])
    mock = registry.client(MOCK, spec)
    assert isinstance(mock, MockClient) and mock.is_mock and mock.spec is spec
    fast = registry.client("fast")
    assert isinstance(fast, OpenAIClient) and fast.label == "fast" and not fast.is_mock
    assert registry.client(DEFAULT).endpoint.base_url == "http://default.invalid/v1"
    with pytest.raises(EndpointError, match="unknown endpoint"):
        registry.client("nope")
    assert registry.max_concurrency("fast") == 2
    assert registry.max_concurrency(MOCK) >= 100


def test_endpoint_cost_per_million_tokens():
    """EndpointConfig.cost: prices are USD per million prompt and completion tokens."""
    endpoint = EndpointConfig(name="x", base_url="http://x.invalid", price_input=2.0, price_output=10.0)
    assert endpoint.cost(Usage(prompt_tokens=1_000_000, completion_tokens=500_000)) == pytest.approx(7.0)


def test_estimate_tokens():
    """estimate_tokens: about 4 characters a token, at least 1 for non-empty text, 0 for empty."""
    assert estimate_tokens("") == 0
    assert estimate_tokens("a") == 1
    assert estimate_tokens("x" * 40) == 10
    assert estimate_tokens("x" * 41) == 11


# --- mock client ---------------------------------------------------------------------------------------


def mock_spec(**kwargs) -> MockSpec:
    return MockSpec(
        rules=[
            {"when": "*recalculate*", "reply": "105"},
            {"when": "*15 * 7*", "reply": "100"},
            {"when": "*", "reply": "catch-all"},
        ],
        **kwargs,
    )


def test_mock_first_matching_rule_wins():
    """MockClient: the first rule (in order) whose glob matches the latest user message wins."""
    client = MockClient(mock_spec())
    # "*15 * 7*" and "*" both match; the earlier rule wins.
    assert client.complete("m", [user("What is 15 * 7?")]).text == "100"
    # "*recalculate*" comes first even though "*15 * 7*" also matches.
    assert client.complete("m", [user("Please RECALCULATE 15 * 7")]).text == "105"


def test_mock_matches_only_the_latest_user_message():
    """MockClient reads the latest user message, not earlier ones or the assistant's."""
    client = MockClient(MockSpec(rules=[{"when": "*15 * 7*", "reply": "100"}], default="dunno"))
    messages = [user("What is 15 * 7?"), assistant("100"), user("Are you sure?")]
    assert client.complete("m", messages).text == "dunno"


def test_mock_default_when_no_rule_matches():
    """MockClient: the spec's default when nothing matches; the built-in default without a spec."""
    assert MockClient(MockSpec(default="no idea")).complete("m", [user("x")]).text == "no idea"
    assert "mock" in MockClient().complete("m", [user("x")]).text.lower()


def test_mock_usage_is_estimated_and_free_and_latency_uses_sleep():
    """MockClient: estimated usage, zero cost, latency through the injected sleep."""
    slept: list[float] = []
    client = MockClient(mock_spec(latency_ms=250), sleep=slept.append)
    completion = client.complete("m", [sys_("S" * 8), user("What is 15 * 7?")])
    assert slept == [0.25]
    assert completion.cost == 0.0
    assert completion.usage.estimated is True
    assert completion.usage.completion_tokens == estimate_tokens("100")
    assert completion.usage.prompt_tokens > 0
    no_latency: list[float] = []
    MockClient(mock_spec(), sleep=no_latency.append).complete("m", [user("x")])
    assert no_latency == []


def test_mock_embeddings_are_stable_bag_of_words():
    """MockClient.embed: same words give the same vector; different words are less similar."""
    vectors, usage, cost = MockClient().embed("e", ["the cat sat", "sat the cat", "quantum flux"])
    assert cosine(vectors[0], vectors[1]) == pytest.approx(1.0)
    assert cosine(vectors[0], vectors[2]) < 0.9
    assert usage.estimated and cost == 0.0
    assert bag_of_words_vector("") == [0.0] * 64


# --- runner + report on the demo -----------------------------------------------------------------------


@pytest.fixture
def demo_suite():
    suite = load_suite(DEMO.read_bytes(), filename=DEMO.name)
    suite.mock.latency_ms = 0
    return suite


@pytest.fixture
def demo_report(demo_suite, registry) -> RunReport:
    return run_suite(demo_suite, registry)


def test_run_suite_demo_outcomes(demo_report):
    """The demo gives: add passes on turn 1, multiply passes on turn 2, capital fails after 3 turns."""
    outcome = {r.id: (r.status, r.passed_on_turn, r.verdict) for r in demo_report.evals}
    assert outcome == {
        "add": ("passed", 1, "passed on turn 1"),
        "multiply": ("passed", 2, "passed on turn 2"),
        "capital": ("failed", None, "failed after 3 turns"),
    }
    assert [r.index for r in demo_report.evals] == [0, 1, 2]
    assert demo_report.status == "failed"
    assert demo_report.mock is True
    assert demo_report.endpoint == MOCK
    assert demo_report.model == "mock"
    totals = demo_report.totals
    assert (totals.evals, totals.passed, totals.failed, totals.error, totals.turns) == (3, 2, 1, 0, 6)
    assert totals.total_tokens == sum(r.totals.total_tokens for r in demo_report.evals) > 0


def test_run_suite_demo_turn_contents(demo_report):
    """The capital eval keeps every prompt and mock reply in order."""
    capital = demo_report.evals[2]
    assert [t.response for t in capital.turns] == [
        "The capital of Australia is Sydney.",
        "I'm fairly sure it is Sydney, the largest city.",
        "Then it must be Melbourne.",
    ]
    assert capital.turns[2].prompt.startswith("Hint:")


def test_run_suite_on_result_callback(demo_suite, registry):
    """run_suite calls on_result once per eval."""
    seen = []
    run_suite(demo_suite, registry, on_result=seen.append, concurrency=1)
    assert sorted(r.id for r in seen) == ["add", "capital", "multiply"]


def test_build_context_uses_suite_system_and_judge(demo_suite, registry):
    """build_context resolves model and judge (default: the model) and passes the system prompt."""
    ctx, endpoint = build_context(demo_suite, registry)
    assert endpoint == MOCK
    assert (ctx.model, ctx.judge_model) == (MOCK, MOCK)
    assert ctx.system == demo_suite.system
    demo_suite.judge = "fast/judge-x"
    ctx, _ = build_context(demo_suite, registry)
    assert ctx.judge_model == "judge-x" and ctx.judge.label == "fast"
    demo_suite.model = None
    with pytest.raises(ValueError, match="no model"):
        build_context(demo_suite, registry)


def test_format_report_shape(demo_report):
    """The terminal report follows seed 000: Turn n:, ❌ FAIL match "*105*", Overall with the passing turn."""
    text = format_report(demo_report)
    assert "Turn 1:" in text
    assert '❌ FAIL match "*105*"' in text
    assert "Overall: ✅ PASS (succeeded on turn 2)" in text
    assert "Overall: ✅ PASS (succeeded on turn 1)" in text
    assert "Overall: ❌ FAIL (failed after 3 turns)" in text
    assert "[mock endpoint]" in text
    assert text.rstrip().endswith("Overall: ❌ FAIL (failed)")


def test_format_eval_multiply_block(demo_report):
    """One eval's block: prompt, response and check lines for each turn, in order."""
    block = format_eval(demo_report.evals[1])
    lines = block.splitlines()
    assert lines[0] == "Eval 2: What is 15 * 7?"
    assert lines[1] == "  Turn 1:"
    assert lines[2] == "    Prompt: What is 15 * 7?"
    assert lines[3] == "    Response: 15 * 7 = 100."
    assert lines[4].startswith('    ❌ FAIL match "*105*"')
    assert "  Turn 2:" in lines
    assert any(line.startswith("    Follow-up because ") for line in lines)
    assert any(line.startswith('    ✅ PASS match "*105*"') for line in lines)
    assert lines[-1] == "  Overall: ✅ PASS (succeeded on turn 2)"


def test_run_report_json_shape(demo_report):
    """model_dump(mode="json"): each eval has status, score, passed_on_turn, turns and totals."""
    data = json.loads(json.dumps(demo_report.model_dump(mode="json")))
    assert data["format"] == "evalsite.results/1"
    assert data["suite"]["name"] == "demo-follow-ups"
    assert data["status"] == "failed"
    for key in ("evals", "passed", "failed", "turns", "total_tokens", "cost"):
        assert key in data["totals"]
    by_id = {e["id"]: e for e in data["evals"]}
    assert (by_id["multiply"]["status"], by_id["multiply"]["score"], by_id["multiply"]["passed_on_turn"]) == (
        "passed",
        1.0,
        2,
    )
    assert (by_id["capital"]["score"], by_id["capital"]["passed_on_turn"]) == (0.0, None)
    for ev in data["evals"]:
        for key in ("status", "score", "passed_on_turn", "turns", "totals", "verdict", "kind"):
            assert key in ev
        assert ev["totals"]["turns"] == len(ev["turns"])
        for turn in ev["turns"]:
            assert isinstance(turn["prompt"], str) and isinstance(turn["response"], str)
            assert set(turn["usage"]) >= {"prompt_tokens", "completion_tokens", "estimated"}
            for check in turn["checks"]:
                assert set(check) >= {"type", "label", "passed", "score", "reason"}
    first_check = by_id["multiply"]["turns"][0]["checks"][0]
    assert (first_check["type"], first_check["label"], first_check["passed"]) == (
        "match",
        'match "*105*"',
        False,
    )
    assert RunReport.model_validate(data) == demo_report


# --- no Django -----------------------------------------------------------------------------------------


def test_engine_imports_without_django():
    """Importing every engine module in a fresh interpreter does not import django."""
    modules = sorted(p.stem for p in (ROOT / "engine").glob("*.py") if p.stem != "__init__")
    assert {"runner", "loader", "conversation", "checks"} <= set(modules)
    imports = ", ".join(f"engine.{name}" for name in modules)
    code = f"import engine, {imports}; import sys; assert 'django' not in sys.modules, 'django imported'"
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stderr


def test_every_run_of_a_repeated_eval_is_labelled_alike(registry):
    suite = load_suite(
        "name: repeated\nmodel: mock\nevals:\n"
        "  - {prompt: once, checks: [{contains: OK}]}\n"
        "  - {prompt: thrice, iterations: 3, checks: [{contains: OK}]}\n"
    )
    headings = [
        line for line in format_report(run_suite(suite, registry)).splitlines() if line.startswith("Eval ")
    ]
    assert headings == [
        "Eval 1: once",
        "Eval 2 (iteration 1 of 3): thrice",
        "Eval 2 (iteration 2 of 3): thrice",
        "Eval 2 (iteration 3 of 3): thrice",
    ]
