"""promptfoo `python` assertions and AgentV code graders as `code` checks, their scripts attached."""

from __future__ import annotations

import re

from ..common import as_share, as_text, attach, basename, find_file, safe_file_name, short
from .checks import Context, as_jsonable, inline_python, is_path


class CodeChecks:
    """The code half of `Assertions`: it uses the converter's `files`, `report`, `attached`, `agentv` and
    `inline_code`."""

    # -- code -----------------------------------------------------------------------------------------------

    def code(self, item: dict, ctx: Context, where: str, kind: str) -> dict | None:
        report = self.report
        if kind == "python":
            value = as_text(item.get("value"))
            if value is None:
                report.lose(f"{where}: python assertion without code — not converted")
                return None
            spec = self.python(value, where)
            if spec is None:
                return None
            spec["dialect"] = "promptfoo"
            spec["config"] = {"vars": as_jsonable(ctx.variables), "prompt": ctx.prompt,
                              "config": item.get("config") if isinstance(item.get("config"), dict) else {}}  # fmt: skip
        else:
            command = item.get("command", item.get("script", item.get("path", item.get("value"))))
            if isinstance(command, str):
                command = command.removeprefix("file://").split()
            if not isinstance(command, list) or not command or not all(isinstance(p, str) for p in command):
                report.lose(f"{where}: {kind} without a command — not converted")
                return None
            if command[:2] == ["uv", "run"] and len(command) > 2:
                # uv runs a Python script in its environment; evalsite's grader runs it with python3
                rest = command[2:]
                command = ["python3", *(rest[1:] if rest[0] in ("python", "python3") else rest)]
                report.group(
                    "`uv run` grader command → python3 (uv is not assumed installed)", where, mapped=True
                )
            spec = {"command": [self.attach_arg(part, where) for part in command], "dialect": "agentv"}
            config = {k: v for k, v in item.items() if k not in ("type", "command", "script", "path", "value",
                      "metric", "name", "weight", "required", "threshold", "cwd", "target")}  # fmt: skip
            spec["config"] = {"criteria": ctx.criteria, "config": as_jsonable(config.get("config", config))}
            if item.get("cwd") not in (None, "."):
                report.group(
                    f"{kind} cwd {short(item['cwd'])}: the command runs in the suite's folder", where
                )
        threshold = as_share(item.get("threshold")) or ctx.threshold
        if threshold is not None:
            spec["threshold"] = threshold
        report.group(f"{kind} → a code check ({spec['dialect']} dialect: the grader is handed what "
                     f"{'AgentV' if spec['dialect'] == 'agentv' else 'promptfoo'} hands it)", where, mapped=True)  # fmt: skip
        return {"code": spec}

    def python(self, value: str, where: str) -> dict | None:
        if value.startswith("file://"):
            path, _, function = value.removeprefix("file://").partition(":")
            found = find_file(self.files, path)
            module = re.sub(r"\W", "_", basename(path).removesuffix(".py")) or "assertion"
            if module[0].isdigit():
                module = "m" + module
            if found is None:
                self.report.need(basename(path))
                self.report.group(
                    f"python assertion {path}: not uploaded — upload it and import again", where
                )
            else:
                module = attach(self.attached, f"{module}.py", found[1]).removesuffix(".py")
            return {"function": f"{module}:{function or 'get_assert'}"}
        self.inline_code += 1
        module = f"promptfoo_assert_{self.inline_code}"
        module = attach(self.attached, f"{module}.py", inline_python(value)).removesuffix(".py")
        self.report.group(f"inline python assertion → attached {module}.py (get_assert)", where, mapped=True)
        return {"function": f"{module}:get_assert"}

    def attach_arg(self, part: str, where: str) -> str:
        """A command's argument naming a file of the project: the attached copy's name, the file attached."""
        if not re.search(r"\.(py|ts|js|mjs|cjs|sh|rb)$", part):
            return part
        found = find_file(self.files, part)
        name = safe_file_name(part)
        if found is None:
            self.report.need(name)
            self.report.group(f"grader script {part}: not uploaded — upload it and import again", where)
        else:
            name = attach(self.attached, name, found[1])
        return name

    # -- files ----------------------------------------------------------------------------------------------

    def load_text(self, text: str, where: str) -> str | None:
        """The text of a file a value names (`file://x.md`, `../prompts/x.md`), or None when it names none."""
        if not is_path(text):
            return None
        path = text.removeprefix("file://")
        if path.lower().endswith((".py", ".js", ".ts", ".mjs", ".cjs")):
            self.report.lose(f"{where}: judge prompt {path} is code — evalsite cannot run it; not converted")
            return None
        found = find_file(self.files, path)
        if found is None:
            self.report.need(basename(path))
            self.report.group(f"{path}: not uploaded — upload it and import again", where, lost=True)
            return None
        self.report.group(f"{found[0]} → the judge's prompt", where, mapped=True)
        return found[1]
