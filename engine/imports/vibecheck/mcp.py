"""vibecheck's `metadata.mcp_server` ({url, name, authorization_token}) as evalsite's MCP tools item.

vibecheck lists the server's tools, offers them to the model and calls them over HTTP, sending the
authorization token as a bearer token. evalsite does the same with `tools: [{mcp: {url, headers}}]`. The
token is a secret: the suite names the environment variable it is read from (`{{env:NAME}}`), never the
token itself."""

from __future__ import annotations

import re

from ..common import Report, as_text, short
from .variables import TEMPLATE_REF


def token_variable(token: str, server_name: str | None) -> tuple[str, bool]:
    """The environment variable a token is read from, and whether the file named it (`{{secret('x')}}`,
    `{{env:x}}`) rather than writing the token itself."""
    found = TEMPLATE_REF.fullmatch(token.strip())
    if found and found.group("kind") in ("secret", "env"):
        written = found.group("name") if found.group("name") is not None else found.group("name2")
        return env_name(written), True
    return env_name(f"{server_name or 'mcp'}_token"), False


def env_name(written: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", written.strip()).upper() or "MCP_TOKEN"
    return f"_{name}" if name[0].isdigit() else name


def mcp_server(server: object, report: Report) -> dict | None:
    """The `tools` item for the server, or None (listed as lost) when it names no URL."""
    where = "metadata.mcp_server"
    if not isinstance(server, dict):
        report.lose(f"{where}: {short(server)} — not a mapping with `url`; the evals run without its tools")
        return None
    url = as_text(server.get("url"))
    if not url or not url.strip().startswith(("http://", "https://")):
        report.lose(f"{where}.url: {short(server.get('url'))} — not an http(s) URL; the evals run without the "
                    "server's tools")  # fmt: skip
        return None
    name = as_text(server.get("name"))
    spec: dict[str, object] = {"url": url.strip()}
    report.map(
        f"{where} ({short(name or url, 40)}) → tools: [{{mcp: {{url: {url.strip()}}}}}] (its tools listed from the "
        "server, offered to the model and called there, as vibecheck does)"
    )
    token = server.get("authorization_token")
    if token is not None:
        text = as_text(token)
        if not text or not text.strip():
            report.skip(f"{where}.authorization_token: {short(token)} — not a token, left out")
        else:
            variable, named = token_variable(text, name)
            spec["headers"] = {"Authorization": f"Bearer {{{{env:{variable}}}}}"}
            if named:
                report.map(
                    f"{where}.authorization_token {text.strip()} → headers.Authorization: Bearer {{{{env:{variable}}}}}, "
                    f"read from the environment variable {variable} when the server is called; never stored"
                )
            else:
                report.map(
                    f"{where}.authorization_token (written in the file; not copied into the suite) → "
                    f"headers.Authorization: Bearer {{{{env:{variable}}}}}: set the environment variable {variable} "
                    "to the token where runs are made"
                )
    for key in server:
        if key not in ("url", "name", "authorization_token"):
            report.skip(f"{where}.{key}: not a vibecheck MCP server field, left out")
    return {"mcp": spec}
