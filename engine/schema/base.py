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
