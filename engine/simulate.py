"""The simulated user (@agtlantis/eval's aiUser): a model that plays the user, seeing the conversation from
its side.

What the simulated user is sent, for each message it writes:

    system:  <persona for this turn>

             You are the user in a conversation with an AI agent. Write only your next message to the
             agent: no role label, no quotation marks, no commentary.

             The conversation so far (You = you, Agent = the agent you are talking to):
             You: I want to book a table for two.
             Agent: Sure! For which day and time?
    user:    Write your next message to the agent.

The agent's system prompt and given history stay hidden from it, as they would from a real user, and so do
the agent's tool calls and their results: it sees each of the agent's text replies, as a person would.
"""

from __future__ import annotations

SIMULATOR_INSTRUCTIONS = (
    "You are the user in a conversation with an AI agent. Write only your next message to the agent: "
    "no role label, no quotation marks, no commentary."
)
SIMULATOR_ASK = "Write your next message to the agent."


def persona_for(persona, turn: int) -> str:
    """The persona text for the agent turn `turn` (1-based): a plain text, or the first schedule entry whose
    `until_turn` is not yet passed (an entry without one covers every later turn)."""
    if isinstance(persona, str):
        return persona
    for entry in persona:
        if entry.until_turn is None or turn <= entry.until_turn:
            return entry.text
    return persona[-1].text


def transcript_for_user(live: list[dict]) -> str:
    """The live conversation as the simulated user sees it: its own messages as You, the agent's text replies
    as Agent. Tool calls and results are the agent's internals, which a person never sees (and whose
    messages have no text to show)."""
    lines = []
    for message in live:
        if message["role"] not in ("user", "assistant") or message.get("tool_calls"):
            continue
        who = "You" if message["role"] == "user" else "Agent"
        lines.append(f"{who}: {message['content']}")
    return "\n".join(lines)


def simulator_messages(persona_text: str, live: list[dict]) -> list[dict]:
    transcript = transcript_for_user(live) or "(nothing yet: you speak first)"
    system = (
        f"{persona_text.strip()}\n\n{SIMULATOR_INSTRUCTIONS}\n\n"
        f"The conversation so far (You = you, Agent = the agent you are talking to):\n{transcript}"
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": SIMULATOR_ASK}]


def clean_reply(text: str) -> str:
    """Models playing a user sometimes prefix their line with a label; the agent should not see it."""
    stripped = text.strip()
    for label in ("You:", "User:", "Me:"):
        if stripped.startswith(label):
            stripped = stripped[len(label) :].strip()
    if len(stripped) >= 2 and stripped[0] == stripped[-1] == '"':
        stripped = stripped[1:-1].strip()
    return stripped
