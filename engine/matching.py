"""Text matching shared by checks and the mock endpoint."""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=1024)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    # Only * and ? are special; brackets and the rest stay literal so prices like "[1]" match themselves.
    parts = ["\\A"]
    for char in pattern:
        if char == "*":
            parts.append(".*")
        elif char == "?":
            parts.append(".")
        else:
            parts.append(re.escape(char))
    parts.append("\\Z")
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL)


def glob_match(pattern: str, text: str) -> bool:
    """Whole-text glob, case-insensitive; `*` spans newlines. "*105*" means "contains 105"."""
    return _glob_regex(pattern).match(text) is not None
