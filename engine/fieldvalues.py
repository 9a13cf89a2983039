"""Reading a field's value as a number or as a calendar date, for `field_equals` with `tolerance` or
`date_formats`.

A date format is written with YYYY, YY, MMMM/MMM (a month's name), MM/M, DD/D, and HH, mm, ss for a time
that is read and ignored; anything else is literal. ISO 8601 is always understood, then the formats in
their order: the first that reads the text wins."""

from __future__ import annotations

import math
import re
from datetime import date, datetime

MONTHS = {
    name: number
    for number, names in enumerate(
        (
            ("jan", "january"),
            ("feb", "february"),
            ("mar", "march"),
            ("apr", "april"),
            ("may",),
            ("jun", "june"),
            ("jul", "july"),
            ("aug", "august"),
            ("sep", "sept", "september"),
            ("oct", "october"),
            ("nov", "november"),
            ("dec", "december"),
        ),
        start=1,
    )
    for name in names
}
_PARTS = {
    "YYYY": r"(?P<year>\d{4})",
    "YY": r"(?P<short_year>\d{2})",
    "MMMM": r"(?P<month_name>[A-Za-z]{3,9})",
    "MMM": r"(?P<month_name>[A-Za-z]{3,9})",
    "MM": r"(?P<month>\d{1,2})",
    "M": r"(?P<month>\d{1,2})",
    "DD": r"(?P<day>\d{1,2})",
    "D": r"(?P<day>\d{1,2})",
    "HH": r"\d{1,2}",
    "mm": r"\d{1,2}",
    "ss": r"\d{1,2}(?:\.\d+)?",
    "Z": r"(?:Z|[+-]\d{2}:?\d{2})?",
}
_FORMAT_PART = re.compile("|".join(sorted(_PARTS, key=len, reverse=True)))


def as_number(value: object) -> float | None:
    """A JSON number, or text that reads as one ("1,234.50" does not; "1234.50" does)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
    else:
        return None
    return number if math.isfinite(number) else None


def within(actual: float, expected: float, tolerance: float, relative: bool) -> bool:
    """|actual - expected| within the tolerance; a relative one is a share of |expected| (of 1 at 0)."""
    difference = abs(actual - expected)
    if relative and expected != 0:
        difference /= abs(expected)
    return difference <= tolerance + 1e-12


def format_pattern(written: str) -> re.Pattern:
    pieces, at = [], 0
    for token in _FORMAT_PART.finditer(written):
        pieces.append(re.escape(written[at : token.start()]))
        pieces.append(_PARTS[token.group()])
        at = token.end()
    pieces.append(re.escape(written[at:]))
    return re.compile("".join(pieces), re.IGNORECASE)


def as_date(value: object, formats: list[str]) -> date | None:
    """The calendar date a value writes, in ISO 8601 or one of the formats; None when none reads it."""
    if not isinstance(value, str):
        return None
    text = value.strip()
    try:
        return datetime.fromisoformat(text).date()
    except ValueError:
        pass
    for written in formats:
        found = format_pattern(written).fullmatch(text)
        if found is None:
            continue
        parts = found.groupdict()
        month = MONTHS.get((parts.get("month_name") or "").lower()) or int(parts.get("month") or 0)
        if parts.get("year"):
            year = int(parts["year"])
        elif parts.get("short_year"):
            year = 2000 + int(parts["short_year"])
        else:
            continue
        try:
            return date(year, month, int(parts.get("day") or 0))
        except (ValueError, TypeError):
            continue
    return None
