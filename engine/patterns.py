"""User regular expressions, run with a time limit over a bounded length of text.

Every pattern a suite brings (a `regex` check, a `pattern` extractor, a `regex_match` ground truth, a stop
condition's check, a `match` glob) runs here. Suites promise Python `re` syntax, so a pattern is validated by
the standard library's parser, whose error messages users already know. It then runs on the `regex`
package, which reads the same syntax and adds what `re` lacks: a timeout on each match. A catastrophic
pattern such as `(a|a)*$` against "aaa…a!" gives up after EVALSITE_REGEX_TIMEOUT_SECONDS with
"regex took too long" instead of holding a worker (and its lease renewals) forever. RE2 would need no
timeout, but it has no lookarounds or backreferences, which `re` patterns in existing suites may use.

`regex` unrolls counted repeats when it compiles: a large count takes gigabytes, and some nested repeats of
a few dozen characters crash it. So before a pattern reaches it, its unrolled size and nesting are bounded on
the standard parser's tree.
"""

from __future__ import annotations

import os
import re
import re._constants as sre_constants  # the standard library's own parse tree: the syntax suites promise
import re._parser as sre_parser
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import regex


def _env_number(name: str, default: float, kind: type) -> float:
    value = os.environ.get(name, "").strip()
    if not value:
        return default
    try:
        number = kind(value)
    except ValueError:
        raise ValueError(f"{name} must be a number, not {value!r}") from None
    if number <= 0:
        raise ValueError(f"{name} must be greater than 0, not {value!r}")
    return number


# How long one match may take, and how much of a text it looks at (a longer reply is cut to this length).
TIMEOUT_SECONDS: float = _env_number("EVALSITE_REGEX_TIMEOUT_SECONDS", 1.0, float)
MAX_CHARS: int = int(_env_number("EVALSITE_REGEX_MAX_CHARS", 1_000_000, int))

# Elements of a pattern once its repeats are unrolled (`a{1000}` counts 1,001): the bound keeps the worst
# pattern's compile time and memory tolerable, once per worker (compiled patterns are cached), while
# hand-written patterns stay far below it.
MAX_SIZE = 100_000
MAX_NESTING = 100  # groups within groups; the parsers recurse on them

_REPEATS = {sre_constants.MAX_REPEAT, sre_constants.MIN_REPEAT, sre_constants.POSSESSIVE_REPEAT}


def shown(pattern: str, limit: int = 80) -> str:
    """The pattern as messages name it, shortened."""
    return pattern if len(pattern) <= limit else pattern[: limit - 1] + "…"


class RegexFailure(Exception):
    """A user pattern that could not give an answer. The message says why and names the pattern."""


class InvalidPattern(RegexFailure, ValueError):
    def __init__(self, pattern: str, reason: str, name: str | None = None) -> None:
        self.pattern, self.reason = pattern, reason
        super().__init__(
            f"{name} cannot run: {reason}"
            if name
            else f"invalid regular expression /{shown(pattern)}/: {reason}"
        )


class RegexTimeout(RegexFailure):
    def __init__(self, name: str, chars: int) -> None:
        super().__init__(
            f"regex took too long: {name} ran over {TIMEOUT_SECONDS:g} s on {chars:,} characters"
        )


def _subpatterns(av) -> list[sre_parser.SubPattern]:
    # A node's arguments hold its subpatterns directly, in a tuple, or (for `|`) in a list inside a tuple.
    if isinstance(av, sre_parser.SubPattern):
        return [av]
    found = []
    for item in av if isinstance(av, tuple | list) else ():
        if isinstance(item, sre_parser.SubPattern):
            found.append(item)
        elif isinstance(item, list):
            found.extend(branch for branch in item if isinstance(branch, sre_parser.SubPattern))
    return found


def _check_size(pattern: str, parsed: sre_parser.SubPattern) -> None:
    """Walks the tree with a stack of its own (user data must not drive our recursion)."""
    size = 0
    stack = [(parsed, 1, 1)]
    while stack:
        sub, weight, depth = stack.pop()
        if depth > MAX_NESTING:
            raise InvalidPattern(pattern, f"groups are nested more than {MAX_NESTING} deep")
        for op, av in sub:
            size += weight
            if size > MAX_SIZE:
                raise InvalidPattern(
                    pattern,
                    f"too large: with its repeats unrolled it has over {MAX_SIZE:,} elements "
                    "(a{1000} counts about 1,000)",
                )
            inner = weight * (av[0] + 1) if op in _REPEATS else weight
            stack.extend((child, inner, depth + 1) for child in _subpatterns(av))


@lru_cache(maxsize=1024)
def validate(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """The pattern compiled by `re` (for its groups), or InvalidPattern saying why it cannot run.

    Kept per pattern: a suite often gives many evals the same pattern, and parsing it again for each is most
    of the time such a suite takes to validate. A pattern refused is not kept (lru_cache keeps no raise)."""
    if len(pattern) > MAX_SIZE:
        raise InvalidPattern(pattern, f"too large: over {MAX_SIZE:,} characters")
    try:
        compiled = re.compile(pattern, flags)
        _check_size(pattern, sre_parser.parse(pattern, flags))
    except re.error as exc:
        raise InvalidPattern(pattern, str(exc)) from None
    except OverflowError:  # a{4294967296}
        raise InvalidPattern(pattern, "a repeat count is too large") from None
    except RecursionError:
        raise InvalidPattern(pattern, f"groups are nested more than {MAX_NESTING} deep") from None
    return compiled


@lru_cache(maxsize=512)
def _compiled(pattern: str, flags: int) -> regex.Pattern:
    # Imported at the first pattern a suite brings: most suites bring none, and every command would pay for it.
    import regex

    validate(pattern, flags)
    try:
        return regex.compile(pattern, flags)
    except (regex.error, OverflowError, RecursionError, MemoryError) as exc:
        raise InvalidPattern(pattern, str(exc) or type(exc).__name__) from None


def search(pattern: str, text: str, flags: int = 0, *, name: str | None = None) -> regex.Match | None:
    """`re.search`, within the time limit and over the first MAX_CHARS characters of the text.

    Raises RegexTimeout or InvalidPattern (both RegexFailure); `name` is how messages call the pattern.
    """
    try:
        compiled = _compiled(pattern, flags)
    except InvalidPattern as exc:
        raise InvalidPattern(pattern, exc.reason, name) from None
    text = text[:MAX_CHARS]
    try:
        # concurrent: other threads of the worker (lease renewals, other conversations) run meanwhile.
        return compiled.search(text, concurrent=True, timeout=TIMEOUT_SECONDS)
    except TimeoutError:
        raise RegexTimeout(name or f"/{shown(pattern)}/", len(text)) from None
