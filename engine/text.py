"""Small wording helpers shared by the CLI report, the engine's verdicts and the pages."""

import re


def plural(count: int, word: str) -> str:
    """ "1 turn", "3 turns"."""
    return f"{count} {word}{'' if count == 1 else 's'}"


# What a terminal acts on rather than shows: C0 controls but newline and tab (escape sequences that recolour,
# retitle or clear it, carriage returns that overwrite a line), DEL, C1 controls, and the bidirectional
# overrides and isolates that make text read otherwise than it is stored.
_ACTING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """The text as a terminal should show it: a model's reply (or an endpoint's error) that holds control
    characters is printed with them escaped (`\\x1b[31m`), never acted on; --json keeps them as they were."""
    return _ACTING.sub(_escape, text)
