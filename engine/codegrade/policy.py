"""Where code graders may run: always in the CLI, on a server only when its deployer sets
EVALSITE_CODE_GRADERS. A suite with a code check is refused at launch on a server that does not allow
them, and the editor and the validate API say so at each code check."""

from __future__ import annotations

from ..schema import Suite
from ..source import SuiteProblem, format_path
from .run import SETTING

DISABLED = (
    f"code graders are not enabled on this server (its deployer sets {SETTING}=1 to allow them); "
    "a run of this suite is refused here: run it with the CLI (`evalsite run`)"
)


def where(suite: Suite, path: tuple) -> str:
    """A code check's place as a reader finds it: the eval's id and the path, e.g.
    eval `capital` (evals[0].checks[1].code)."""
    if len(path) > 1 and path[0] == "evals" and isinstance(path[1], int) and path[1] < len(suite.evals):
        return f"eval `{suite.eval_id(path[1])}` ({format_path(path)})"
    return format_path(path)


def refusals(suite: Suite, locate=None) -> list[SuiteProblem]:
    """One located problem per code check of a suite that a server without code graders cannot run.
    `locate(path) -> (line, column)` places each in the suite's text."""
    found = []
    for path, _ in suite.code_checks():
        line, column = locate(path) if locate is not None else (0, 0)
        found.append(SuiteProblem(line, column, format_path(path), DISABLED))
    return found


def launch_refusal(suite: Suite) -> str | None:
    """Why a server without code graders refuses to run this suite, naming its code checks; None if it has
    none."""
    places = [where(suite, path) for path, _ in suite.code_checks()]
    if not places:
        return None
    shown = ", ".join(places[:5]) + (f" and {len(places) - 5} more" if len(places) > 5 else "")
    return (
        f"this suite has code checks ({shown}); code graders are not enabled on this server "
        f"(its deployer sets {SETTING}=1 to allow them). Run it with the CLI (`evalsite run`) instead."
    )
