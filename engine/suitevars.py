"""Suite variables and secrets.

A suite declares `vars: {name: default}` (a null default: a value must be given when a run is launched) and
writes `{{var:name}}` anywhere it has text: the model, the system prompt, prompts, turns, histories, simulated
users, check texts and criteria. A run binds them (`bind`): every reference is replaced by the launch's value
or the default, and the suite is validated again, so a value that makes a bad regex is reported as such. The
values a run was launched with are stored with it, so its results and a re-run say what was sent.

`{{secret:NAME}}` is different: its value is the environment variable NAME of the process that calls the
model (the CLI, a worker), read at call time (`fill_secrets`, in engine.clients). It is never written into
the suite, the run or its transcript, which keep the placeholder, and its value is redacted from replies and
errors (engine.redact).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator, Mapping

VAR_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}")
SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
VAR_REF = re.compile(r"\{\{\s*var:\s*(?P<name>[^{}\s]+)\s*\}\}")
SECRET_REF = re.compile(r"\{\{\s*secret:\s*(?P<name>[^{}\s]+)\s*\}\}")
# Where a secret may be: the texts the model under test is sent (the system prompt, prompts, inputs, turns,
# history messages, scripted follow-ups). Anywhere a judge, a simulated user or a check reads it, the
# secret would be compared or shown as the placeholder: replies are redacted before checks see them.
SENT_KEYS = frozenset({"prompt", "input", "content", "text", "system", "system_prompt"})
NOT_SENT = frozenset({"llm_judge", "semantic", "stop_when", "persona", "graders", "grader", "mock", "judge"})
# Keys whose text is a str.format template ({input}, {submission}): a value's braces are written doubled.
FORMAT_KEYS = frozenset({"rubric"})


class VarsError(ValueError):
    """A run's variables do not fit the suite: values missing, or given for variables it does not declare."""


class MissingSecret(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(
            f"the suite's secret {{{{secret:{name}}}}} is read from the environment variable {name}, which is "
            "not set where this run calls the model"
        )
        self.name = name


def strings(value: object, path: tuple = ()) -> Iterator[tuple[tuple, str]]:
    """Every string in parsed YAML or a dumped suite, with its path."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from strings(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from strings(item, (*path, index))


def references(data: object) -> Iterator[tuple[tuple, str, str]]:
    """(path, kind, name) of every `{{var:…}}` and `{{secret:…}}` outside the `vars` declaration."""
    for path, text in strings(data):
        if path[:1] == ("vars",):
            continue
        for found in VAR_REF.finditer(text):
            yield path, "var", found.group("name")
        for found in SECRET_REF.finditer(text):
            yield path, "secret", found.group("name")


def reference_problems(data: object) -> list[tuple[tuple, str]]:
    """(path, message) for each reference a run could not fill: an undeclared variable, a secret's name that
    is no environment variable's."""
    declared = data.get("vars") if isinstance(data, dict) else None
    declared = declared if isinstance(declared, dict) else {}
    problems = []
    for path, kind, name in references(data):
        if kind == "var" and name not in declared:
            known = ", ".join(sorted(map(str, declared))) or "none"
            problems.append(
                (
                    path,
                    f"{{{{var:{name}}}}} is not declared in `vars` (declared: {known}); add `{name}:` there",
                )
            )
        elif kind == "secret" and not sent(path):
            problems.append(
                (path, f"{{{{secret:{name}}}}}: a secret is only sent to the model under test (system, prompts, "
                 "inputs, turns, messages, the headers of its model_settings); a check, judge or simulated "
                 "user would see the placeholder, and "
                 "replies are redacted before checks read them")
            )  # fmt: skip
        elif kind == "secret" and not SECRET_NAME.fullmatch(name):
            problems.append(
                (path, f"{{{{secret:{name}}}}}: a secret is read from the environment variable of that name, "
                 "so it is letters, digits and _ (not starting with a digit)")
            )  # fmt: skip
    return problems


def sent(path: tuple) -> bool:
    """Whether the text at `path` (in parsed suite data) is sent to the model under test: its messages, and
    the headers of its own generation settings (a gateway's key, say), the suite's or an eval's."""
    keys = [key for key in path if isinstance(key, str)]
    if keys[-2:-1] == ["extra_headers"] and keys[:-2] in (["model_settings"], ["evals", "model_settings"]):
        return True
    if not keys or keys[-1] not in SENT_KEYS or NOT_SENT & set(keys):
        return False
    return keys[0] in ("system", "metadata", "evals")


def values(declared: Mapping[str, str | None], given: Mapping[str, str] | None) -> dict[str, str]:
    """Each declared variable's value for a run: the given one, else the default. Raises VarsError naming
    every variable with neither, and every given name the suite does not declare."""
    given = dict(given or {})
    unknown = sorted(set(given) - set(declared))
    if unknown:
        known = ", ".join(sorted(declared)) or "none"
        raise VarsError(f"the suite declares no variable {', '.join(unknown)} (its variables: {known})")
    out = {name: given.get(name, default) for name, default in declared.items()}
    missing = [name for name, value in out.items() if value is None]
    if missing:
        raise VarsError(
            f"no value for the suite's variable{'s' if len(missing) > 1 else ''} {', '.join(missing)}: give "
            + ("them" if len(missing) > 1 else "it")
            + " when launching the run (--var NAME=VALUE), or a default in `vars`"
        )
    return out


def substitute(data: object, bound: Mapping[str, str], key: object = None) -> object:
    """Parsed or dumped suite data with every `{{var:…}}` replaced (the `vars` declaration kept as is)."""
    if isinstance(data, str):
        if "{{" not in data:
            return data

        def value(found: re.Match) -> str:
            text = bound.get(found.group("name"))
            if text is None:
                return found.group(0)
            return text.replace("{", "{{").replace("}", "}}") if key in FORMAT_KEYS else text

        return VAR_REF.sub(value, data)
    if isinstance(data, dict):
        return {k: v if k == "vars" and key is None else substitute(v, bound, k) for k, v in data.items()}
    if isinstance(data, list):
        return [substitute(item, bound, key) for item in data]
    return data


def bind(suite, given: Mapping[str, str] | None = None):
    """The suite a run plays: its variables filled with `given` (else their defaults). Raises VarsError
    for a missing or unknown variable, and ValueError (pydantic's) when a filled text no longer validates."""
    declared = suite.vars or {}
    bound = values(declared, given)
    if not bound:
        return suite
    data = suite.model_dump(mode="json", exclude_defaults=True)
    return type(suite).model_validate(substitute(data, bound))


# The environment variables a suite may have sent as secrets in this process: None, any (a run on the user's
# own machine, `evalsite run`); on a server, only those its admin lends to suites (lend_only), so that a suite
# anyone may write cannot send the server's own keys (its database's URL, another endpoint's key) anywhere.
_lent: frozenset[str] | None = None


def lend_only(names) -> None:
    """From now on, this process fills only these secrets; any other is refused as not lent."""
    global _lent
    _lent = frozenset(names)


def not_lent(texts, lent) -> list[str]:
    """The names of the secrets these texts send that are not among `lent`, each once, in order (a launch's
    check on a server, before a worker would refuse them one by one)."""
    names = (found.group("name") for text in texts if "{{" in text for found in SECRET_REF.finditer(text))
    return [name for name in dict.fromkeys(names) if name not in lent]


class SecretNotLent(MissingSecret):
    def __init__(self, name: str) -> None:
        ValueError.__init__(
            self,
            f"the suite's secret {{{{secret:{name}}}}} is not one this server lends to suites: an admin adds "
            f"{name} to EVALSITE_SUITE_SECRETS",
        )
        self.name = name


def fill_secrets(text: str, environ: Mapping[str, str] | None = None) -> tuple[str, list[str]]:
    """Text with each `{{secret:NAME}}` replaced by the environment variable NAME, and the names used.
    Raises MissingSecret for an unset (or empty) one, SecretNotLent for one this process does not lend."""
    if "{{" not in text:
        return text, []
    env = os.environ if environ is None else environ
    used: list[str] = []

    def value(found: re.Match) -> str:
        name = found.group("name")
        if _lent is not None and name not in _lent:
            raise SecretNotLent(name)
        secret = env.get(name)
        if not secret:
            raise MissingSecret(name)
        used.append(name)
        return secret

    return SECRET_REF.sub(value, text), used


def parse_assignments(items: list[str] | None) -> dict[str, str]:
    """`NAME=VALUE` pairs (the command line's --var), as a mapping; ValueError for one without `=`."""
    out: dict[str, str] = {}
    for item in items or []:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"--var {item!r}: expected NAME=VALUE")
        out[name.strip()] = value
    return out
