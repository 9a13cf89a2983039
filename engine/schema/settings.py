"""How a run calls its models and what it may spend: generation settings (`model_settings`, `judge_settings`,
`user_settings`), the response cache (`cache`) and the cost limit (`max_cost`).

Each is a suite key; `model_settings` may also be set per eval, and a launch (the form, the API, `evalsite run
--set`, `--cache`, `--max-cost`) sets them over the suite's through engine.options. What a setting does to a
request is engine.clients; the cache is engine.cache; the limit is enforced by whoever plays the run (the CLI's
runner, the workers' pump)."""

from __future__ import annotations

import math
import re
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BeforeValidator, Field, StrictBool, field_validator

from .base import StrictModel

# Header names that carry a credential (Authorization, X-Api-Key, a gateway's token, a cookie).
CREDENTIAL_HEADER = re.compile(r"authorization|api[-_]?key|token|secret|password|cookie", re.IGNORECASE)
REASONING_EFFORTS = ("none", "minimal", "low", "medium", "high", "xhigh")


class ModelSettings(StrictModel):
    """Generation settings sent with every request of one role (the model under test, the judge or the
    simulated user). Unset keys are not sent: the endpoint's own defaults apply. A key given as null is not
    sent either, and removes the key of the level it goes over (`merged`)."""

    # Too many keys to spell out in an error message, and the class's name is no word of the suite's.
    shape_in_words: ClassVar[str] = (
        "a mapping of generation settings (temperature, max_tokens, top_p, seed, stop, response_format, …)"
    )

    temperature: float | None = Field(None, ge=0.0, le=2.0)
    max_tokens: int | None = Field(None, ge=1, description="Sent as `max_tokens`.")
    max_completion_tokens: int | None = Field(
        None, ge=1, description="Sent as `max_completion_tokens` (OpenAI's reasoning models take only this)."
    )
    top_p: float | None = Field(None, ge=0.0, le=1.0)
    seed: int | None = Field(None, ge=-(2**63), lt=2**63, description="Sent as `seed` (a 64-bit integer).")
    stop: str | list[str] | None = Field(None, description="One stop sequence or a list of them.")
    response_format: Literal["text", "json_object"] | dict[str, Any] | None = Field(
        None,
        description="`json_object` (JSON mode), `text`, or OpenAI's object form, e.g. {type: json_schema, "
        "json_schema: {name, schema, strict}}.",
    )
    reasoning_effort: Literal[REASONING_EFFORTS] | None = None  # type: ignore[valid-type]
    extra_body: dict[str, Any] | None = Field(
        None, description="More fields for the request body, sent as given (over the ones above)."
    )
    extra_headers: dict[str, str] | None = Field(None, description="More HTTP headers for each request.")

    @field_validator("temperature", "max_tokens", "max_completion_tokens", "top_p", "seed", mode="before")
    @classmethod
    def _a_number(cls, value: Any) -> Any:
        # YAML's true and false would be read as 1 and 0.
        if isinstance(value, bool):
            raise ValueError("expected a number, not true or false")
        return value

    @field_validator("response_format")
    @classmethod
    def _response_format(cls, value: str | dict[str, Any] | None) -> str | dict[str, Any] | None:
        if not isinstance(value, dict):
            return value
        kind = value.get("type")
        if not isinstance(kind, str) or not kind:
            raise ValueError(
                "an object response_format needs a `type` (json_object, text or json_schema), or write "
                "json_object or text alone"
            )
        if kind == "json_schema":
            spec = value.get("json_schema")
            if not isinstance(spec, dict) or not isinstance(spec.get("name"), str) or not spec["name"]:
                raise ValueError("type json_schema needs `json_schema: {name: ..., schema: {...}}`")
            if "schema" in spec and not isinstance(spec["schema"], dict):
                raise ValueError("json_schema.schema is a JSON Schema: a mapping")
        return value

    @field_validator("extra_headers")
    @classmethod
    def _no_credential_in_clear(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        # A key belongs in the environment, not in a suite, a run's record or its page: a header named for one
        # takes its value from a secret.
        for name, text in (value or {}).items():
            if CREDENTIAL_HEADER.search(name) and "{{secret:" not in text:
                raise ValueError(
                    f"extra_headers.{name} holds a credential: write it as {{{{secret:NAME}}}} (e.g. "
                    f'"Bearer {{{{secret:GATEWAY_KEY}}}}") so its value stays in the environment'
                )
        return value

    @field_validator("extra_body")
    @classmethod
    def _finite(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and not _json_safe(value):
            raise ValueError("extra_body holds a number JSON cannot carry (.nan or .inf)")
        return value

    @field_validator("stop")
    @classmethod
    def _stop(cls, value: str | list[str] | None) -> str | list[str] | None:
        if isinstance(value, list) and not 1 <= len(value) <= 4:
            raise ValueError("give one to four stop sequences")
        return value

    def merged(self, over: ModelSettings | None) -> ModelSettings:
        """These settings with `over`'s given keys in their place (extra_body and extra_headers merged by
        key). A key `over` gives as null removes this one's: `seed: null` in an eval sends no seed, whatever
        the suite's. The null is kept in what this returns, so that merged under another level's settings
        in turn (an eval's, with a launch's over them, under the suite's) it still removes that one's."""
        if over is None:
            return self
        data = self.model_dump(exclude_unset=True)
        for key, value in over.model_dump(exclude_unset=True).items():
            if key in ("extra_body", "extra_headers") and value is not None and data.get(key) is not None:
                data[key] = {**data[key], **value}
            else:
                data[key] = value
        return ModelSettings.model_validate(data)

    def given(self) -> dict[str, Any]:
        """The keys these settings give, a null among them (it removes a setting of the level below), as
        JSON: what a launch stores and sends."""
        return self.model_dump(mode="json", exclude_unset=True)

    def is_empty(self) -> bool:
        return not self.model_dump(exclude_none=True)


def _json_safe(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(map(_json_safe, value.values()))
    if isinstance(value, list):
        return all(map(_json_safe, value))
    return True


class CacheRoles(StrictModel):
    """Which calls the response cache answers; `cache: true` is all three, and a key left out is off."""

    # `cache` also takes a boolean (_cache_roles), which the mapping's keys alone would not say.
    shape_in_words: ClassVar[str] = "true, false, or a mapping {model, judge, simulated_user, repeats}"

    model: StrictBool = Field(False, description="The model under test's replies.")
    judge: StrictBool = Field(
        False, description="Judges' verdicts (llm_judge, semantic checks, stop conditions)."
    )
    simulated_user: StrictBool = Field(False, description="The simulated user's messages.")
    repeats: StrictBool = Field(
        False, description="A calibration's `repeats` hit the cache too (off: each repeat asks the judge)."
    )


def _cache_roles(value: Any) -> Any:
    if isinstance(value, bool):
        return CacheRoles(model=value, judge=value, simulated_user=value)
    return value


CacheSetting = Annotated[
    CacheRoles | None,
    # The JSON Schema says what a suite may write, a boolean included, not what it is read into.
    BeforeValidator(_cache_roles, json_schema_input_type=bool | CacheRoles | None),
    Field(
        None,
        description="Answer repeated model calls from the response cache: true (the model under test, judges "
        "and simulated users), false, or {model, judge, simulated_user, repeats}.",
    ),
]


def _an_amount(value: Any) -> Any:
    if isinstance(value, bool):  # YAML's true would be read as $1
        raise ValueError("expected an amount in USD, not true or false")
    return value


MaxCost = Annotated[
    Annotated[float, Field(gt=0, allow_inf_nan=False)] | None,
    BeforeValidator(_an_amount),
    Field(
        None,
        description="USD: once the run has spent this much, no more conversations start (finished ones are kept).",
    ),
]
