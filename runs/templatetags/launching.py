"""What a suite's pages show of runs: the launch panel, the suite's recent runs, each suite's last run.
Suites' templates load these, so suites' code never imports runs."""

from django import template

from .. import launching, selectors

register = template.Library()

RECENT_RUNS = 8


@register.inclusion_tag("suites/_launch.html", takes_context=True)
def launch_panel(context) -> dict:
    """The editor's launch panel: the refused launch's form and error when there was one, else a fresh form
    for the versions the editor lists."""
    request, spec = context["request"], context.get("latest_spec")
    form = context.get("launch_form")
    if form is None:
        numbers = [version.number for version in context.get("versions", [])]
        initial = {"version": numbers[0] if numbers else None}  # the concurrency's: launch_cap's
        form = launching.LaunchForm(initial=initial, versions=numbers)
    return {
        "request": request,
        "csrf_token": context.get("csrf_token"),
        "suite": context["suite"],
        "latest_spec": spec,
        "can_edit": context.get("can_edit", False),
        "launch_form": form,
        "launch_error": context.get("launch_error"),
        "launch_workers": selectors.live_workers(),
        **launching.panel(request, spec, form, context["suite"].project_id),
    }


@register.simple_tag(takes_context=True)
def recent_runs(context, **filters) -> list:
    """The user's newest runs matching `filters` (`suite_version__suite=suite`, `suite_version=version`)."""
    return selectors.recent_runs(context["request"].user, RECENT_RUNS, **filters)


@register.simple_tag(takes_context=True)
def with_last_run(context, suites):
    """The suites annotated with the user's last run of each (last_run_id, last_run_status, last_run_at)."""
    return selectors.with_last_run(suites, context["request"].user)
