"""Template filters for the run pages, so a mapping kept in Python is not written again in a template."""

from django import template
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from engine import cost
from engine.cost import spent
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


@register.simple_tag
def usd(amount, unpriced, digits: int = 4) -> str:
    """`{% usd cost run.unpriced %}`: an amount the run spent, as far as prices tell (engine.cost.spent):
    "$0.0123"; "at least $0.0123", or "unknown", when some endpoint it calls has no prices."""
    return spent(amount or 0.0, unpriced or (), digits) or "unknown"


@register.simple_tag
def saved(amount, unpriced, digits: int = 6) -> str:
    """`{% saved turn.saved_cost run.unpriced %}`: what calls answered from the response cache saved, as far
    as prices tell: "$0.008000 saved", "at least $0.008000 saved", or "cost unknown"."""
    amount = spent(amount or 0.0, unpriced or (), digits)
    return f"{amount} saved" if amount else "cost unknown"


@register.filter
def no_prices(unpriced) -> str:
    """Why a run's costs are unknown: "no prices for endpoint fake" (engine.cost.no_prices)."""
    return cost.no_prices(unpriced) if unpriced else ""


# The two mark strips, written here once rather than as template partials: a run page draws many rows of turn
# marks and many iteration marks, and an include per row would be much of its rendering time. Every value goes
# through format_html's escaping.


@register.simple_tag
def turn_marks(marks, limit: int = 0, linked: bool = False) -> str:
    """A scripted conversation's graded turns, ✓ or ✗ each (runs.display.Mark), side by side. `linked`: each
    mark links to its turn (a transcript); `limit`: at most this many, then an ellipsis (the run's table)."""
    shown = marks[:limit] if limit else marks
    if linked:
        pattern = '<a href="#turn-{0}" class="mark mark-{1}" title="{2}" aria-label="{2}">{3}</a>'
    else:
        pattern = '<i class="mark mark-{1}" title="{2}">{3}</i>'
    html = format_html_join(
        "", pattern, ((m.turn, "pass" if m.passed else "fail", m.title, m.symbol) for m in shown)
    )
    if limit and len(marks) > limit:
        html += mark_safe('<i class="mark">…</i>')
    return html


@register.simple_tag
def iteration_marks(marks) -> str:
    """A repeated eval's iterations, one linked mark each (runs.display.IterationMark): the representative one
    ringed and, in a transcript's switcher, the current one marked."""
    pattern = '<a href="{0}" class="imark imark-{1}{2}{3}" title="{4}" aria-label="{4}"{5}>{6}</a>'
    current = mark_safe(' aria-current="page"')
    return format_html_join(
        "",
        pattern,
        (
            (
                m.url,
                m.status,
                " is-rep" if m.representative else "",
                " is-current" if m.current else "",
                m.title,
                current if m.current else "",
                m.symbol,
            )
            for m in marks
        ),
    )


@register.filter
def status_words(run) -> str:
    """`{{ run|status_words }}`: "stopped: cost limit $5.00 reached" for a run its cost limit stopped, else its
    status (runs.display.status_words)."""
    return display.status_words(run)
