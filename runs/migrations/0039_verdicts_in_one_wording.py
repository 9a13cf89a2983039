"""Rewords the verdicts of scripted-kind conversations and of those under named graders into the wording the
engine writes (engine.text): without the outcome their status says, and without parentheses, which the
terminal report puts around a verdict.

    passed: 2/2 passed                                  → every turn passed: 2 of 2
    failed: 2/3 passed (score 0.67, needs 1)            → 2 of 3 turns passed, score 0.67 < 1.00
    passed: weighted score 0.67 (needs 0): c 0.67✗; 2/3 turns passed
                                                        → weighted score 0.67 ≥ 0.00: c 0.67✗; 2 of 3 turns passed
    failed: 1/2 graders passed (any): …                 → 1 of 2 graders passed, needs one: …

So a run stored earlier reads as a new one does on the run page, the transcript, a comparison of the two and
the exports. A grader's own score keeps its ✓ or ✗, as its threshold is not in the words. Any other verdict
(a tree's "passed on turn 2", an error) is left as it is, and so is what follows a reviewer's "(reviewed: …)".
"""

import re

from django.db import migrations
from django.db.models import Q

from engine.text import against, line_figure, turns_passed

OUTCOME = re.compile(r"(passed|failed): (.*)", re.S)
COUNTED = re.compile(
    r"(?P<passed>\d+)/(?P<total>\d+) passed(?P<stopped>, stopped after turn \d+)?"
    r"(?: \(score (?P<score>[0-9.]+), needs (?P<line>[0-9.e+-]+)\))?(?P<rest>.*)",
    re.S,
)
WEIGHTED = re.compile(r"weighted score (?P<score>[0-9.]+) \(needs (?P<line>[0-9.e+-]+)\)(?P<rest>.*)", re.S)
GRADERS = re.compile(r"(?P<passed>\d+)/(?P<total>\d+) graders passed(?P<any> \(any\))?(?P<rest>.*)", re.S)
WITH_TURNS = re.compile(r"score (?P<score>[0-9.]+) \(needs (?P<line>[0-9.e+-]+)\), the (?P<rest>.*)", re.S)
REQUIRED = re.compile(r" \(required ([^()]+) failed\)")
TURNS = re.compile(r"; (\d+)/(\d+) turns passed")
CHECKS = re.compile(r"; failed: (\d+/\d+ passed.*?\(score [0-9.]+, needs [0-9.e+-]+\))")


def reworded(text: str, score: float | None = None, turn_count: int | None = None) -> str:
    """A stored verdict in the engine's wording; `score` and `turn_count` are the conversation's, which tell a
    score against its line more finely than its two decimals, and whether every turn was a graded one."""
    found = OUTCOME.fullmatch(text)
    if found is None:
        return text
    outcome, rest = found.groups()
    counted = COUNTED.fullmatch(rest)
    if counted is not None:
        return _counted(counted, outcome, score, turn_count)
    for pattern, shape in ((WEIGHTED, _weighted), (GRADERS, _graders), (WITH_TURNS, _with_turns)):
        graded = pattern.fullmatch(rest)
        if graded is not None:
            words = shape(graded, outcome, score)
            words = REQUIRED.sub(r", required \1 failed", words)
            words = TURNS.sub(lambda m: f"; {turns_passed(int(m[1]), int(m[2]))}", words)
            return CHECKS.sub(lambda m: f"; checks: {reworded(f'failed: {m[1]}', None, turn_count)}", words)
    return text


def _against(shown: str, line: str, score: float | None, label: str, short: bool) -> str:
    """The score beside its line, the conversation's own score when known, else the one in the words;
    `short`: a failed verdict whose only reason is its score, which fell short even where two decimals, or a
    rounding error the engine now forgives, would say otherwise."""
    value, exact = float(line), float(shown) if score is None else score
    if not short:
        return against(exact, value, label)
    digits = 2
    while digits < 6 and round(exact, digits) >= value:
        digits += 1
    return f"{label} {exact:.{digits}f} < {line_figure(value)}"


def _counted(found: re.Match, outcome: str, score: float | None, turn_count: int | None) -> str:
    passed, total = int(found["passed"]), int(found["total"])
    noun = "turn" if turn_count is None or total == turn_count else "graded turn"
    parts = [turns_passed(passed, total, noun)]
    if found["stopped"]:
        parts.append(found["stopped"].removeprefix(", "))
    if found["score"] is not None:
        short = outcome == "failed" and not found["stopped"]
        parts.append(_against(found["score"], found["line"], score, "score", short))
    elif passed < total and score is not None:
        parts.append(f"score {score:.2f}")  # the line it passed is not in the words
    return ", ".join(parts) + found["rest"]


def _weighted(found: re.Match, outcome: str, score: float | None) -> str:
    return _against(found["score"], found["line"], score, "weighted score", False) + found["rest"]


def _graders(found: re.Match, outcome: str, score: float | None) -> str:
    passed, total, rest = int(found["passed"]), int(found["total"]), found["rest"]
    if total == 1:  # one grader: its score says it
        return rest.removeprefix(": ")
    if found["any"]:
        return f"{passed} of {total} graders passed, {'one is enough' if passed else 'needs one'}{rest}"
    return ("every grader passed" if passed == total else f"{passed} of {total} graders passed") + rest


def _with_turns(found: re.Match, outcome: str, score: float | None) -> str:
    return _against(found["score"], found["line"], score, "score", False) + ", the " + found["rest"]


def reword_stored(apps, schema_editor):
    Conversation = apps.get_model("runs", "Conversation")
    fields = ("verdict", "reason", "original", "score", "turn_count")
    earlier = r"^(passed|failed): "
    rows = Conversation.objects.filter(Q(verdict__regex=earlier) | Q(reason__regex=earlier)).only(*fields)
    batch = []
    for row in rows.iterator(chunk_size=2000):
        row.verdict = reworded(row.verdict, row.score, row.turn_count)[:300]
        row.reason = reworded(row.reason, row.score, row.turn_count)[:300]
        if row.original:
            before = row.original.get("score")
            row.original = {
                **row.original,
                **{
                    key: reworded(row.original[key], before, row.turn_count)[:300]
                    for key in ("verdict", "reason")
                    if isinstance(row.original.get(key), str)
                },
            }
        batch.append(row)
        if len(batch) >= 1000:
            Conversation.objects.bulk_update(batch, ["verdict", "reason", "original"])
            batch = []
    Conversation.objects.bulk_update(batch, ["verdict", "reason", "original"])


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0038_run_unpriced_from_turns"),
    ]

    operations = [
        migrations.RunPython(reword_stored, migrations.RunPython.noop, elidable=True),
    ]
