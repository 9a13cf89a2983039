"""Reading a judge's answer as judges write it, and saying how it was read.

Judges are asked for JSON {"score": ..., "reason": ...}. What comes back may open with a thinking block,
wrap the JSON in a fence or in prose, or give no JSON at all: `Score: 8/10. The reply is good.`, `I would
rate it 0.9.`, `PASS - the answer meets the criteria.` `parse_verdict` first drops thinking blocks, then
reads, first success wins:

1. the whole answer as a JSON object (`json`);
2. a fenced code block holding one (`fenced-json`);
3. the first object embedded in prose that has a score (`embedded-json`);
4. a number the answer gives as its score (`number` when the answer is nothing else, `prose` otherwise): one
   labelled `Score:`, `Rating:`, `Grade:`, `Overall:` or `Verdict:`, one after "I would rate it" (give,
   score, grade), one alone at the start, or one out of M or a percentage alone on the last line; as
   itself, out of M (`8/10`, `8 out of 10`) or a percentage;
5. for judges that answer pass/fail or yes/no, the word (`words`): first in the answer, or labelled
   `Verdict:`, `Result:` or `Decision:`.

A number in quotes or backticks is what the conversation said, not the judge's score, and is never read;
nor is a number in a sentence that does not give it as a score. Several different scores are no score.
What is not read has no score and says why (`error`), never a silent zero.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from .bounds import loads_json

# A judge's JSON sits near the start of its answer. Searching a pathological answer (megabytes of "{")
# from every brace would take minutes, so the search looks at a bounded number of starts and characters.
MAX_EMBEDDED_STARTS = 20
MAX_EMBEDDED_CHARS = 100_000
READ_FROM_CHARS = 80  # how much of what a score was read from is kept to show

PASS_FAIL = {"pass": 1.0, "passed": 1.0, "fail": 0.0, "failed": 0.0}
YES_NO = {"yes": 1.0, "no": 0.0}

SCORE_KEYS = ("score", "rating", "grade", "value")
REASON_KEYS = ("reason", "reasoning", "explanation", "rationale")
WORD_KEYS = ("verdict", "result", "decision", "answer", "passed", "pass")


@dataclass
class Verdict:
    score: float | None  # None when nothing could be read
    reason: str
    parsed_from: str  # json | fenced-json | embedded-json | number | prose | words | unparseable
    fraction: bool = False  # the score was given as a share of full marks ("7/10", "85%", PASS), read as 0-1
    read_from: str | None = None  # what the score was read from, unless it was the whole answer as JSON
    error: str = ""  # unparseable: why, said to the judge when it is asked again and to the person reading
    raw: str = ""  # the answer as returned
    first_answer: str | None = None  # an unreadable first answer, when the judge was asked again

    def recorded(self) -> dict:
        """How the verdict was read, as the fields of a check result, a grade or a stop condition."""
        return {
            "raw": self.raw,
            "parsed_from": self.parsed_from,
            "read_from": self.read_from,
            "first_answer": self.first_answer,
        }


# --- thinking blocks -----------------------------------------------------------------------------------

_OPEN_TAG = re.compile(r"<(think|thinking)>", re.I)
_CLOSE_TAGS = {tag: re.compile(f"</{tag}>", re.I) for tag in ("think", "thinking")}
_CLOSE_TAG = re.compile(r"</(?:think|thinking)>", re.I)


def strip_thinking(text: str) -> tuple[str, str]:
    """The answer without its thinking, and a note when an unclosed block swallowed the rest ("" if not).

    Closed blocks go; a closing tag with no opening one (reasoning parsers drop the opening tag) takes all
    before it; an opening tag never closed takes all after it, since nothing says where thinking ends."""
    kept, at = [], 0
    while (found := _OPEN_TAG.search(text, at)) is not None:
        close = _CLOSE_TAGS[found.group(1).lower()].search(text, found.end())
        kept.append(text[at : found.start()])
        if close is None:
            return _after_lone_close("".join(kept)), "a thinking block that was never closed"
        at = close.end()
    kept.append(text[at:])
    return _after_lone_close("".join(kept)), ""


def _after_lone_close(text: str) -> str:
    end = 0
    for close in _CLOSE_TAG.finditer(text):
        end = close.end()
    return text[end:]


# --- JSON --------------------------------------------------------------------------------------------------


def _score_from(value) -> tuple[float | None, bool]:
    """The score in a JSON value, and whether it is a share of full marks (a percentage)."""
    fraction = False
    if isinstance(value, bool):
        return (1.0 if value else 0.0), True
    if isinstance(value, (int, float)):
        score = float(value)
    elif isinstance(value, str):
        text = value.strip()
        fraction = text.endswith("%")
        try:
            score = float(text[:-1]) / 100 if fraction else float(text)
        except ValueError:
            return None, False
    else:
        return None, False
    return (score, fraction) if math.isfinite(score) else (None, False)  # NaN or Infinity is no verdict


def _from_object(obj, words: dict[str, float] | None) -> Verdict | None:
    if not isinstance(obj, dict):
        return None
    reason = next((obj[key] for key in REASON_KEYS if obj.get(key)), "")
    for key in SCORE_KEYS:
        if key in obj:
            score, fraction = _score_from(obj[key])
            if score is not None:
                return Verdict(score, str(reason), "json", fraction)
    for key in WORD_KEYS if words else ():
        value = obj.get(key)
        if isinstance(value, bool) and key in ("passed", "pass"):
            return Verdict(1.0 if value else 0.0, str(reason), "json", True)
        if isinstance(value, str) and value.strip().lower() in words:
            return Verdict(words[value.strip().lower()], str(reason), "json", True)
    return None


def _json(text: str) -> object:
    try:
        return loads_json(text)  # bounded nesting: no RecursionError on a hostile answer
    except (ValueError, TypeError):
        return None


def _embedded_objects(text: str):
    """Yields each balanced {...} substring, outermost first, ignoring braces inside strings."""
    text = text[:MAX_EMBEDDED_CHARS]
    starts = (i for i, char in enumerate(text) if char == "{")
    for _, start in zip(range(MAX_EMBEDDED_STARTS), starts, strict=False):
        depth, in_string, escaped = 0, False, False
        for end in range(start, len(text)):
            char = text[end]
            if in_string:
                if escaped:
                    escaped = False
                elif char == "\\":
                    escaped = True
                elif char == '"':
                    in_string = False
            elif char == '"':
                in_string = True
            elif char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
                if depth == 0:
                    yield text[start : end + 1]
                    break


_FENCE = re.compile(r"```[ \t]*+(?:json[ \t]*+)?\n?(.*?)```", re.S | re.I)  # possessive: one place per run


def _fenced(text: str):
    for _, block in zip(range(MAX_EMBEDDED_STARTS), _FENCE.finditer(text[:MAX_EMBEDDED_CHARS]), strict=False):
        yield block.group(1).strip()


# --- scores in prose ---------------------------------------------------------------------------------------

_NUM = r"(-?\d{1,6}(?:\.\d{1,6})?)"
# Out of M or a percentage; each run of spaces has one place to go (adjacent `\s*`s backtrack cubically).
_OUT_OF = rf"(?:[ \t]*/[ \t]*{_NUM}|[ \t]+out[ \t]+of[ \t]+{_NUM}|[ \t]*(%))?"
_BOLD = r"[*_]{0,2}"
_THEN_BOLD = r"(?:[*_]{1,2}[ \t]*)?"  # after a run of spaces: bold, then a run of its own
_LABELLED = re.compile(
    rf"\b(?:(?:my|the|final|overall)[ \t]+){{0,2}}(?:(?:score|rating|grade)(?:[ \t]*[:=]|[ \t]+(?:is|of))|(?:overall|verdict)[ \t]*[:=])"
    rf"[ \t]*{_THEN_BOLD}{_NUM}{_OUT_OF}(?!\w)",
    re.I,
)
_RATED = re.compile(
    rf"\bI(?:[ \t]+would|[ \t]+will|'d|'ll)?[ \t]+(?:rate|give|score|grade)[ \t]+"
    rf"(?:it|this|that|(?:this|the)[ \t]+(?:reply|response|answer|assistant's[ \t]+(?:reply|response|answer)))"
    rf"(?:[ \t]+(?:a|an|a[ \t]+score[ \t]+of|a[ \t]+rating[ \t]+of|at))?[ \t]+{_BOLD}{_NUM}{_OUT_OF}(?!\w)",
    re.I,
)
_LEADING = re.compile(rf"^[ \t\n]*{_BOLD}{_NUM}{_OUT_OF}{_BOLD}(?=[ \t]*(?:$|\n|[-–—:,;]|\.(?:\s|$)))")
_LAST_LINE = re.compile(rf"(?:^|\n)[ \t]*{_BOLD}{_NUM}{_OUT_OF}{_BOLD}(?:[ \t]*\.)?[ \t\n]*$")
# What the conversation said, quoted by the judge: blanked before searching, so never read as its score.
_QUOTED = re.compile(r'"[^"\n]*"|“[^”\n]*”|`[^`\n]*`|^[ \t]*>[^\n]*', re.M)
_SEPARATORS = " \t\n-–—:,;.*_"
_UNBOLD = re.compile(r"\*\*|__")


def _blank_quotes(text: str) -> str:
    return _QUOTED.sub(lambda found: " " * len(found.group()), text)


@dataclass(frozen=True)
class _Found:
    score: float
    fraction: bool
    start: int
    end: int
    in_sentence: bool = False  # read from a sentence ("I would rate it 0.9"), not a score standing alone


def _read_number(found: re.Match, in_sentence: bool = False) -> _Found | None:
    number, over, out_of, percent = found.group(1, 2, 3, 4)
    score = float(number)
    full = over or out_of
    if full is not None:
        if float(full) <= 0:
            return None
        return _Found(score / float(full), True, found.start(), found.end(), in_sentence)
    if percent:
        return _Found(score / 100, True, found.start(), found.end(), in_sentence)
    return _Found(score, False, found.start(), found.end(), in_sentence)


def _leading_number(found: re.Match, text: str) -> bool:
    """A bare number first in an answer, followed by `. ` and more, is a numbered list, not a score."""
    over, out_of, percent = found.group(2, 3, 4)
    rest = text[found.end() :].lstrip(" \t")
    return (
        bool(over or out_of or percent)
        or "." in found.group(1)
        or not rest.startswith(".")
        or not rest[1:].strip()
    )


def _numbers(text: str) -> list[_Found]:
    searched = _blank_quotes(text)
    found = [_read_number(m) for m in _LABELLED.finditer(searched)]
    found += [_read_number(m, in_sentence=True) for m in _RATED.finditer(searched)]
    leading = _LEADING.search(searched)
    if leading is not None and _leading_number(leading, searched):
        found.append(_read_number(leading))
    last = _LAST_LINE.search(searched)
    if last is not None and any(last.group(2, 3, 4)):  # a bare number there may be the reply, quoted
        found.append(_read_number(last))
    return [item for item in found if item is not None]


_WORD = r"(pass|passed|fail|failed|yes|no)"
_LEADING_WORD = re.compile(
    rf"^[ \t\n]*{_BOLD}(?:(?:final[ \t]+)?(?:verdict|result|decision|answer)[ \t]*[:=][ \t]*{_THEN_BOLD})?"
    rf"{_WORD}{_BOLD}(?=[ \t]*(?:$|[-–—:.,;!]))",
    re.I,
)
_LABELLED_WORD = re.compile(
    rf"\b(?:final[ \t]+)?(?:verdict|result|decision)[ \t]*[:=][ \t]*{_THEN_BOLD}{_WORD}\b", re.I
)


def _words(text: str, words: dict[str, float]) -> list[_Found]:
    searched = _blank_quotes(text)
    matches = [m for m in _LABELLED_WORD.finditer(searched)]
    leading = _LEADING_WORD.search(searched)
    if leading is not None:
        matches.append(leading)
    return [
        _Found(words[m.group(1).lower()], True, m.start(), m.end())
        for m in matches
        if m.group(1).lower() in words
    ]


def _excerpt(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= READ_FROM_CHARS else text[: READ_FROM_CHARS - 1] + "…"


def _one(found: list[_Found], text: str, kind: str) -> Verdict | None:
    """The verdict of the readings found, when they agree; an unreadable one naming them when they do not."""
    if not found:
        return None
    values = {(round(item.score, 9), item.fraction) for item in found}
    if len(values) > 1:
        shown = ", ".join(f"`{_excerpt(text[item.start : item.end].strip())}`" for item in found)
        return Verdict(None, "", "unparseable", error=f"it gives several different scores ({shown})")
    first = min(found, key=lambda item: item.start)
    before = text[: first.start].rstrip(" \t\n-–—:,;*_").strip()
    after = text[first.end :].lstrip(_SEPARATORS).strip()
    reason = f"{before} {after}".strip()
    read_from = _excerpt(_UNBOLD.sub("", text[first.start : first.end]).strip(" \t\n*_").rstrip(_SEPARATORS))
    if kind == "prose" and not reason and not first.in_sentence:
        kind = "number"  # the answer is its score and nothing else
    return Verdict(first.score, reason, kind, first.fraction, read_from)


# --- the reading -------------------------------------------------------------------------------------------


def parse_verdict(text: str, *, words: dict[str, float] | None = None) -> Verdict:
    """The judge's verdict in its answer `text`. `words` maps the words a pass/fail (or yes/no) judge may
    answer with to their scores, as shares of full marks; other judges are read by number only."""
    verdict = _parse(text, words)
    verdict.raw = text
    return verdict


def _parse(text: str, words: dict[str, float] | None) -> Verdict:
    body, unclosed = strip_thinking(text)
    body = body.strip()
    thought = body != text.strip()
    whole = _from_object(_json(body), words)
    if whole is not None:
        whole.read_from = _excerpt(body) if thought else None
        return whole
    for kind, candidates in (("fenced-json", _fenced(body)), ("embedded-json", _embedded_objects(body))):
        for candidate in candidates:
            verdict = _from_object(_json(candidate), words)
            if verdict is not None:
                verdict.parsed_from, verdict.read_from = kind, _excerpt(candidate)
                return verdict
    prose = body
    verdict = _one(_numbers(prose), prose, "prose")
    if verdict is not None:
        return verdict
    if words:
        verdict = _one(_words(prose, words), prose, "words")
        if verdict is not None:
            return verdict
    if not body:
        why = (
            f"it held only {unclosed}"
            if unclosed
            else "it is empty"
            if not thought
            else "it held only thinking"
        )
        return Verdict(None, "", "unparseable", error=why)
    expected = "a JSON object with a score"
    if words:
        firsts: dict[float, str] = {}
        for word, score in words.items():
            firsts.setdefault(score, word.upper())  # PASS or FAIL, not every spelling of them
        expected += f", or {' or '.join(firsts.values())}"
    return Verdict(None, "", "unparseable", error=f"it has no score: expected {expected}")
