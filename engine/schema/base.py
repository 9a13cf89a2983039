"""What every part of the suite format shares: strict models (unknown keys are errors), and errors that
name the place in a suite where a rule across its parts was broken."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class LocatedError(ValueError):
    """A rule across a suite's parts, broken at one place in it: `loc` is that place's path below the model
    that raised it, so the loader reports the place's line and column rather than the model's."""

    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        super().__init__(message)
        self.loc = loc


class StrictModel(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def user_text(value: str | None, key: str) -> str | None:
    """A user message the suite sends must say something: a blank one asks the model nothing (and most
    endpoints refuse an empty message)."""
    if value is not None and not value.strip():
        raise ValueError(f"`{key}` is blank: a user message needs text")
    return value
