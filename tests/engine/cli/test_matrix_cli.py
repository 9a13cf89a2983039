"""`evalsite run --model a,b` plays the suite on every model together and prints the grid, with its exports."""

from __future__ import annotations

import csv
import json
import signal
import subprocess
import time
import xml.etree.ElementTree as ET

from tests.conftest import FAKE_KEY
from tests.engine.cli.test_terminal import env_for, many
from tests.engine.standalone import EVALSITE, as_from_a_terminal, assert_one_line_error, fresh_env, run_on
from tests.fakeopenai import FakeOpenAI, Reply


def test_two_models_make_a_grid_on_the_terminal_and_in_every_export(fake, suite):
    fake.rule("What is 15 * 7?", "105", model="good")
    fake.rule("What is 15 * 7?", "100", model="bad")
    fake.rule("What is 2 + 2?", "4")
    out = suite.parent
    result = run_on(
        fake, suite, "--model", "good,bad", "--variant", "good@temperature=0.7",
        "--csv", str(out / "grid.csv"), "--markdown", str(out / "grid.md"), "--junit", str(out / "grid.xml"),
        "--json", str(out / "results.json"),
    )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr  # one variant failed an eval
    lines = result.stdout.splitlines()
    assert "[3/3] good temperature=0.7: 2 passed, 0 failed, 0 errors of 2" in lines
    table = lines[lines.index("eval    good  bad   good temperature=0.7") :]
    assert table[1:3] == [
        "eval-1  pass  FAIL  pass                  differs",
        "eval-2  pass  pass  pass",
    ]  # the one that differs first
    assert "1 of 2 evals end differently across variants." in lines
    assert any(line.startswith("good                  100% [34%–100%]") for line in lines), result.stdout
    rows = list(csv.reader((out / "grid.csv").open()))
    bad_status = rows[0].index("bad status")
    assert [row[3] for row in rows[1:]] == ["passed", "passed"] and rows[1][bad_status] == "failed"
    assert "| eval-1 | pass | FAIL | pass | differs |" in (out / "grid.md").read_text()
    suites = ET.parse(out / "grid.xml").getroot().findall("testsuite")
    assert [s.get("failures") for s in suites] == ["0", "1", "0"]
    bad = json.loads((out / "results.bad.json").read_text())
    assert bad["model"] == "bad" and bad["totals"]["failed"] == 1
    assert {body["model"] for body in fake.chat_requests()} == {"good", "bad"}


def test_a_row_with_an_error_is_marked_incomplete_on_the_terminal_and_in_the_markdown(fake, suite):
    """As on the matrix's page and in its CSV: a variant whose conversation errored has no verdict, so its row
    is `incomplete`, not `differs`, and comes after the rows whose verdicts differ."""
    fake.rule("What is 15 * 7?", "105", model="good")
    fake.rule("What is 15 * 7?", "100", model="bad")
    fake.rule("What is 2 + 2?", "4", model="good")
    fake.rule("What is 2 + 2?", Reply(status=400, text="no such model"), model="bad")
    result = run_on(fake, suite, "--model", "good,bad", "--markdown", str(suite.parent / "grid.md"))
    assert result.returncode == 3, result.stdout + result.stderr  # an error in a variant: as a run's
    lines = result.stdout.splitlines()
    assert (
        "1 of 2 evals end differently across variants; 1 more has a cell with no verdict to compare (an "
        "error, or cancelled), listed after them." in lines
    )
    table = lines[lines.index("eval    good  bad") :]
    assert table[1:3] == ["eval-1  pass  FAIL   differs", "eval-2  pass  error  incomplete"]
    markdown = (suite.parent / "grid.md").read_text()
    assert "| eval | good | bad |  |" in markdown
    assert "| eval-1 | pass | FAIL | differs |\n| eval-2 | pass | error | incomplete |" in markdown
    assert "1 more has a cell with no verdict to compare" in markdown


def test_a_variant_it_cannot_read_is_one_line_and_nothing_is_called(fake, suite):
    result = run_on(fake, suite, "--model", "good,good@temperature=9")
    assert_one_line_error(
        result, 2, "--model", "temperature: expected a number at most 2; found the number 9"
    )
    result = run_on(fake, suite, "--model", "good,good")
    assert_one_line_error(result, 2, "named twice")
    assert fake.chat_requests() == []


def test_a_matrix_shows_its_progress_and_takes_the_concurrency_given(tmp_path):
    """Two variants of 40 half-second conversations at --concurrency 40: a progress line while they play (no
    terminal: the periodic one), and both variants' conversations out at once, 40 each (the default endpoint's
    cap raised for both), not the default ten nor one variant after the other."""
    with FakeOpenAI(latency=0.5, api_key=FAKE_KEY) as fake:
        suite = many(tmp_path, 40)
        result = subprocess.run(
            [str(EVALSITE), "run", str(suite), "--model", "a,b", "--concurrency", "40", "--progress-every", "0.2"],
            cwd=tmp_path, env=env_for(fake, tmp_path), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        assert fake.max_in_flight > 70
    progress = [line for line in result.stderr.splitlines() if line.startswith("progress: ")]
    assert progress and all("/80 · " in line for line in progress), result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "Playing 2 variants together, 40 at a time each: a, b"
    assert "[2/2] b: 40 passed, 0 failed, 0 errors of 40" in lines


def test_each_variants_json_is_written_as_its_conversations_end(fake, suite):
    """--json in a matrix: a file per variant, each holding its conversations as they end, so a matrix cut
    short (Ctrl-C) leaves what ended on disk, and the line it ends with names the files."""
    fake.rule("What is 2 + 2?", "4")
    fake.rule("What is 15 * 7?", Reply(text="105", latency=30))
    out = suite.parent / "results.json"
    env = fresh_env(
        OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY=FAKE_KEY, EVALSITE_VAR_DIR=str(suite.parent)
    )
    process = subprocess.Popen(
        [str(EVALSITE), "run", str(suite), "--model", "good,bad", "--json", str(out)], cwd=suite.parent, env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_from_a_terminal,
    )  # fmt: skip
    files = [suite.parent / "results.good.json", suite.parent / "results.bad.json"]

    def ended(path) -> list:
        try:
            return json.loads(path.read_text())["evals"]
        except (OSError, ValueError):
            return []

    deadline = time.monotonic() + 60
    while not all(ended(path) for path in files) and time.monotonic() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=60)
    assert process.returncode == 130, err
    for path in files:
        document = json.loads(path.read_text())
        # Neither finished nor still going: cancelled, and why, with the conversations that ended.
        assert (document["status"], document["stop_reason"]) == ("cancelled", "interrupted (Ctrl-C)")
        assert [result["prompt"] for result in document["evals"]] == ["What is 2 + 2?"]
    assert f"in {files[0]}, {files[1]} with status `cancelled`" in err, err
    assert "spent" in err


def test_variants_whose_names_read_alike_as_file_names_get_a_json_file_each():
    from pathlib import Path

    from engine.matrix import parse_variants
    from evalsite.cli.matrix import json_paths

    variants = parse_variants(
        ["x/y", "x-y", "X-Y", "gpt-4o", "good@stop=['|']", "good@stop=[',']"], split=False
    )
    names = [path.name for path in json_paths(Path("/out/c.json"), variants)]
    assert len(set(names)) == len(names) == 6
    assert "c.gpt-4o.json" in names  # a name no other reads like keeps its plain file name


def test_a_matrix_says_why_a_variants_cells_are_errors(fake, tmp_path):
    from tests.engine.standalone import run_on
    from tests.fakeopenai.replies import Reply

    fake.rule("Question", Reply(status=400, text="no such model here"), model="broken")
    suite = tmp_path / "s.yaml"
    suite.write_text(
        "name: s\nmodel: gpt-test\nevals:\n"
        + "".join(f"  - {{prompt: Question {n}?, checks: [{{contains: OK}}]}}\n" for n in range(3))
    )
    result = run_on(fake, suite, "--model", "gpt-test,broken")
    assert result.returncode == 3, result.stdout + result.stderr
    assert (
        "broken: 3 of 3 conversations ended in an error (the first: HTTP 400 from default: no such model"
        in (result.stderr)
    )


def test_the_results_of_a_cancelled_run_are_read_once_its_last_turns_have_ended(monkeypatch):
    """A run cancelled on the server ends while its turns in flight finish: its results are read again until
    no conversation still plays, not at once, half-played."""
    from engine.loader import load_suite
    from engine.outcomes import Status
    from engine.results import RunReport, RunTotals, SuiteRef
    from engine.runner import not_started
    from evalsite.cli import remote

    suite = load_suite("name: s\nmodel: m\nevals:\n  - {prompt: hi, checks: [{contains: x}]}\n")

    def payload(status: Status) -> dict:
        result = not_started(suite, 0, 0, "cancelled").model_copy(update={"status": status})
        report = RunReport(
            suite=SuiteRef(name="s"), model="m", endpoint="default", status=status, evals=[result],
            totals=RunTotals.of([result]),
        )  # fmt: skip
        return report.model_dump(mode="json")

    answers = [payload(Status.RUNNING), payload(Status.RUNNING), payload(Status.CANCELLED)]

    class Server:
        def call(self, method, path):
            assert (method, path) == ("GET", "/api/runs/7/results")
            return 200, answers.pop(0)

    monkeypatch.setattr(remote, "POLL_SECONDS", 0.01)
    report = remote.settled_results(Server(), "7")
    assert [result.status for result in report.evals] == [Status.CANCELLED] and not answers


def test_a_named_endpoints_cap_shared_by_its_variants_is_said_with_the_concurrency():
    from engine.clients import EndpointConfig, EndpointRegistry
    from engine.matrix import parse_variants
    from evalsite.cli.matrix import shared_caps

    registry = EndpointRegistry(
        EndpointConfig(name="default", base_url="http://127.0.0.1:9/v1"),
        {"fake": EndpointConfig(name="fake", base_url="http://127.0.0.1:9/v2", max_concurrency=4)},
    )
    variants = parse_variants(["fake/a,fake/b,gpt-4o"])
    assert shared_caps(registry, variants, 3) == " (fake allows 4 at once, shared by its 2 variants)"
    assert shared_caps(registry, variants, 2) == ""  # 2 × 2 fit in 4


def test_a_matrix_on_a_server_follows_its_runs_together_and_says_each_end_as_it_comes(
    monkeypatch, tmp_path, capsys
):
    """`--server` with `--model a,b` polls every run still going each round, not the first run to its end and
    then the next: the second variant, which ends first, is said first, each end led by its variant's number
    and name, as a matrix played here says it (tests/e2e/test_e2e_matrix.py has the real server's)."""
    from engine.loader import load_suite
    from engine.outcomes import Status
    from engine.results import RunReport, RunTotals, SuiteRef
    from engine.runner import not_started
    from evalsite.cli import matrix, remote
    from evalsite.cli.main import main

    path = tmp_path / "s.yaml"
    path.write_text("name: s\nmodel: m\nevals:\n  - {prompt: hi, checks: [{contains: x}]}\n")
    suite = load_suite(path.read_text())
    passed = not_started(suite, 0, 0, "").model_copy(update={"status": Status.PASSED, "verdict": "ok"})
    results = RunReport(
        suite=SuiteRef(name="s"), model="m", endpoint="default", status=Status.PASSED, evals=[passed],
        totals=RunTotals.of([passed]),
    ).model_dump(mode="json")  # fmt: skip
    labels = ["m", "m temperature=0.7"]

    def progress(status: str, done: int) -> dict:
        counts = {"passed": done, "failed": 0, "error": 0}
        return {"status": status, "progress": {"done": done, "total": 1, "counts": counts}}

    asked = []

    class Server:
        def __init__(self, url, token):
            # The first run plays for three rounds, the second for one.
            running = progress("running", 0)
            self.polls = {
                "r1": [running, running, running, progress("passed", 1)],
                "r2": [running, progress("passed", 1)],
            }

        def launch(self, body, path):
            assert path == "/api/matrices" and [v["model"] for v in body["variants"]] == ["m", "m"]
            variants = [{"label": label, "run": {"id": f"r{n}"}} for n, label in enumerate(labels, 1)]
            return 201, {"id": "x", "suite": "s", "version": 1, "url": "http://server/matrices/x/",
                         "variants": variants}  # fmt: skip

        def call(self, method, path, body=None):
            run_id = path.split("/")[3]
            if path.endswith("/results"):
                return 200, results
            asked.append(run_id)
            return 200, self.polls[run_id].pop(0)

    monkeypatch.setattr(matrix, "Server", Server)
    monkeypatch.setattr(remote, "POLL_SECONDS", 0)
    monkeypatch.setenv("EVALSITE_TOKEN", "t")
    code = main(["run", str(path), "--server", "http://server", "--model", "m,m@temperature=0.7"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert asked == ["r1", "r2", "r1", "r2", "r1", "r1"]
    ends = [line for line in out.splitlines() if line.endswith(" errors of 1")]
    assert ends == [
        "[2/2] m temperature=0.7: 1 passed, 0 failed, 0 errors of 1",
        "[1/2] m: 1 passed, 0 failed, 0 errors of 1",
    ]
