"""What a launch sets over its suite: generation settings, the response cache and the cost limit.

The launch form, the API and `evalsite run` (`--set`, `--cache`, `--max-cost`) each build RunOptions; a run
stores them (runs.models.Run.options) and every process that plays it applies them to the suite it loads,
so the engine only ever reads the suite's own keys (engine.schema.settings).
"""

from __future__ import annotations

from pydantic import Field

from .schema import Suite
from .schema.base import StrictModel
from .schema.settings import CacheSetting, MaxCost, ModelSettings


class RunOptions(StrictModel):
    """A launch's settings over its suite's; None (or an empty object) leaves the suite's as they are."""

    model_settings: ModelSettings | None = None
    judge_settings: ModelSettings | None = None
    user_settings: ModelSettings | None = None
    cache: CacheSetting = None
    max_cost: MaxCost = None
    label: str | None = Field(
        None, max_length=100, description="A matrix variant's name, e.g. `gpt-4o-mini t=0.7`."
    )

    def is_empty(self) -> bool:
        return not self.model_dump(exclude_none=True)

    def stored(self) -> dict:
        """As JSON, as a run stores these options and a launch sends them: what is set, and each setting given
        as null (which removes the suite's, engine.schema.settings.ModelSettings.merged)."""
        data = self.model_dump(mode="json", exclude_none=True)
        for key in SETTINGS_KEYS:
            settings = getattr(self, key)
            if settings is not None:
                data[key] = settings.given()
        return data


SETTINGS_KEYS = ("model_settings", "judge_settings", "user_settings")


def apply(suite: Suite, options: RunOptions | dict | None) -> Suite:
    """The suite as a run with these options plays it: each settings key merged over the suite's key by key
    (`model_settings` over each eval's own too; a key given as null removes theirs), `cache` and `max_cost`
    in place of the suite's when given."""
    if options is None:
        return suite
    if isinstance(options, dict):
        options = RunOptions.model_validate(options)
    if options.is_empty():
        return suite
    update = {}
    for key in SETTINGS_KEYS:
        over = getattr(options, key)
        if over is not None:
            own = getattr(suite, key)
            update[key] = own.merged(over) if own is not None else over
    over = options.model_settings
    if over is not None and any(ev.model_settings is not None for ev in suite.evals):
        # A launch's settings go over an eval's own too: what the launch asks is what every call is sent.
        update["evals"] = [
            ev.model_copy(update={"model_settings": ev.model_settings.merged(over)})
            if ev.model_settings is not None
            else ev
            for ev in suite.evals
        ]
    if options.cache is not None:
        update["cache"] = options.cache
    if options.max_cost is not None:
        update["max_cost"] = options.max_cost
    return suite.model_copy(update=update) if update else suite
