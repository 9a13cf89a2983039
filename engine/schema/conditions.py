"""Stop conditions of simulated conversations (`simulate.stop_when`): combinators, `after_turns`,
`natural_language`, and any check of the check vocabulary."""

from __future__ import annotations

from pydantic import Field, model_validator

from .base import StrictModel
from .checks import CheckFields


class NaturalLanguage(StrictModel):
    """The judge answers a yes/no question about the conversation with a confidence."""

    prompt: str = Field(description="A yes/no question, e.g. Has the booking been confirmed?")
    threshold: float = Field(0.7, ge=0.0, le=1.0, description="Confidence needed to count as met.")
    model: str | None = Field(None, description="Judge model; defaults to the suite's `judge`.")
    temperature: float | None = Field(
        None, ge=0.0, le=2.0, description="Judge temperature; defaults to the suite's `judge_temperature`."
    )


class Condition(CheckFields):
    """When a simulated conversation stops: a condition, a combinator, or any check of the vocabulary."""

    all_: list[Condition] | None = Field(None, alias="all", min_length=1, description="Every member holds.")
    any_: list[Condition] | None = Field(None, alias="any", min_length=1, description="Some member holds.")
    not_: Condition | None = Field(None, alias="not", description="The member does not hold.")
    after_turns: int | None = Field(None, ge=1, description="The agent has replied this many times.")
    natural_language: NaturalLanguage | None = None

    @model_validator(mode="after")
    def _one_kind(self) -> Condition:
        keys = self.keys()
        if len(keys) != 1:
            found = " and ".join(keys) if keys else "nothing"
            raise ValueError(
                f"a condition is exactly one of {', '.join(CONDITION_KEYS)} or a check; found {found}"
            )
        return self

    def keys(self) -> list[str]:
        own = [key for key, name in CONDITION_FIELDS.items() if getattr(self, name) is not None]
        return own + [key for key in CheckFields.model_fields if getattr(self, key) is not None]

    @property
    def kind(self) -> str:
        return self.keys()[0]


Condition.model_rebuild()

# A condition's own keys, as written -> the field holding it; the check vocabulary's come from CheckFields.
CONDITION_FIELDS = {
    field.alias or name: name
    for name, field in Condition.model_fields.items()
    if name not in CheckFields.model_fields
}
CONDITION_KEYS = tuple(CONDITION_FIELDS)
