"""Template filters for the run pages, so a mapping kept in Python is not written again in a template."""

from django import template

from runs import display
from runs.models import Status

register = template.Library()


@register.filter
def symbol(status: str) -> str:
    """A status as its symbol: `{{ "passed"|symbol }}` is ✓ (runs.display.STATUS_SYMBOLS)."""
    return display.symbol(status)


@register.filter
def pass_symbol(passed: bool) -> str:
    """A check's or a grade's outcome as its symbol: ✓ when it passed, ✗ when it did not."""
    return display.symbol(Status.PASSED if passed else Status.FAILED)


@register.filter
def item(mapping: dict, key):
    """`{{ mapping|item:key }}`: a dict's value for a key a template computed (None when absent)."""
    return mapping.get(key) if mapping else None
