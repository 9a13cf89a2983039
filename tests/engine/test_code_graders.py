"""Code checks: a program (any language) or a Python callable from the suite's folder grades a reply, in a
real subprocess with a time limit, a memory limit and no network unless allowed. A grader that gives no
verdict makes its conversation an error, never a failure."""

from __future__ import annotations

import contextlib
import json
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

from engine.codegrade import dialects
from engine.codegrade.run import CodeGraderError, CodeRunner, CodeScope, grade_code, network_off_prefix
from engine.loader import load_suite
from engine.outcomes import Status
from engine.runner import run_suite
from engine.schema import Check, CodeSpec, NamedGrader
from engine.source import SuiteError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "code_graders"
CONVERSATION = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris is the capital."},
]


def spec(value, **extra) -> CodeSpec:
    if extra:  # the short forms, written long
        value = (
            {"function": value}
            if isinstance(value, str)
            else {"command": value}
            if isinstance(value, list)
            else value
        )
        value = {**value, **extra}
    return Check.model_validate({"code": value}).code


def scope(folder: Path = FIXTURES, **extra) -> CodeScope:
    return CodeScope(CodeRunner(folder=folder), eval_id="capital", **extra)


# --- the schema --------------------------------------------------------------------------------------------


def test_short_forms_and_defaults():
    assert spec("graders:short").function == "graders:short"
    assert spec(["python3", "grade.py"]).command == ["python3", "grade.py"]
    written = spec({"command": "python3 grade.py --strict"})
    assert written.command == ["python3", "grade.py", "--strict"]
    assert (written.timeout, written.memory_mb, written.network, written.threshold) == (30, 512, False, 0.5)
    assert written.dialect == "evalsite" and written.files == ["grade.py"]
    assert spec("graders.py:short").files == ["graders.py"]
    assert spec(["sh", "-c", "echo 0.5", "0.5"]).files == []


@pytest.mark.parametrize(
    "value, message",
    [
        ({"command": ["python3", "g.py"], "function": "g:f"}, "one of them"),
        ({}, "one of them"),
        ({"function": "no-colon"}, "module:function"),
        ({"command": []}, "at least the program"),
        ({"function": "g:f", "dialect": "nonesuch"}, "unknown dialect 'nonesuch'; known: evalsite"),
        ({"function": "g:f", "timeout": 100000}, "less than or equal to 600"),
    ],
)
def test_malformed_code_checks_are_refused(value, message):
    with pytest.raises(ValueError, match=message):
        Check.model_validate({"code": value})


def test_a_code_check_is_a_named_grader_a_stop_condition_and_a_followup_check():
    assert (
        NamedGrader.model_validate({"kind": "check", "check": {"code": "graders:short"}}).check.kind == "code"
    )
    assert NamedGrader.model_validate({"code": "graders:short"}).check.code.function == "graders:short"
    suite = load_suite(
        """
name: places
model: mock
evals:
  - prompt: hi
    simulate:
      persona: p
      stop_when: {code: "graders:always"}
  - prompt: hi
    checks:
      - code: [python3, grade.py]
        prompt: again
        checks: [{code: "graders:short"}]
""",
        files={"graders.py": "", "grade.py": ""},
    )
    assert [path for path, _ in suite.code_checks()] == [
        ("evals", 0, "simulate", "stop_when", "code"),
        ("evals", 1, "checks", 0, "code"),
        ("evals", 1, "checks", 0, "checks", 0, "code"),
    ]


def test_the_files_a_code_check_runs_must_be_attached():
    source = "name: s\nmodel: mock\nevals:\n  - prompt: hi\n    checks:\n      - code: [node, grade.js]\n"
    with pytest.raises(SuiteError) as raised:
        load_suite(source, files={})
    [problem] = raised.value.problems
    assert (problem.line, problem.path) == (6, "evals[0].checks[0].code.command")
    assert "file `grade.js` is not attached" in problem.message
    load_suite(source, files={"grade.js": ""})


# --- graders in several languages --------------------------------------------------------------------------


def test_a_python_program_reads_the_conversation_and_answers_a_score():
    answer = grade_code(
        spec(["python3", "grade.py"]), "Paris is the capital.", CONVERSATION, scope(expected="paris")
    )
    assert answer.score == 1.0 and answer.passed is None
    assert answer.reason == "turn 1: 'paris' found in reply to 'What is the capital of France?'"


def test_a_shell_program_answers_a_bare_score_which_the_threshold_judges():
    check = Check.model_validate({"code": {"command": ["sh", "grade.sh"], "threshold": 0.5}})
    from engine.checks import JudgeContext, Reply, evaluate

    judge = JudgeContext(None, "judge", code=scope())
    polite = evaluate(check, Reply("Certainly, a polite reply.", None, CONVERSATION[:2]), judge)
    rude = evaluate(check, Reply("No.", None, CONVERSATION[:2]), judge)
    assert (polite.passed, polite.score, polite.reason) == (True, 0.9, "score 0.90 (threshold 0.5)")
    assert (rude.passed, rude.score) == (False, 0.1)
    assert polite.label == 'code "sh grade.sh"'


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_a_node_program_starts_under_the_memory_limit_and_answers_a_verdict():
    answer = grade_code(
        spec(["node", "grade.js"], config={"max_words": 3}), "Paris is the capital.", CONVERSATION, scope()
    )
    assert (answer.passed, answer.reason) == (False, "4 words")


def test_a_callable_gets_the_payload_and_its_prints_are_not_its_answer():
    answer = grade_code(spec("graders:short"), "Paris is the capital.", CONVERSATION, scope())
    assert (answer.score, answer.passed) == (1.0, None)
    assert grade_code(spec("graders:always"), "Paris is the capital.", CONVERSATION, scope()).passed is True


def test_the_payload_holds_every_turn_the_messages_and_the_config(tmp_path):
    (tmp_path / "echo.py").write_text(
        "def echo(payload):\n    return {'pass': True, 'reason': __import__('json').dumps(payload)}\n"
    )
    earlier = {"turn": 1, "prompt": "Pick a colour", "response": "Blue."}
    answer = grade_code(
        spec("echo:echo", config={"k": [1, 2]}),
        "Paris is the capital.",
        CONVERSATION,
        scope(tmp_path, turns=[earlier], current={"turn": 2, "prompt": "Why?"}, expected="Paris"),
    )
    payload = json.loads(answer.reason)
    assert set(payload) == {"turns", "messages", "input", "output", "expected_output", "config"}
    assert payload["turns"] == [earlier, {"turn": 2, "prompt": "Why?", "response": "Paris is the capital."}]
    assert payload["messages"] == CONVERSATION
    assert (payload["input"], payload["output"]) == (
        "What is the capital of France?",
        "Paris is the capital.",
    )
    assert (payload["expected_output"], payload["config"]) == ("Paris", {"k": [1, 2]})


# --- limits ------------------------------------------------------------------------------------------------


def test_a_grader_out_of_time_is_killed_with_what_it_started():
    started = time.monotonic()
    check = spec({"command": ["sh", "-c", "sleep 30 & echo started >&2; sleep 30"], "timeout": 1})
    with pytest.raises(CodeGraderError, match=r"timed out after 1 s\nstderr: started"):
        grade_code(check, "Paris is the capital.", CONVERSATION, scope())
    assert time.monotonic() - started < 10


def test_a_grader_over_its_memory_limit_fails_with_its_error():
    check = spec({"command": ["python3", "-c", "b = bytearray(400_000_000); print(1)"], "memory_mb": 64})
    with pytest.raises(CodeGraderError, match=r"(?s)exited with status 1\nstderr: .*MemoryError"):
        grade_code(check, "Paris is the capital.", CONVERSATION, scope())
    within = spec({"command": ["python3", "-c", "b = bytearray(40_000_000); print(1)"], "memory_mb": 256})
    assert grade_code(within, "Paris is the capital.", CONVERSATION, scope()).score == 1.0


@pytest.fixture
def listener():
    """A TCP server on 127.0.0.1 that accepts connections: what a grader would reach with the network."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def accept():
        while not stop.is_set():
            with contextlib.suppress(OSError):
                server.accept()[0].close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


CONNECT = (
    "import json, socket, sys\n"
    "try:\n"
    "    socket.create_connection(('127.0.0.1', {port}), timeout=3).close(); print(json.dumps({{'pass': True}}))\n"
    "except OSError as exc:\n"
    "    print(json.dumps({{'pass': False, 'reason': type(exc).__name__}}))\n"
)


def test_a_program_has_no_network_unless_its_check_allows_it(listener):
    assert network_off_prefix()[0] is not None, network_off_prefix()[1]
    program = ["python3", "-c", CONNECT.format(port=listener)]
    cut_off = grade_code(spec({"command": program}), "Paris is the capital.", CONVERSATION, scope())
    assert cut_off.passed is False and cut_off.reason in {"ConnectionRefusedError", "OSError"}
    assert (
        grade_code(
            spec({"command": program, "network": True}), "Paris is the capital.", CONVERSATION, scope()
        ).passed
        is True
    )


def test_a_callable_has_no_network_unless_its_check_allows_it(tmp_path, listener):
    body = CONNECT.format(port=listener).replace("\n", "\n    ").replace("print(json.dumps(", "return (")
    (tmp_path / "net.py").write_text(f"def reach(payload):\n    {body}\n".replace("))", ")"))
    assert (
        grade_code(spec("net:reach"), "Paris is the capital.", CONVERSATION, scope(tmp_path)).passed is False
    )
    assert (
        grade_code(
            spec("net:reach", network=True), "Paris is the capital.", CONVERSATION, scope(tmp_path)
        ).passed
        is True
    )


@pytest.fixture
def no_namespaces(monkeypatch):
    """A host that allows no network namespace (Docker's default seccomp profile, say)."""
    from engine.codegrade import run

    monkeypatch.setattr(
        run, "NETWORK_OFF", (["sh", "-c", "echo 'unshare: Operation not permitted' >&2; exit 1", "-"],)
    )
    run.network_off_prefix.cache_clear()
    yield
    run.network_off_prefix.cache_clear()


def test_without_namespaces_a_program_is_an_error_never_run_with_the_network(no_namespaces):
    with pytest.raises(
        CodeGraderError,
        match=r"cannot cut it off from the network on this host \(sh -c .*Operation not permitted\); set `network: true`",
    ):
        grade_code(spec(["python3", "grade.py"]), "Paris", CONVERSATION, scope())
    assert (
        grade_code(
            spec(["python3", "grade.py"], network=True), "Paris", CONVERSATION, scope(expected="paris")
        ).score
        == 1.0
    )


def test_without_namespaces_a_callable_is_denied_sockets_processes_and_c_libraries(
    no_namespaces, tmp_path, listener
):
    body = CONNECT.format(port=listener).replace("\n", "\n    ").replace("print(json.dumps(", "return (")
    (tmp_path / "net.py").write_text(
        f"def reach(payload):\n    {body}\n".replace("))", ")")
        + "def spawn(payload):\n    import subprocess\n    subprocess.run(['true'])\n    return True\n"
        + "def load(payload):\n    import ctypes\n    ctypes.CDLL(None)\n    return True\n"
    )
    denied = grade_code(spec("net:reach"), "Paris", CONVERSATION, scope(tmp_path))
    assert (denied.passed, denied.reason) == (False, "PermissionError")
    for name, event in (("spawn", "subprocess.Popen"), ("load", "ctypes.dlopen")):
        with pytest.raises(
            CodeGraderError, match=f"not allowed for this code grader without the network \\({event}\\)"
        ):
            grade_code(spec(f"net:{name}"), "Paris", CONVERSATION, scope(tmp_path))
    assert grade_code(spec("net:spawn", network=True), "Paris", CONVERSATION, scope(tmp_path)).passed is True


# --- no verdict: an error, with what the grader said -------------------------------------------------------


@pytest.mark.parametrize(
    "value, message",
    [
        (["sh", "-c", "echo looks good"], "its last line is not JSON: 'looks good'"),
        (["sh", "-c", "true"], "it printed no answer"),
        (["sh", "-c", "echo oops >&2; exit 3"], "exited with status 3\nstderr: oops"),
        (["sh", "-c", "echo '{\"verdict\": 1}'"], "neither `score` nor `pass`"),
        (["sh", "-c", 'echo \'{"score": "high"}\''], '`score` is "high", not a number'),
        (["sh", "-c", "echo 7"], "its score 7 is outside 0–1"),
        (["no-such-program-here"], "`no-such-program-here` is not installed on this machine"),
        ("graders:broken", "RuntimeError: grader bug: no such key"),
        ("graders:no_answer", "expected {score, pass, reason}, a number or true/false"),
        ("graders:missing", "cannot load graders:missing"),
    ],
)
def test_a_grader_that_gives_no_verdict_is_an_error(value, message):
    with pytest.raises(CodeGraderError) as raised:
        grade_code(spec(value), "Paris is the capital.", CONVERSATION, scope())
    assert message.split("|")[0] in str(raised.value) or message.split("|")[-1] in str(raised.value)


def test_on_a_server_a_grader_sees_its_files_in_a_temporary_folder_and_none_of_the_servers_secrets(
    monkeypatch,
):
    monkeypatch.setenv("SECRET_KEY", "server-secret")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-server")
    runner = CodeRunner(
        files={
            "look.py": "import json, os\nprint(json.dumps({'pass': True, 'reason': json.dumps([sorted(os.listdir()), sorted(os.environ)])}))\n"
        }
    )
    answer = grade_code(spec(["python3", "look.py"]), "ok", CONVERSATION, CodeScope(runner))
    listed, names = json.loads(answer.reason)
    assert listed == ["look.py"]
    assert "SECRET_KEY" not in names and "OPENAI_API_KEY" not in names and "HOME" in names
    folder = runner.workdir()
    runner.close()
    assert not folder.exists()


def test_where_code_graders_are_not_allowed_the_check_says_so():
    with pytest.raises(CodeGraderError, match="code graders are not enabled here"):
        grade_code(spec("graders:always"), "Paris is the capital.", CONVERSATION, CodeScope(None))


# --- the dialect registry ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(dialects.DIALECTS))
def test_every_dialect_plays_a_program_and_a_callable_end_to_end(name, tmp_path, monkeypatch):
    dialect = dialects.DIALECTS[name]
    answer, read = dialect.sample
    (tmp_path / "echo.py").write_text(
        "import json, os, sys\n"
        "def anything(*args, **kwargs):\n"
        "    return json.loads(os.environ['SAMPLE'])\n"
        "if __name__ == '__main__':\n"
        "    json.load(sys.stdin)\n"
        "    print(os.environ['SAMPLE'])\n"
    )
    monkeypatch.setenv("SAMPLE", json.dumps(answer))
    given = CodeScope(CodeRunner(folder=tmp_path, inherit_env=True), current={"turn": 1, "prompt": "q"})
    for way in ("echo:anything", ["python3", "echo.py"]):
        assert (
            grade_code(
                spec(way if isinstance(way, list) else {"function": way}, dialect=name),
                "Paris is the capital.",
                CONVERSATION,
                given,
            )
            == read
        )
    json.dumps(dialect.payload(dialects.GradeInput([], CONVERSATION, "q", "a")))


# --- in a conversation -------------------------------------------------------------------------------------


def run(source: str, registry, folder: Path = FIXTURES, code: bool = True):
    files = {
        name: (folder / name).read_text() for name in ("graders.py", "grade.py") if (folder / name).exists()
    }
    suite = load_suite(source, files=files)
    return run_suite(suite, registry, code=CodeRunner(folder=folder) if code else None)


MULTI = """\
name: colours
model: mock
mock:
  rules:
    - {when: "*colour*", reply: "Blue."}
    - {when: "*", reply: "Because the sky is blue."}
evals:
  - id: why
    turns:
      - input: Pick a colour
        checks: [{code: "graders:mentions_history"}]
      - input: Why that one?
        checks: [{code: "graders:mentions_history"}]
"""


def test_a_code_check_sees_the_turns_before_the_one_it_grades(registry):
    [result] = run(MULTI, registry).evals
    assert result.status == Status.PASSED
    first, second = result.turns
    assert first.checks[0].reason == "pass, score 1.00: 1 replies so far, the first 'Blue.'"
    assert second.checks[0].reason == "pass, score 1.00: 2 replies so far, the first 'Blue.'"


def test_a_crashing_grader_makes_the_conversation_an_error_with_its_stderr(registry):
    [result] = run(MULTI.replace("mentions_history", "broken"), registry).evals
    assert result.status == Status.ERROR
    assert "code grader graders:broken: exited with status 1" in result.error
    assert "RuntimeError: grader bug: no such key" in result.error


def test_without_a_runner_a_code_check_is_an_error_not_a_skip(registry):
    [result] = run(MULTI, registry, code=False).evals
    assert result.status == Status.ERROR and "code graders are not enabled here" in result.error


def test_a_named_code_grader_grades_the_whole_conversation(registry):
    source = MULTI.replace('{code: "graders:mentions_history"}', "{contains: e}") + (
        "    graders:\n      history: {kind: check, check: {code: graders:mentions_history}}\n"
    )
    [result] = run(source, registry).evals
    assert result.status == Status.PASSED
    [graded] = result.graders
    assert (graded.name, graded.score, graded.passed) == ("history", 1.0, True)


# --- the CLI, end to end on a real endpoint ----------------------------------------------------------------

CLI_SUITE = """\
name: cli-code
model: gpt-test
evals:
  - id: capital
    input: What is the capital of France?
    ground_truth: Paris
    grader: contains
    checks:
      - code: [python3, grade.py]
      - code: {command: [sh, grade.sh], threshold: 0.5}
  - id: colours
    turns:
      - input: Pick a colour
        checks: [{code: "graders:mentions_history"}]
      - input: Why that one?
        checks: [{code: "graders:mentions_history"}]
  - id: crash
    input: Anything?
    checks:
      - code: graders:broken
"""


def test_the_cli_runs_code_graders_in_the_suites_folder_against_a_real_endpoint(tmp_path):
    from tests.conftest import FAKE_KEY
    from tests.engine.standalone import evalsite
    from tests.fakeopenai import FakeOpenAI

    for name in ("grade.py", "grade.sh", "graders.py"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    (tmp_path / "suite.yaml").write_text(CLI_SUITE)
    with FakeOpenAI(api_key=FAKE_KEY) as fake:
        fake.script("What is the capital of France?", ["Paris, a polite answer."])
        fake.script("Pick a colour", ["Blue.", "The sky."])
        fake.script("Anything?", ["Sure."])
        done = evalsite(
            "run", "suite.yaml", "--json", "out.json", cwd=tmp_path, EVALSITE_VAR_DIR=str(tmp_path),
            OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY=FAKE_KEY, EVALSITE_MAX_RETRIES="1",
        )  # fmt: skip
        sent = [
            request["body"]["messages"]
            for request in fake.requests
            if request["path"].endswith("/completions")
        ]
    assert done.returncode == 3, done.stdout + done.stderr  # a grader that crashed is an error, not a failure
    assert [m[-1]["content"] for m in sent if m[0]["content"] == "Pick a colour"] == [
        "Pick a colour",
        "Why that one?",
    ]
    results = {item["id"]: item for item in json.loads((tmp_path / "out.json").read_text())["evals"]}
    capital, colours, crash = results["capital"], results["colours"], results["crash"]
    assert capital["status"] == "passed"
    assert [check["reason"] for check in capital["turns"][0]["checks"]] == [
        "score 1.00 (threshold 0.5): turn 1: 'paris' found in reply to 'What is the capital of France?'",
        "score 0.90 (threshold 0.5)",
    ]
    assert colours["status"] == "passed"
    assert (
        colours["turns"][1]["checks"][0]["reason"] == "pass, score 1.00: 2 replies so far, the first 'Blue.'"
    )
    assert crash["status"] == "error" and "RuntimeError: grader bug: no such key" in crash["error"]
    assert "code grader graders:broken: exited with status 1" in done.stdout
    # The summary blames the grader, not the endpoint, whose URL and key were fine.
    assert "1 of 3 conversations got no verdict from a code grader" in done.stderr
    assert "endpoint" not in done.stderr


def test_the_json_schema_tells_editors_of_the_short_forms():
    from engine.schema import json_schema

    schema = json_schema()
    kinds = [
        branch.get("type") or branch.get("$ref")
        for branch in schema["$defs"]["Check"]["properties"]["code"]["anyOf"]
    ]
    assert kinds == ["string", "array", "#/$defs/CodeSpec", "null"]
    assert schema["$defs"]["CodeSpec"]["properties"]["command"]["anyOf"][0] == {"type": "string"}


def test_a_dialects_shims_stand_in_for_a_tools_package_and_never_for_a_real_one(monkeypatch):
    import sys

    from engine.codegrade.host import _shim

    for name in ("toolpkg", "toolpkg.models", "json.fake"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    _shim("toolpkg.models", "class GradeResult(dict):\n    pass\n")
    from toolpkg.models import GradeResult

    assert GradeResult(score=1) == {"score": 1}
    real = sys.modules["json"]
    _shim("json", "raise AssertionError('the real json is there')")
    assert sys.modules["json"] is real
