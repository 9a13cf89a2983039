"""Templates never spell a kind out: statuses, styles, termination kinds and check types are compared in Python
(runs/models.py's is_* properties, runs/display/, the runs_display filters), where a renamed value fails
loudly instead of silently never matching."""

from __future__ import annotations

import re
from datetime import timedelta

from django.utils import timezone

from engine.clients import RATE_LIMIT_WAIT
from engine.outcomes import Status, TerminationKind
from engine.results import CRITERION
from engine.schema import Style
from runs import display
from tests.conftest import ROOT

KINDS = {
    *(s.value for s in Status),
    *(s.value for s in Style),
    *(k.value for k in TerminationKind),
    CRITERION,
}
COMPARISON = re.compile(
    r"\{%[^%]*?(?:==|!=)\s*[\"']([^\"']+)[\"'][^%]*%\}|\{%[^%]*?[\"']([^\"']+)[\"']\s*(?:==|!=)"
)


def test_no_template_compares_against_a_kind():
    spelled = []
    for path in sorted((ROOT / "templates").rglob("*.html")):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in COMPARISON.finditer(line):
                value = match.group(1) or match.group(2)
                if value in KINDS:
                    spelled.append(f"{path.relative_to(ROOT)}:{number}: {value!r}")
    assert spelled == []


def test_the_rate_limit_wait_is_told_apart_by_its_kind_not_by_how_its_text_starts():
    now = timezone.now()
    until = now + timedelta(seconds=8)
    assert display.waiting(RATE_LIMIT_WAIT, until, now)["text"] == "waiting for rate limit (retry in 8 s)"
    other = display.waiting("waiting room closed (HTTP 503)", until, now)
    assert other["text"] == "waiting room closed (HTTP 503), retry in 8 s" and not other["parenthesised"]
