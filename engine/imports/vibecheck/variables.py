"""vibecheck's `{{var('name')}}` and `{{secret('name')}}`, filled in on its server, as evalsite's suite
variables and secrets."""

from __future__ import annotations

import re

from ... import suitevars
from ..common import Report

# vibecheck's `{{var('name')}}` / `{{secret('name')}}` (quotes optional), and the `{{var:name}}` spelling.
TEMPLATE_REF = re.compile(
    r"""\{\{\s*(?P<kind>var|secret|env)\s*(?:\(\s*(?P<q>['"]?)(?P<name>[^'")}]*)(?P=q)\s*\)|:\s*(?P<name2>[^}]*?))\s*\}\}"""
)
# Left as written: the MCP server's token is read by vibecheck/mcp.py; a model given as a variable is the launch's choice.
KEPT_METADATA = ("mcp_server", "model")


def template_refs(data: dict, report: Report) -> tuple[dict, list[str]]:
    """vibecheck fills `{{var('name')}}` and `{{secret('name')}}` in on its server when a suite runs, from
    values set with `vibe set var|secret`. They become evalsite's `{{var:name}}` (declared in `vars`, its
    value given at launch) and `{{secret:NAME}}` (read from the environment variable NAME where the model
    is called). The data comes back rewritten, with the variables in order of first use. The MCP server is
    left as it is (vibecheck/mcp.py reads its token), and so is the model (a launch chooses it)."""
    declared: list[str] = []

    def rewrite(text: str, path: str) -> str:
        def one(found: re.Match) -> str:
            written = found.group("name") if found.group("name") is not None else found.group("name2")
            kind = found.group("kind")
            if kind == "var":
                var = re.sub(r"[^A-Za-z0-9_.\-]", "_", written.strip())
                if not suitevars.VAR_NAME.fullmatch(var):
                    var = f"v_{var}"[:64]
                if var not in declared:
                    declared.append(var)
                report.group(
                    f"{found.group(0)} → {{{{var:{var}}}}}, the suite variable {var!r} (vibecheck's "
                    "`vibe set var`), filled with the value given at launch",
                    path,
                    mapped=True,
                )
                return f"{{{{var:{var}}}}}"
            env = re.sub(r"[^A-Za-z0-9_]", "_", written.strip()).upper() or "SECRET"
            if env[0].isdigit():
                env = f"_{env}"
            if not suitevars.sent(_path_keys(path)):
                report.lose(
                    f"{path}: {found.group(0)} is compared or judged as vibecheck's secret; evalsite sends "
                    "secrets only to the model under test and redacts them from replies before checks read "
                    "them, so this text keeps the reference as written and no longer tests the secret"
                )
                return found.group(0)
            origin = "vibecheck's `vibe set secret`" if kind == "secret" else "an environment variable"
            report.group(
                f"{found.group(0)} → {{{{secret:{env}}}}}, read from the environment variable {env} where the "
                f"run calls the model ({origin}); never stored",
                path,
                mapped=True,
            )
            return f"{{{{secret:{env}}}}}"

        return TEMPLATE_REF.sub(one, text)

    def walk(value: object, path: str) -> object:
        if isinstance(value, str):
            return rewrite(value, path) if "{{" in value else value
        if isinstance(value, dict):
            return {
                key: item if path == "metadata" and key in KEPT_METADATA else walk(item, _join(path, key))
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [walk(item, f"{path}[{index}]") for index, item in enumerate(value)]
        return value

    return walk(data, ""), declared


def _path_keys(path: str) -> tuple:
    """`evals[1].checks[0].match` as the key path suitevars reads: ("evals", 1, "checks", 0, "match")."""
    keys: list[object] = []
    for part in path.split("."):
        name, *indexes = re.split(r"\[(\d+)\]", part)
        keys.append(name)
        keys.extend(int(index) for index in indexes if index)
    return tuple(keys)


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)
