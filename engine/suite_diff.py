"""Two versions of a suite side by side: the YAML as a line diff, and the evals added, removed and changed.

Evals are matched by id (`id`, else `eval-<n>`), as runs are compared, so a reordered or renamed eval shows
as what it is for comparisons. Plain Python (difflib), for the version diff page and anything else.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from .schema import Suite


@dataclass(frozen=True)
class Line:
    kind: str  # "same", "add", "del" or "skip" (unchanged lines left out, `text` says how many)
    old: int | None  # line number in the older version
    new: int | None
    text: str


@dataclass(frozen=True)
class SuiteDiff:
    lines: list[Line]
    added: list[str] = field(default_factory=list)  # eval ids only in the newer version
    removed: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)  # in both, written differently
    settings: list[str] = field(default_factory=list)  # top-level keys (model, judge, gates…) that changed

    @property
    def identical(self) -> bool:
        return not any(line.kind in ("add", "del") for line in self.lines)


def diff_sources(old: str, new: str, context: int = 3) -> list[Line]:
    """A unified diff of two YAML texts as numbered lines, unchanged stretches beyond `context` folded."""
    a, b = old.splitlines(), new.splitlines()
    lines: list[Line] = []
    for group in difflib.SequenceMatcher(None, a, b, autojunk=False).get_grouped_opcodes(context):
        if lines or group[0][1] > 0:
            lines.append(Line("skip", None, None, ""))
        for op, a1, a2, b1, b2 in group:
            if op == "equal":
                lines += [Line("same", a1 + i + 1, b1 + i + 1, a[a1 + i]) for i in range(a2 - a1)]
                continue
            lines += [Line("del", a1 + i + 1, None, a[a1 + i]) for i in range(a2 - a1)]
            lines += [Line("add", None, b1 + i + 1, b[b1 + i]) for i in range(b2 - b1)]
    return lines


def diff_suites(old_source: str, new_source: str, old: Suite | None, new: Suite | None) -> SuiteDiff:
    """The line diff, and when both versions validate, which evals and settings changed."""
    lines = diff_sources(old_source, new_source)
    if old is None or new is None:
        return SuiteDiff(lines)
    before = {old.eval_id(i): ev.model_dump(exclude_none=True) for i, ev in enumerate(old.evals)}
    after = {new.eval_id(i): ev.model_dump(exclude_none=True) for i, ev in enumerate(new.evals)}
    old_settings = old.model_dump(exclude={"evals"}, exclude_none=True)
    new_settings = new.model_dump(exclude={"evals"}, exclude_none=True)
    return SuiteDiff(
        lines,
        added=[key for key in after if key not in before],
        removed=[key for key in before if key not in after],
        changed=[key for key in after if key in before and before[key] != after[key]],
        settings=sorted(
            key
            for key in old_settings.keys() | new_settings.keys()
            if old_settings.get(key) != new_settings.get(key)
        ),
    )
