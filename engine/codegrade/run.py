"""Running a code check: its program or callable in a subprocess, limited in time, memory and network.

Every grader runs in a new session (its whole process group is killed when time is up), under prlimit
(memory, core dumps, output size) and, unless its check allows the network, in a network namespace of its
own (util-linux `unshare`). Memory is limited as RLIMIT_DATA, what a process has written to, not
RLIMIT_AS: Node, Bun, Go and Java reserve far more address space as they start than they use, and would
never start under an address-space limit. A callable runs in a small host program (host.py) with the same limits,
never in the worker's process. A grader that times out, crashes or answers nothing readable raises
CodeGraderError, which makes its conversation an error rather than a failure.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..clients import EndpointError
from . import dialects
from .dialects import Answer, BadAnswer, GradeInput

SETTING = "EVALSITE_CODE_GRADERS"
HOST = pathlib.Path(__file__).with_name("host.py")
DIALECTS_FILE = pathlib.Path(dialects.__file__)
MAX_OUTPUT_BYTES = 16_000_000  # a grader's stdout or stderr, and each file it writes
STDERR_TAIL = 1500
# What a grader's environment keeps when it does not inherit the caller's (a server's secrets stay out).
PLAIN_ENV = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ")
NETWORK_OFF = (["unshare", "--user", "--net", "--map-root-user"], ["unshare", "--net"])


class CodeGraderError(EndpointError):
    """A code grader gave no verdict (timed out, crashed, answered nothing readable, or may not run here): the
    conversation is an error, not a failure, like a judge that cannot be read."""


@dataclass
class CodeRunner:
    """Where code graders run: `folder` (the CLI: the suite's own folder), else a temporary folder holding
    the suite's attached `files`, written once and removed with the runner. `inherit_env` hands the
    grader the caller's environment (the CLI); otherwise it sees only PLAIN_ENV."""

    folder: pathlib.Path | None = None
    files: Mapping[str, str] = field(default_factory=dict)
    inherit_env: bool = False
    _written: pathlib.Path | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def workdir(self) -> pathlib.Path:
        if self.folder is not None:
            return self.folder
        with self._lock:
            if self._written is None:
                made = pathlib.Path(tempfile.mkdtemp(prefix="evalsite-code-"))
                weakref.finalize(self, shutil.rmtree, made, True)
                for name, text in self.files.items():
                    path = made / name
                    path.write_text(text, encoding="utf-8")
                    path.chmod(0o700)  # `command: [./grade.sh]` runs an attached script
                self._written = made
            return self._written

    def close(self) -> None:
        if self._written is not None:
            shutil.rmtree(self._written, ignore_errors=True)
            self._written = None

    def environment(self, network: bool) -> dict[str, str]:
        if self.inherit_env:
            env = dict(os.environ)
        else:
            env = {key: os.environ[key] for key in PLAIN_ENV if key in os.environ}
            env.setdefault("PATH", os.defpath)
            env["HOME"] = str(
                self.workdir()
            )  # tools that keep a cache or settings there (npm, node) find one
        env.update(PYTHONDONTWRITEBYTECODE="1", PYTHONIOENCODING="utf-8", PYTHONUNBUFFERED="1")
        if not network:
            env["EVALSITE_NO_NETWORK"] = "1"
        return env


@dataclass
class CodeScope:
    """What a code check is told besides the reply: the eval, its turns so far (results-format records,
    before the one being graded), the turn being graded and its expected output. `runner` None: code
    graders are not allowed where this runs, and `refusal` says why."""

    runner: CodeRunner | None
    eval_id: str = ""
    turns: list = field(default_factory=list)  # dicts, or TurnRecords (dumped only when a grader runs)
    current: dict = field(default_factory=dict)
    expected: Any = None
    metadata: dict = field(default_factory=dict)
    refusal: str = f"code graders are not enabled here (set {SETTING}=1 to allow them)"


@functools.cache
def network_off_prefix() -> tuple[list[str] | None, str]:
    """The command that runs a program without network on this host, and why none does when it is None."""
    why = []
    for prefix in NETWORK_OFF:
        try:
            done = subprocess.run([*prefix, "true"], capture_output=True, timeout=10, text=True)
        except (OSError, subprocess.TimeoutExpired) as exc:
            why.append(f"{' '.join(prefix)}: {exc}")
            continue
        if done.returncode == 0:
            return list(prefix), ""
        why.append(f"{' '.join(prefix)}: {done.stderr.strip() or f'exit {done.returncode}'}")
    return None, "; ".join(why)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(part.get("text", "") for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def grade_input(spec, output: str, conversation: list[dict], scope: CodeScope) -> GradeInput:
    last_user = next((m for m in reversed(conversation) if m.get("role") == "user"), None)
    current = {**scope.current, "response": output}
    turns = [turn if isinstance(turn, dict) else turn.model_dump(mode="json") for turn in scope.turns]
    return GradeInput(
        turns=[*turns, current],
        messages=conversation,
        input=_text(last_user["content"]) if last_user else "",
        output=output,
        expected_output=scope.expected,
        config=spec.config,
        eval_id=scope.eval_id,
        metadata=scope.metadata,
    )


def describe(spec) -> str:
    return spec.function if spec.function is not None else " ".join(spec.command)


def grade_code(spec, output: str, conversation: list[dict], scope: CodeScope | None) -> Answer:
    """Run one code check on a reply (`output`) and the conversation so far, and read its answer."""
    if scope is None or scope.runner is None:
        raise CodeGraderError(
            f"code grader {describe(spec)}: "
            + (scope.refusal if scope else f"code graders are not enabled here (set {SETTING}=1)")
        )
    dialect = dialects.DIALECTS[spec.dialect]
    payload = dialect.payload(grade_input(spec, output, conversation, scope))
    argv = program(spec, DIALECTS_FILE, spec.dialect)
    stdout, stderr = run_limited(argv, json.dumps(payload, default=str), spec, scope.runner)
    try:
        answer = dialect.read(read_json(stdout))
        if answer.score is not None and not 0.0 <= answer.score <= 1.0:
            raise BadAnswer(f"its score {answer.score:g} is outside 0–1")
    except BadAnswer as exc:
        raise CodeGraderError(f"code grader {describe(spec)}: {exc}{_tail(stderr)}") from None
    return answer


def program(spec, dialects_file: pathlib.Path, dialect: str) -> list[str]:
    """The command that runs a code spec: its own `command`, or its `function` called in the host program,
    which reads its input and writes its answer as `dialect` of `dialects_file` says."""
    if spec.function is None:
        return list(spec.command)
    module, function = spec.function.split(":")
    return [
        sys.executable,
        "-B",
        str(HOST),
        str(dialects_file),
        dialect,
        module.removesuffix(".py"),
        function,
    ]


def read_json(stdout: str) -> Any:
    """The answer a grader printed: its last non-empty line as JSON, else all of its output as JSON."""
    lines = [line for line in stdout.splitlines() if line.strip()]
    if not lines:
        raise BadAnswer("it printed no answer")
    try:
        return json.loads(lines[-1])
    except ValueError:
        pass
    try:
        return json.loads(stdout)
    except ValueError:
        raise BadAnswer(f"its last line is not JSON: {lines[-1][:120]!r}") from None


def _tail(stderr: str) -> str:
    stderr = stderr.strip()
    if not stderr:
        return ""
    cut = "…" if len(stderr) > STDERR_TAIL else ""
    return f"\nstderr: {cut}{stderr[-STDERR_TAIL:]}"


def run_limited(argv: list[str], stdin: str, spec, runner: CodeRunner) -> tuple[str, str]:
    """Run argv in the runner's folder under the check's limits; its stdout and stderr, or CodeGraderError
    when it could not start, ran out of time, or exited with an error."""
    name = describe(spec)
    limits = [
        "prlimit",
        f"--data={spec.memory_mb * 1024 * 1024}",
        "--core=0",
        f"--fsize={MAX_OUTPUT_BYTES}",
        "--",
    ]
    prefix: list[str] = []
    env = runner.environment(spec.network)
    if not spec.network:
        prefix, why = network_off_prefix()
        if prefix is None and spec.function is None:
            raise CodeGraderError(
                f"code grader {name}: cannot cut it off from the network on this host ({why}); "
                "set `network: true` on the check to run it with the network"
            )
        if prefix is None:  # a callable: refused sockets, other processes and C libraries inside Python
            prefix, env["EVALSITE_NO_NETWORK"] = [], "strict"
    program = argv[0]
    if "/" not in program and shutil.which(program, path=env.get("PATH")) is None:
        raise CodeGraderError(
            f"code grader {name}: `{program}` is not installed on this machine (not found on PATH); "
            "install it, or change the check's command"
        )
    cwd = runner.workdir()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = subprocess.Popen(
                [*prefix, *limits, *argv],
                cwd=cwd,
                env=env,
                stdin=subprocess.PIPE,
                stdout=out,
                stderr=err,
                start_new_session=True,  # its own process group: a timeout kills all it started
            )
        except OSError as exc:
            raise CodeGraderError(f"code grader {name}: cannot start it: {exc}") from None
        timed_out = False
        try:
            process.communicate(stdin.encode("utf-8"), timeout=spec.timeout)
        except subprocess.TimeoutExpired:
            timed_out = True
            _kill(process)
        except BrokenPipeError:  # it exited without reading its input: its answer may still be there
            process.wait(timeout=spec.timeout)
        finally:
            _kill(process)  # whatever it left running in its group
        stdout, stderr = _read(out), _read(err)
    if timed_out:
        raise CodeGraderError(f"code grader {name}: timed out after {spec.timeout:g} s{_tail(stderr)}")
    if process.returncode != 0:
        how = (
            f"killed by signal {signal.Signals(-process.returncode).name}"
            if process.returncode < 0
            else f"exited with status {process.returncode}"
        )
        raise CodeGraderError(f"code grader {name}: {how}{_tail(stderr)}")
    return stdout, stderr


def _kill(process: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _read(handle) -> str:
    handle.seek(0)
    return handle.read(MAX_OUTPUT_BYTES).decode("utf-8", "replace")
