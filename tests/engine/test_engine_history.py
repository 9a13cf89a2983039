"""Given message histories (calibrate's message lists, AgentV's input_messages): any role, content parts, attached files,
`.instructions.md` guidelines, the `[Role]:` transcript judges read, string-only endpoints, resuming.

Engine tests with an in-test scripted ChatClient; the string-only tests talk to the real fake OpenAI server
(tests/fakeopenai/) through engine.clients.OpenAIClient, as production talks to a provider.
"""

from __future__ import annotations

import pytest

from engine.clients import EndpointConfig, OpenAIClient
from engine.conversation import EngineContext, run_eval
from engine.history import build_history
from engine.judge import judge_messages
from engine.loader import load_suite
from engine.schema import Eval, Message
from engine.source import SuiteError
from engine.transcript import format_transcript, has_structure
from tests.conftest import FAKE_KEY, FAKE_KEY_ENV
from tests.engine.doubles import ScriptedClient

SYSTEM = "You are a careful code reviewer."
GUIDELINES = "- Name the bug before fixing it.\n- Keep fixes small.\n"
SNIPPET = "for i in range(len(items) + 1):\n    print(items[i])\n"
FILES = {"coding-guidelines.instructions.md": GUIDELINES, "snippet.py": SNIPPET, "notes.txt": "Runs on 3.11"}

REVIEW = """
name: review
system: You are a careful code reviewer.
evals:
  - id: finds-the-bug
    messages:
      - role: system
        content: [{type: file, value: coding-guidelines.instructions.md}]
      - role: user
        content: I have a bug in my code.
      - role: assistant
        content: Can you share the code?
      - role: user
        content: [{type: text, value: "Here it is:"}, {type: file, value: snippet.py}]
    checks:
      - contains: IndexError
"""

# What the model must receive for REVIEW: the suite system prompt, then the guidelines block, in one system
# message; the system message that only attached guidelines is gone; snippet.py is embedded in its turn.
REVIEW_SENT = [
    {
        "role": "system",
        "content": "You are a careful code reviewer.\n\n"
        "=== coding-guidelines.instructions.md ===\n- Name the bug before fixing it.\n- Keep fixes small.",
    },
    {"role": "user", "content": "I have a bug in my code."},
    {"role": "assistant", "content": "Can you share the code?"},
    {
        "role": "user",
        "content": "Here it is:\n=== snippet.py ===\nfor i in range(len(items) + 1):\n    print(items[i])",
    },
]


def play_suite(source: str, replies, *, files=FILES, judge=None, index=0, **kwargs):
    suite = load_suite(source, files=files)
    agent = ScriptedClient(replies)
    ctx = EngineContext(
        agent=agent,
        model="model-under-test",
        judge=judge or ScriptedClient([]),
        judge_model="judge-m",
        system=suite.system,
        files=files,
    )
    return run_eval(suite.evals[index], index, suite.eval_id(index), ctx, **kwargs), agent


# --- what the model receives ----------------------------------------------------------------------------


def test_history_alone_the_model_replies_to_it():
    """No prompt/input/turns: one call carrying exactly the history (guidelines and files resolved)."""
    result, agent = play_suite(REVIEW, ["An IndexError: range goes one past the end."])
    assert agent.messages == [REVIEW_SENT]
    assert result.status == "passed"
    assert (result.conversation, result.kind, len(result.turns)) == ("history", "single-turn", 1)
    assert (result.turns[0].prompt, result.turns[0].node) == ("", "evals[0].messages")
    assert result.history == REVIEW_SENT[1:]  # the given history as reviewers see it, no system message
    assert result.prompt == "Here it is:"  # lists show the last user text


def test_history_is_sent_before_the_live_turns():
    source = REVIEW.replace("    checks:\n      - contains: IndexError\n", "") + (
        "    input: [What line is it on?, Thanks]\n    ground_truth: [line 1, welcome]\n    grader: contains\n"
    )
    result, agent = play_suite(source, ["It is on line 1.", "You're welcome."])
    assert agent.messages[0] == [*REVIEW_SENT, {"role": "user", "content": "What line is it on?"}]
    assert agent.messages[1] == [
        *REVIEW_SENT,
        {"role": "user", "content": "What line is it on?"},
        {"role": "assistant", "content": "It is on line 1."},
        {"role": "user", "content": "Thanks"},
    ]
    assert result.status == "passed" and result.conversation == "scripted"
    assert (result.turns_passed, result.turns_total) == (2, 2)


def test_history_before_a_conversation_tree_and_before_turns():
    tree = """
name: s
evals:
  - messages: [{role: user, content: Earlier question}, {role: assistant, content: Earlier answer}]
    prompt: Now this
    checks: [{contains: ok, prompt: Again, checks: [{contains: ok}]}]
  - messages: [{role: user, content: Remember 7}, {role: assistant, content: Noted}]
    turns:
      - input: What number?
        checks: [{contains: "7"}]
"""
    given = [
        {"role": "user", "content": "Earlier question"},
        {"role": "assistant", "content": "Earlier answer"},
    ]
    result, agent = play_suite(tree, ["no", "ok"])
    assert agent.messages[1] == [
        *given,
        {"role": "user", "content": "Now this"},
        {"role": "assistant", "content": "no"},
        {"role": "user", "content": "Again"},
    ]
    assert (result.status, result.passed_on_turn, result.history) == ("passed", 2, given)
    result, agent = play_suite(tree, ["7"], index=1)
    assert agent.messages[0][:2] == [
        {"role": "user", "content": "Remember 7"},
        {"role": "assistant", "content": "Noted"},
    ]
    assert result.status == "passed"


def test_any_role_is_sent_as_given_in_order():
    """calibrate: no role validation; tool/developer/custom roles and several system messages pass through."""
    source = """
name: s
evals:
  - messages:
      - {role: developer, content: Be terse.}
      - {role: user, content: Run the tool.}
      - {role: assistant, content: Calling it.}
      - {role: tool, content: '{"ok": true}'}
      - {role: system, content: Mid-conversation note.}
      - {role: narrator, content: Time passes.}
    checks: [{contains: done}]
"""
    result, agent = play_suite(source, ["done"], files={})
    assert [(m["role"], m["content"]) for m in agent.messages[0]] == [
        ("developer", "Be terse."),
        ("user", "Run the tool."),
        ("assistant", "Calling it."),
        ("tool", '{"ok": true}'),
        ("system", "Mid-conversation note."),
        ("narrator", "Time passes."),
    ]
    assert result.status == "passed"


def test_content_parts_text_and_files_in_order_in_their_own_message():
    history, shown = build_history(
        None,
        [
            Message(
                role="user",
                content=[{"type": "file", "value": "notes.txt"}, {"type": "text", "value": "See?"}],
            ),
            Message(
                role="user",
                content=[{"type": "text", "value": "Also:"}, {"type": "file", "value": "snippet.py"}],
            ),
        ],
        FILES,
    )
    assert (
        history
        == shown
        == [
            {"role": "user", "content": "=== notes.txt ===\nRuns on 3.11\nSee?"},
            {"role": "user", "content": "Also:\n=== snippet.py ===\n" + SNIPPET.rstrip()},
        ]
    )


def test_guidelines_gather_in_the_system_message_after_the_suite_system_prompt():
    """Every *.instructions.md, wherever attached, becomes a `=== name ===` block in the one system message,
    in order, after the suite's system prompt; a message left without text is dropped."""
    files = {"a.instructions.md": "Rule A\n\n", "b.instructions.md": "Rule B"}
    sent, shown = build_history(
        "Suite system.",
        [
            Message(role="system", content=[{"type": "file", "value": "a.instructions.md"}]),
            Message(role="system", content="Given system text."),
            Message(
                role="user",
                content=[
                    {"type": "text", "value": "Question"},
                    {"type": "file", "value": "b.instructions.md"},
                ],
            ),
        ],
        files,
    )
    assert sent == [
        {
            "role": "system",
            "content": "Suite system.\n\n=== a.instructions.md ===\nRule A\n\n=== b.instructions.md ===\nRule B",
        },
        {"role": "system", "content": "Given system text."},
        {"role": "user", "content": "Question"},
    ]
    assert shown == sent[1:]
    # No suite system prompt: the guidelines alone make the system message.
    sent, _ = build_history(
        None, [Message(role="user", content=[{"type": "file", "value": "a.instructions.md"}])], files
    )
    assert sent == [{"role": "system", "content": "=== a.instructions.md ===\nRule A"}]


def test_no_history_and_no_system_sends_only_the_live_turn():
    assert build_history(None, None, {}) == ([], [])
    assert build_history("S", None, {}) == ([{"role": "system", "content": "S"}], [])


def test_a_missing_file_is_a_located_validation_error():
    with pytest.raises(SuiteError) as info:
        load_suite(REVIEW, files={"coding-guidelines.instructions.md": GUIDELINES})
    (problem,) = info.value.problems
    assert problem.path == "evals[0].messages[3].content[1].value"
    assert (problem.line, problem.column) == (14, 75)  # the file name itself
    assert problem.message == (
        "file `snippet.py` is not attached (attached: coding-guidelines.instructions.md)"
    )


@pytest.mark.parametrize(
    ("messages", "needle"),
    [
        ("[{role: user}]", "`content` is required"),
        ("[{role: '', content: x}]", "at least 1 character"),
        ("[{role: user, content: [{type: image, value: x.png}]}]", "Input should be 'text' or 'file'"),
        ("[{role: user, content: [{type: text, text: hi}]}]", "unknown key `text`"),
        ("[{role: user, content: hi, name: bob}]", "unknown key `name` here"),
    ],
)
def test_bad_messages_are_located_validation_errors(messages, needle):
    with pytest.raises(SuiteError) as info:
        load_suite(f"name: s\nevals:\n  - messages: {messages}\n    checks: [{{contains: x}}]\n")
    problems = info.value.problems
    assert any(needle in p.message and p.path.startswith("evals[0].messages[0]") for p in problems), problems


@pytest.mark.parametrize(
    ("messages", "path", "column", "needle"),
    [
        ("[]", "evals[0].messages", 15, "`messages` needs at least one message"),
        ("[{role: user, content: ''}]", "evals[0].messages[0].content", 38, "a message needs content"),
        ("[{role: user, content: '  '}]", "evals[0].messages[0].content", 38, "a message needs content"),
        ("[{role: user, content: []}]", "evals[0].messages[0].content", 38, "a message needs content"),
        (
            "[{role: user, content: [{type: text, value: ''}]}]",
            "evals[0].messages[0].content",
            38,
            "needs content",
        ),
    ],
)
def test_empty_messages_are_refused_before_anything_is_sent(messages, path, column, needle):
    """Issue 14: `messages: []` and an empty message passed validation and were sent (endpoints refuse them)."""
    with pytest.raises(SuiteError) as info:
        load_suite(f"name: s\nevals:\n  - messages: {messages}\n    checks: [{{contains: x}}]\n")
    (problem,) = info.value.problems
    assert (problem.path, problem.line, problem.column) == (path, 3, column), problem
    assert needle in problem.message


def test_a_history_eval_needs_something_to_grade():
    with pytest.raises(SuiteError, match="nothing grades this conversation"):
        load_suite("name: s\nevals:\n  - messages: [{role: user, content: hi}]\n")


def test_history_with_a_ground_truth_grades_the_reply_to_the_history():
    source = "name: s\nevals:\n  - messages: [{role: user, content: 'Capital of France?'}]\n    ground_truth: Paris\n"
    result, _ = play_suite(source, ["Paris"], files={})
    assert (result.status, result.per_turn_grades[0].submission) == ("passed", "Paris")
    assert (result.turns_passed, result.turns_total) == (1, 1)


# --- the [Role]: transcript ------------------------------------------------------------------------------


def test_judge_sees_exactly_what_the_model_saw():
    """Guidelines, embedded files and the given turns reach the judge in [Role]: form, then the reply."""
    source = REVIEW.replace("      - contains: IndexError", "      - llm_judge: {criteria: Names the bug}")
    judge = ScriptedClient(['{"score": 0.9, "reason": "Names the IndexError."}'])
    result, agent = play_suite(source, ["IndexError on line 2."], judge=judge)
    transcript = format_transcript(
        [*agent.messages[0], {"role": "assistant", "content": "IndexError on line 2."}]
    )
    assert transcript == (
        "[System]:\nYou are a careful code reviewer.\n\n=== coding-guidelines.instructions.md ===\n"
        "- Name the bug before fixing it.\n- Keep fixes small.\n\n"
        "[User]:\nI have a bug in my code.\n\n"
        "[Assistant]:\nCan you share the code?\n\n"
        "[User]:\nHere it is:\n=== snippet.py ===\nfor i in range(len(items) + 1):\n    print(items[i])\n\n"
        "[Assistant]:\nIndexError on line 2."
    )
    assert judge.messages[0] == judge_messages(
        "Names the bug", [*REVIEW_SENT, {"role": "assistant", "content": "IndexError on line 2."}]
    )
    assert transcript in judge.messages[0][1]["content"]
    assert result.status == "passed"  # 0.9 over the check's 0.5 threshold


@pytest.mark.parametrize(
    ("messages", "expected"),
    [
        # system + user: flat, no markers (AgentV's single-turn case)
        (
            [
                {"role": "system", "content": "You are a helpful assistant."},
                {"role": "user", "content": "What is 2+2?"},
            ],
            "You are a helpful assistant.\n\nWhat is 2+2?",
        ),
        ([{"role": "user", "content": "Just one"}], "Just one"),
        # guidelines-only system message + user message: still flat
        (
            [
                {"role": "system", "content": "=== g.instructions.md ===\nRule"},
                {"role": "user", "content": "Review."},
            ],
            "=== g.instructions.md ===\nRule\n\nReview.",
        ),
        # two user messages with text: markers
        (
            [{"role": "user", "content": "One"}, {"role": "user", "content": "Two"}],
            "[User]:\nOne\n\n[User]:\nTwo",
        ),
        # any non-system, non-user role: markers
        (
            [{"role": "user", "content": "Hi"}, {"role": "tool", "content": "42"}],
            "[User]:\nHi\n\n[Tool]:\n42",
        ),
        # empty messages are left out, and an empty user message does not create structure
        (
            [
                {"role": "system", "content": "S"},
                {"role": "user", "content": "  "},
                {"role": "user", "content": "Q"},
            ],
            "S\n\nQ",
        ),
    ],
)
def test_role_markers_only_where_there_is_conversational_structure(messages, expected):
    assert format_transcript(messages) == expected
    assert has_structure(messages) == ("[" in expected)


def test_seed_004_multi_turn_example():
    messages = [
        {"role": "system", "content": "You are a debugging expert."},
        {"role": "user", "content": "I have a bug in my code."},
        {"role": "assistant", "content": "Can you share the code?"},
        {"role": "user", "content": "Here it is: [code snippet]"},
    ]
    assert format_transcript(messages) == (
        "[System]:\nYou are a debugging expert.\n\n[User]:\nI have a bug in my code.\n\n"
        "[Assistant]:\nCan you share the code?\n\n[User]:\nHere it is: [code snippet]"
    )


# --- string-only endpoints, against the real fake server ------------------------------------------------


def _client(fake, string_only: bool) -> OpenAIClient:
    import os

    os.environ[FAKE_KEY_ENV] = FAKE_KEY
    config = EndpointConfig(
        name="fake", base_url=fake.base_url, api_key_env=FAKE_KEY_ENV, string_only=string_only, max_retries=0
    )
    return OpenAIClient(config)


def _run_review_on(fake, string_only: bool, source: str = REVIEW):
    suite = load_suite(source, files=FILES)
    agent = _client(fake, string_only)
    ctx = EngineContext(
        agent=agent, model="m", judge=agent, judge_model="m", system=suite.system, files=FILES
    )
    return run_eval(suite.evals[0], 0, "finds-the-bug", ctx)


def test_string_only_endpoint_receives_the_transcript_as_one_user_message(fake_openai):
    transcript = format_transcript(REVIEW_SENT)
    fake_openai.script(transcript, ["IndexError: off by one."])
    result = _run_review_on(fake_openai, string_only=True)
    (request,) = fake_openai.chat_requests()
    assert request["messages"] == [{"role": "user", "content": transcript}]
    assert transcript.startswith("[System]:\nYou are a careful code reviewer.\n\n=== coding-guidelines")
    assert "[Assistant]:\nCan you share the code?" in transcript
    assert result.status == "passed"


def test_string_only_endpoint_gets_every_live_turn_in_the_same_text(fake_openai):
    source = REVIEW.replace("    checks:\n      - contains: IndexError\n", "") + (
        "    input: [Which line?, Thanks]\n    ground_truth: [line 1, welcome]\n    grader: contains\n"
    )
    fake_openai.default_reply = "line 1, you're welcome"
    result = _run_review_on(fake_openai, string_only=True, source=source)
    first, second = fake_openai.chat_requests()
    assert first["messages"] == [
        {
            "role": "user",
            "content": format_transcript([*REVIEW_SENT, {"role": "user", "content": "Which line?"}]),
        }
    ]
    assert second["messages"] == [
        {
            "role": "user",
            "content": format_transcript(
                [
                    *REVIEW_SENT,
                    {"role": "user", "content": "Which line?"},
                    {"role": "assistant", "content": "line 1, you're welcome"},
                    {"role": "user", "content": "Thanks"},
                ]
            ),
        }
    ]
    assert second["messages"][0]["content"].endswith(
        "[Assistant]:\nline 1, you're welcome\n\n[User]:\nThanks"
    )
    assert result.status == "passed"


def test_string_only_single_turn_is_flat_text(fake_openai):
    source = "name: s\nsystem: Be brief.\nevals:\n  - input: What is 2+2?\n    ground_truth: '4'\n"
    fake_openai.script("Be brief.\n\nWhat is 2+2?", ["4"])
    result = _run_review_on(fake_openai, string_only=True, source=source)
    assert fake_openai.chat_requests()[0]["messages"] == [
        {"role": "user", "content": "Be brief.\n\nWhat is 2+2?"}
    ]
    assert result.status == "passed"


def test_message_array_endpoint_receives_the_array(fake_openai):
    """The contrast: a normal endpoint gets the history as a messages array, same first user message."""
    fake_openai.script("I have a bug in my code.", ["IndexError"])
    result = _run_review_on(fake_openai, string_only=False)
    assert fake_openai.chat_requests(first_user="I have a bug in my code.")[0]["messages"] == REVIEW_SENT
    assert result.status == "passed"


# --- resume -------------------------------------------------------------------------------------------


def test_resume_a_history_conversation_without_calling_the_model():
    full, _ = play_suite(REVIEW, ["IndexError"])
    replayed, agent = play_suite(REVIEW, [], prior=full.turns)
    assert agent.messages == []
    assert replayed.model_dump() == full.model_dump()


def test_resume_history_then_turns_continues_after_the_stored_turns():
    source = """
name: s
evals:
  - messages: [{role: user, content: Remember 7}, {role: assistant, content: Noted}]
    turns:
      - input: What number?
        checks: [{contains: "7"}]
      - input: Doubled?
        checks: [{contains: "14"}]
"""
    full, _ = play_suite(source, ["7", "14"], files={})
    resumed, agent = play_suite(source, ["14"], files={}, prior=full.turns[:1])
    assert agent.messages == [
        [
            {"role": "user", "content": "Remember 7"},
            {"role": "assistant", "content": "Noted"},
            {"role": "user", "content": "What number?"},
            {"role": "assistant", "content": "7"},
            {"role": "user", "content": "Doubled?"},
        ]
    ]
    assert resumed.model_dump(exclude={"turns"}) == full.model_dump(exclude={"turns"})


def test_eval_first_text_for_histories():
    ev = Eval.model_validate(
        {
            "messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "Q1"}],
            "checks": [{"contains": "x"}],
        }
    )
    assert ev.first_text == "Q1" and ev.style == "history"
    only_assistant = Eval.model_validate(
        {"messages": [{"role": "assistant", "content": "A"}], "reply": "B", "checks": [{"contains": "x"}]}
    )
    assert only_assistant.first_text == "(history)"


def test_the_results_record_the_system_message_and_the_formatted_question_sent(fake_openai):
    """Seed 004: the formatted question and the guidelines that were sent are in the results, as sent."""
    transcript = format_transcript(REVIEW_SENT)
    fake_openai.script(transcript, ["IndexError: off by one."])
    result = _run_review_on(fake_openai, string_only=False)
    (request,) = fake_openai.chat_requests()
    assert result.system == request["messages"][0]["content"]
    assert "=== coding-guidelines.instructions.md ===" in result.system
    assert result.question == format_transcript(result.history)
    assert (
        result.question.startswith("[User]:\n") and "[Assistant]:\nCan you share the code?" in result.question
    )
