"""pydantic's validation errors, as the author of a suite reads them.

pydantic reports a union field once per member ("criteria.str: Input should be a valid string",
"criteria.list[Criterion]: Input should be a valid list") and names types the way Python does ("a valid
dictionary or instance of JudgeSpec"). A reader wants one problem per place, in the file's words:
`criteria: expected a string, or a list of {name, criteria, weight}; found the number 3`. The shapes are
read from the schema's annotations, so a new field or union member is described without a table to update.

When a value plainly picked one member of a union (a list for `str | list[Criterion]`), that member's own
errors are the precise ones (`criteria[0].tone: unknown key`) and the other members' are dropped.

An API request's body is read the same way (`sent_errors`): each error at the path of the field sent.
"""

from __future__ import annotations

import datetime
import difflib
import functools
import re
import types
import typing
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from . import schema

Path = tuple[str | int, ...]

# pydantic's error types that say only "not the right type": the shape accepted says more.
TYPE_ERRORS = {
    "string_type",
    "int_type",
    "int_parsing",
    "int_from_float",
    "float_type",
    "float_parsing",
    "bool_type",
    "bool_parsing",
    "list_type",
    "dict_type",
    "model_type",
    "model_attributes_type",
}
# pydantic's bound errors: the word for the bound, and the key of its limit in the error's context.
BOUNDS = {
    "greater_than": ("greater than", "gt"),
    "greater_than_equal": ("at least", "ge"),
    "less_than": ("less than", "lt"),
    "less_than_equal": ("at most", "le"),
}
# A model with more keys than this is named ("a check") rather than spelled out ("{name, criteria, weight}").
MAX_KEYS_SHOWN = 7
FLOW_SPLIT_HINT = "quote the text: a comma inside {...} starts a new key"


@dataclass(frozen=True)
class Readable:
    loc: Path  # where it is in the file as written (no union member names)
    message: str
    at_key: bool = False  # locate at the key (an unknown key), not at its value


def readable_errors(
    exc: ValidationError, model: type[BaseModel], raw: object, flow_split: frozenset[Path] = frozenset()
) -> list[Readable]:
    """One readable problem per place. `raw` is the data validated against `model`; `flow_split` holds the
    paths of keys that are text cut off by a comma in a `{...}` flow mapping."""
    plain: list[tuple[dict, Path]] = []
    unions: dict[Path, list[tuple[str, dict, Path]]] = {}
    for error in exc.errors():
        located = (error.get("ctx") or {}).get("error")
        extra = located.loc if isinstance(located, schema.LocatedError) else ()
        loc, union_at, member = _split_loc((*error["loc"], *extra), raw)
        if union_at is None:
            plain.append((error, loc))
        else:
            unions.setdefault(loc[:union_at], []).append((member, error, loc))
    out = [_readable(error, loc, model, raw, flow_split) for error, loc in plain]
    for point, members in unions.items():
        value = _value_at(raw, point)
        chosen = [(error, loc) for member, error, loc in members if _member_kind(member) == _kind(value)]
        if chosen:
            out += [_readable(error, loc, model, raw, flow_split) for error, loc in chosen]
        else:
            annotation = annotation_at(model, point)
            message = (
                _expected(annotation, value)
                if annotation is not None
                else "; ".join(dict.fromkeys(_pydantic_message(error) for _, error, _ in members))
            )
            out.append(Readable(point, message))
    return out


def _readable(error: dict, loc: Path, model: type[BaseModel], raw: object, flow_split: frozenset) -> Readable:
    kind = error["type"]
    if kind == "extra_forbidden":
        message = unknown_key_message(str(loc[-1]))
        if loc in flow_split:
            message += f"; {FLOW_SPLIT_HINT}"
        return Readable(loc, message, at_key=True)
    if kind == "missing":
        holder = _members(annotation_at(model, loc[:-1]))
        own = getattr(holder[0], "shape_in_words", None) if len(holder) == 1 else None
        if isinstance(own, str):  # a key the file never writes (an extractor's `kind`): say what to write
            return Readable(loc[:-1], f"expected {own}")
        return Readable(loc, f"`{loc[-1]}` is required" if loc else "required")
    written = _written(loc, raw)
    if kind in TYPE_ERRORS:
        annotation = annotation_at(model, written)
        if annotation is not None:
            return Readable(written, _expected(annotation, _value_at(raw, written)))
    message = error_words(error)
    # A hint only for a clear typo: a short or partial value matches several (`last`: last_turn, last_assistant).
    if kind == "literal_error" and isinstance(error.get("input"), str) and len(error["input"]) >= 4:
        choices = [
            str(value) for member in _members(annotation_at(model, loc)) for value in _literals(member)
        ]
        hint = difflib.get_close_matches(error["input"], choices, n=1, cutoff=0.75)
        if hint:
            message += f" (did you mean `{hint[0]}`?)"
    return Readable(written, message)


def _literals(annotation: Any) -> tuple:
    return typing.get_args(annotation) if typing.get_origin(annotation) is Literal else ()


# How pydantic names a union member that holds no container: a value of another kind did not pick it.
SCALAR_MEMBERS = ("str", "int", "float", "bool", "none")


def sent_errors(errors: Iterable[dict], sent: object) -> list[Readable]:
    """pydantic's errors over data a user sent that is no suite (a request's JSON body, `sent`), each at its
    place as sent: the union members pydantic names in a location left out, and of a union's errors those of
    the member the value picked (a list for `str | list[str]`), as readable_errors does for a suite; in
    pydantic's words, as `errors` may have lost the values they were about. `sent` None: locations are read
    as they are (a query's parameters)."""
    out: list[Readable] = []
    unions: dict[Path, list[tuple[str, dict, Path]]] = {}
    for error in errors:
        loc, union_at, member = _split_loc(tuple(error["loc"]), sent)
        if union_at is None:
            out.append(Readable(loc, _pydantic_message(error)))
        else:
            unions.setdefault(loc[:union_at], []).append((member, error, loc))
    for point, members in unions.items():
        value = _kind(_value_at(sent, point))
        chosen = [(error, loc) for member, error, loc in members if _sent_kind(member) == value]
        if chosen:
            out += [Readable(loc, _pydantic_message(error)) for error, loc in chosen]
        else:
            out.append(Readable(point, "; ".join(dict.fromkeys(_pydantic_message(e) for _, e, _ in members))))
    return [Readable(item.loc, _NAMED_TYPE.sub("", item.message)) for item in dict.fromkeys(out)]


# pydantic's "a valid dictionary or instance of CacheRoles": the class is ours, not a word of what was sent.
_NAMED_TYPE = re.compile(r" or instance of \w+")


def _sent_kind(tag: str) -> str:
    """A union member's kind from pydantic's name for it: a list, a scalar, else a mapping (a model, as
    named or wrapped by its validator: "function-wrap[_run_root_validator()]")."""
    if tag.startswith("list["):
        return "list"
    if tag in SCALAR_MEMBERS or tag.startswith("literal["):
        return "member-scalar"  # never a value's kind: a scalar that failed is said for the whole union
    return "mapping"


def _pydantic_message(error: dict) -> str:
    return error["msg"].removeprefix("Value error, ")


def error_words(error: dict) -> str:
    """One of pydantic's errors in a suite author's words, without its place: a bound says the number
    allowed and the one found ("expected a number at most 2; found the number 9")."""
    if error["type"] in BOUNDS:
        words, key = BOUNDS[error["type"]]
        limit = error["ctx"][key]
        limit = f"{limit:g}" if isinstance(limit, float) else limit
        return f"expected a number {words} {limit}; found {found(error['input'])}"
    return _pydantic_message(error)


def first_error(exc: ValidationError) -> tuple[str, str]:
    """The first of pydantic's errors, for a one-line message: its place (dotted) and error_words."""
    error = exc.errors()[0]
    return ".".join(map(str, error["loc"])), error_words(error)


@functools.cache
def _known_keys() -> tuple[str, ...]:
    keys = {
        field.alias or name
        for value in vars(schema).values()
        if isinstance(value, type) and issubclass(value, schema.StrictModel)
        for name, field in value.model_fields.items()
    }
    return tuple(sorted(keys))


def unknown_key_message(key: str) -> str:
    known = _known_keys()
    if key in known:
        return f"unknown key `{key}` here (it belongs elsewhere in a suite)"
    hint = difflib.get_close_matches(key, known, n=1, cutoff=0.7)
    return f"unknown key `{key}` (did you mean `{hint[0]}`?)" if hint else f"unknown key `{key}`"


# --- pydantic's path -> the file's path -------------------------------------------------------------------

ALIASES = {"or_": "or", "any_": "any", "all_": "all", "not_": "not"}


def _is_member_tag(part: str) -> bool:
    """pydantic names a union member in the path: "str", "list[PersonaStage]", "Criterion", "literal['inf']"."""
    return (
        part in ("str", "int", "float", "bool", "list", "dict", "none") or "[" in part or part[:1].isupper()
    )


def _split_loc(loc: tuple, raw: object) -> tuple[Path, int | None, str]:
    """The path as written, where in it the first union was (None if there was none), and its member."""
    out: list[str | int] = []
    union_at: int | None = None
    member = ""
    node = raw
    parts = [ALIASES.get(part, part) for part in loc]
    index = 0
    while index < len(parts):
        part = parts[index]
        if isinstance(part, str) and not (isinstance(node, dict) and part in node) and _is_member_tag(part):
            if union_at is None:
                union_at, member = len(out), part
            index += 1
            continue
        out.append(part)
        node = _child(node, part)
        # `checks: {or: [...]}` is validated as a one-item list; the file has no [0] there.
        if part == "checks" and isinstance(node, dict) and index + 1 < len(parts) and parts[index + 1] == 0:
            index += 1
        index += 1
    return tuple(out), union_at, member


def written_path(loc: tuple, raw: object) -> Path:
    """pydantic's error location (or any schema path), mapped back onto the file as written."""
    return _split_loc(loc, raw)[0]


def _child(node: object, part: str | int) -> object:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and part < len(node):
        return node[part]
    return None


def _value_at(raw: object, loc: Path) -> object:
    for part in loc:
        raw = _child(raw, part)
    return raw


def _written(loc: Path, raw: object) -> Path:
    """The part of `loc` the file has: a validator may read a scalar as a mapping (an extractor's name is its
    `kind`), and the file has no such key to point at."""
    node = raw
    for index, part in enumerate(loc):
        if not isinstance(node, (dict, list)):
            return loc[:index]
        node = _child(node, part)
    return loc


# --- the schema's shapes, in words ------------------------------------------------------------------------


def annotation_at(model: type[BaseModel], loc: Path) -> Any:
    """The annotation of the field (or list item) at `loc` below `model`; None if the schema has no such place."""
    annotation: Any = model
    for part in loc:
        annotation = _member_for(annotation, part)
        if annotation is None:
            return None
        if isinstance(part, int):
            annotation = typing.get_args(annotation)[0] if typing.get_args(annotation) else Any
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = next(
                (f for name, f in annotation.model_fields.items() if part in (name, f.alias)),
                None,
            )
            if field is None:
                return None
            annotation = field.annotation
        else:
            return None
    return annotation


def _member_for(annotation: Any, part: str | int) -> Any:
    """The member of a union that `part` steps into: a list for an index, a model for a key."""
    members = _members(annotation)
    for member in members:
        if isinstance(part, int) and typing.get_origin(member) is list:
            return member
        if isinstance(part, str) and isinstance(member, type) and issubclass(member, BaseModel):
            return member
    if isinstance(part, str) and len(members) == 1 and typing.get_origin(members[0]) is list:
        return typing.get_args(members[0])[0]  # `checks: {or: [...]}`: a key of the list's one item
    return None


def _members(annotation: Any) -> list[Any]:
    """A union's members without None (leaving a key out is how a suite says None)."""
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return [member for member in typing.get_args(annotation) if member is not type(None)]
    return [annotation]


def shape(annotation: Any, *, plural: bool = False) -> str:
    """What a value of this annotation looks like in YAML: "a string, or a list of {name, criteria, weight}"."""
    members = _members(annotation)
    if len(members) > 1:
        words = [shape(member, plural=plural) for member in members]
        return ", or ".join(words) if len(words) == 2 else ", ".join(words[:-1]) + ", or " + words[-1]
    annotation = members[0]
    if typing.get_origin(annotation) is list:
        return ("lists of " if plural else "a list of ") + shape(typing.get_args(annotation)[0], plural=True)
    if typing.get_origin(annotation) is Literal:
        values = [f"`{value}`" for value in typing.get_args(annotation)]
        return values[0] if len(values) == 1 else "one of " + ", ".join(values)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _model_shape(annotation, plural=plural)
    scalars = {str: ("a string", "strings"), int: ("a whole number", "whole numbers"),
               float: ("a number", "numbers"), bool: ("true or false", "true or false")}  # fmt: skip
    if annotation in scalars:
        return scalars[annotation][plural]
    return "any value" if not plural else "any values"


def _model_shape(model: type[BaseModel], *, plural: bool) -> str:
    own = getattr(model, "shape_in_words", None)
    if isinstance(own, str):
        return own
    keys = [field.alias or name for name, field in model.model_fields.items()]
    if len(keys) <= MAX_KEYS_SHOWN:
        spelled = "{" + ", ".join(keys) + "}"
        return spelled if plural else f"a mapping {spelled}"
    name = model.__name__.lower()
    if plural:
        return name + "s"
    return ("an " if name[0] in "aeiou" else "a ") + name


def _expected(annotation: Any, value: object) -> str:
    message = f"expected {shape(annotation)}; found {found(value)}"
    takes_text = any(member is str for member in _members(annotation))
    if takes_text and isinstance(value, (int, float, bool, datetime.date)):
        message += " (quote it to make it text)"
    return message


def found(value: object) -> str:
    """What a YAML value is, in words."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (int, float)):
        return f"the number {value:g}" if isinstance(value, float) else f"the number {value}"
    if isinstance(value, datetime.date):
        return f"the date {value.isoformat()}"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "a mapping"
    return type(value).__name__


def _kind(value: object) -> str:
    return "list" if isinstance(value, list) else "mapping" if isinstance(value, dict) else "scalar"


def _member_kind(tag: str) -> str:
    """A union member's kind from pydantic's name for it; only containers can hold a more precise error."""
    if tag.startswith("list["):
        return "list"
    if tag.startswith("dict[") or isinstance(getattr(schema, tag, None), type):
        return "mapping"
    return "member-scalar"  # never equal to a value's kind: a scalar that failed is described by shape
