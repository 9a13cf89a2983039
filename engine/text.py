"""Small wording helpers shared by the CLI report, the engine's verdicts and the pages."""

import re


def plural(count: int, word: str) -> str:
    """ "1 turn", "3 turns"."""
    return f"{count} {word}{'' if count == 1 else 's'}"


# --- how a verdict reads: one wording for the terminal, the pages, results.json, JUnit and Markdown ---------
#
# A verdict says how the conversation came out, leaving the outcome to its status (a mark, a badge, a
# <failure>) so that no word is said twice beside it, and without parentheses, as the terminal puts it in
# some ("✅ PASS (every turn passed: 2 of 2)"). A score is said beside the line it had to reach.

SCORE_EPSILON = 1e-9  # a score this close under its line reached it (a mean of thirds against 2/3)


def line_figure(line: float) -> str:
    """A pass line as verdicts say it: two decimals, as scores have, or more when it has them (0.625)."""
    return f"{line:.2f}" if abs(round(line, 2) - line) < SCORE_EPSILON else f"{line:g}"


def against(score: float, line: float, label: str = "score") -> str:
    """A score beside its pass line: "score 0.67 ≥ 0.60" when it reached it, "score 0.67 < 1.00" when not; a
    score that fell short is given the digits that tell it from its line ("0.599 < 0.60")."""
    named = f"{label} " if label else ""
    if score >= line - SCORE_EPSILON:
        return f"{named}{score:.2f} ≥ {line_figure(line)}"
    digits = 2
    while digits < 6 and round(score, digits) >= line:
        digits += 1
    return f"{named}{score:.{digits}f} < {line_figure(line)}"


def turns_passed(passed: int, total: int, noun: str = "turn") -> str:
    """The turns that passed: "every turn passed: 2 of 2", "2 of 3 turns passed" (`noun` "graded turn" when
    some turns had nothing to grade)."""
    if passed == total:
        return f"every {noun} passed: {passed} of {total}"
    return f"{passed} of {plural(total, noun)} passed"


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
