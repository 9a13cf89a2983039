"""engine/transcript.py: a conversation flattened for a string-only endpoint or a judge, with `[Role]:`
markers once it has structure."""

from __future__ import annotations

from engine.transcript import format_transcript, has_structure, message_text
from tests.engine.doubles import assistant, sys_, user


def test_transcript_flat_for_system_and_user():
    """System text + one user message: flat, joined by a blank line, no markers (AgentV's single-turn case)."""
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
    """Any assistant message gives [Role]: markers for every message (AgentV's multi-turn example)."""
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
