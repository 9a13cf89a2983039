"""Template filters for the run pages, so a mapping kept in Python is not written again in a template."""

from django import template

from runs import display

register = template.Library()


@register.filter
def symbol(status: str) -> str:
    """A status as its symbol: `{{ "passed"|symbol }}` is ✓ (runs.display.STATUS_SYMBOLS)."""
    return display.symbol(status)
