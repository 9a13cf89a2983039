"""What `evalsite run` shows while it plays and after: the live line on a terminal, the plain progress line in
CI, the report as conversations end (compact, --verbose, --quiet), --json on disk mid-run, --concurrency.

Every run is the installed command in a subprocess against the fake endpoint."""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import struct
import subprocess
import termios
import time
from pathlib import Path

import pytest

from engine.results import RunReport
from tests.conftest import FAKE_KEY
from tests.engine.standalone import EVALSITE, fresh_env, run_on
from tests.fakeopenai import FakeOpenAI


def many(tmp_path: Path, count: int, failing: tuple[int, ...] = ()) -> Path:
    """A suite of `count` one-turn evals that pass on the fake's default reply "OK", but those `failing`."""
    lines = ["name: many", "model: gpt-test", "evals:"]
    for number in range(count):
        wanted = "NOPE" if number in failing else "OK"
        lines += [f"  - prompt: Question {number}?", "    checks:", f'      - match: "*{wanted}*"']
    path = tmp_path / "many.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def env_for(fake: FakeOpenAI, folder: Path, **extra: str) -> dict[str, str]:
    return fresh_env(
        OPENAI_BASE_URL=fake.base_url, OPENAI_API_KEY=FAKE_KEY, EVALSITE_VAR_DIR=str(folder), **extra
    )


def start(suite: Path, *args: str, env: dict[str, str], **streams) -> subprocess.Popen:
    return subprocess.Popen(
        [str(EVALSITE), "run", str(suite), *args], cwd=suite.parent, env=env, text=True, **streams
    )


@pytest.fixture
def slow():
    with FakeOpenAI(latency=1.0, api_key=FAKE_KEY) as server:
        yield server


def in_a_terminal(suite: Path, *args: str, env: dict[str, str], columns: int = 120) -> list[tuple[bool, str]]:
    """Run in a pseudo-terminal `columns` wide; what it wrote, chunk by chunk, each with whether the command
    was still running when the chunk was read."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    # The terminal's own size governs, not a COLUMNS or LINES the test runner's environment may hold.
    env = {key: value for key, value in env.items() if key not in ("COLUMNS", "LINES")}
    process = start(
        suite, *args, env={**env, "TERM": "xterm-256color"}, stdin=slave, stdout=slave, stderr=slave
    )
    os.close(slave)
    chunks: list[tuple[bool, str]] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.05)
            running = process.poll() is None
            if ready:
                try:
                    data = os.read(master, 65536)
                except OSError:  # the terminal's other end closed: the command has ended
                    break
                if not data:
                    break
                chunks.append((running, data.decode("utf-8", "replace")))
            elif not running:
                break
    finally:
        os.close(master)
        if process.poll() is None:
            process.kill()
        process.wait(timeout=10)
    return chunks


def test_a_terminal_shows_the_live_line_and_each_eval_as_it_ends(slow, tmp_path):
    """Six one-second conversations two at a time: the live line counts them while the run goes, and each
    ended conversation is printed then, not all at the end."""
    suite = many(tmp_path, 6, failing=(5,))
    chunks = in_a_terminal(suite, "--concurrency", "2", env=env_for(slow, tmp_path))
    during = "".join(text for running, text in chunks if running)
    whole = "".join(text for _, text in chunks)
    assert "/6 · " in during and "calls in flight" in during, whole
    assert "2 calls in flight" in during, whole
    assert "✅ PASS Eval 1: Question 0? (succeeded on turn 1)" in during, whole
    assert "Summary: 5 passed, 1 failed, 0 errors of 6 evals" in whole
    # The failure is shown turn by turn, the passes on a line each.
    assert "Eval 6: Question 5?" in whole and "Response: OK" in whole
    assert whole.count("Response: OK") == 1


def test_without_a_terminal_a_progress_line_every_few_seconds_and_each_eval_as_it_ends(slow, tmp_path):
    suite = many(tmp_path, 4)
    process = start(
        suite, "--concurrency", "1", "--progress-every", "0.5",
        env=env_for(slow, tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
    )  # fmt: skip
    first = process.stdout.readline()
    while not first.startswith("✅"):
        first = first and process.stdout.readline()
        assert first, "the command ended before a conversation was printed"
    running_at_first_eval = process.poll() is None
    rest, errors = process.communicate(timeout=60)
    assert process.returncode == 0, rest + errors
    assert first.startswith("✅ PASS Eval 1: Question 0?") and running_at_first_eval
    progress = [line for line in errors.splitlines() if line.startswith("progress: ")]
    assert len(progress) >= 4, errors
    assert progress[0].startswith("progress: 0/4 · 0 passed · 0 failed · 0 errors · ")
    # The default endpoint here has no prices: what the run spends is not known, and the line says so.
    assert any(" · 1 call in flight · cost unknown · " in line for line in progress), errors
    assert any("ETA" in line for line in progress), errors


def test_a_short_run_in_ci_writes_nothing_on_stderr(fake, suite):
    fake.script("What is 15 * 7?", ["105"])
    fake.script("What is 2 + 2?", ["4"])
    result = run_on(fake, suite)
    assert result.returncode == 0 and result.stderr == ""


@pytest.mark.parametrize(
    ("flag", "shown", "hidden"),
    [
        (
            None,
            [
                "✅ PASS Eval 1: What is 15 * 7? (succeeded on turn 1)",
                "Eval 2: What is 2 + 2?",
                "Response: 5",
            ],
            ["Response: 105"],
        ),
        ("--verbose", ["Eval 1: What is 15 * 7?", "Response: 105", "Response: 5"], ["✅ PASS Eval"]),
        ("--quiet", ["Summary: 1 passed, 1 failed"], ["Suite: standalone", "Eval ", "Response"]),
    ],
)
def test_the_report_is_compact_verbose_or_quiet(fake, suite, flag, shown, hidden):
    fake.script("What is 15 * 7?", ["105"])
    fake.script("What is 2 + 2?", ["5"])
    result = run_on(fake, suite, *([flag] if flag else []))
    assert result.returncode == 1, result.stdout + result.stderr
    for text in shown:
        assert text in result.stdout
    for text in hidden:
        assert text not in result.stdout
    assert result.stdout.splitlines()[-1].startswith("Overall: ❌ FAIL")
    if flag == "--quiet":
        assert result.stdout.startswith("Summary: ")


def read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def test_json_holds_each_conversation_as_it_ends_and_a_killed_run_leaves_them(slow, tmp_path):
    suite = many(tmp_path, 8)
    out = tmp_path / "out.json"
    process = start(
        suite, "--concurrency", "2", "--json", str(out),
        env=env_for(slow, tmp_path), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        seen = None
        while time.monotonic() < deadline and process.poll() is None:
            seen = read_json(out)
            if seen is not None and len(seen["evals"]) >= 2:
                break
            time.sleep(0.05)
        assert seen is not None and len(seen["evals"]) >= 2 and process.poll() is None
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    finally:
        if process.poll() is None:
            process.kill()
    left = read_json(out)
    assert left is not None, out.read_text()
    assert left["format"] == "evalsite.results/1" and left["status"] == "running"
    assert left["model"] == "gpt-test" and left["endpoint"] == "default"
    assert 2 <= len(left["evals"]) < 8
    assert all(
        item["status"] == "passed" and item["prompt"].startswith("Question ") for item in left["evals"]
    )


def test_json_of_a_finished_run_is_the_whole_document_in_the_evals_order(tmp_path):
    with FakeOpenAI(latency=0.05, api_key=FAKE_KEY) as fake:
        suite = many(tmp_path, 12, failing=(3,))
        out = tmp_path / "out.json"
        result = subprocess.run(
            [str(EVALSITE), "run", str(suite), "--concurrency", "5", "--json", str(out)],
            cwd=tmp_path, env=env_for(fake, tmp_path), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    text = out.read_text(encoding="utf-8")
    report = RunReport.model_validate_json(text)
    assert [item.index for item in report.evals] == list(range(12))
    assert report.status == "failed" and report.totals.evals == 12 and report.totals.failed == 1
    # The very text the report's own dump gives: nothing of the streamed document is left.
    assert text == json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
    assert not list(tmp_path.glob(".out.json*"))


def test_json_keeps_a_reply_with_a_line_separator_as_the_model_wrote_it(tmp_path):
    """A reply holding U+2028 (a line break to Python, not to JSON) and other text outside ASCII: the
    conversations written as they end make up the very text json.dumps gives of the report."""
    reply = "OK \u2028 après \u00e9t\u00e9 \u2029 \U0001f600"
    with FakeOpenAI(latency=0.01, api_key=FAKE_KEY) as fake:
        fake.rule("Question", reply)
        suite = many(tmp_path, 4)
        out = tmp_path / "out.json"
        result = subprocess.run(
            [str(EVALSITE), "run", str(suite), "--concurrency", "2", "--json", str(out)],
            cwd=tmp_path, env=env_for(fake, tmp_path), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    text = out.read_text(encoding="utf-8")
    report = RunReport.model_validate_json(text)
    assert [item.turns[0].response for item in report.evals] == [reply] * 4
    assert text == json.dumps(report.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"


def test_concurrency_raises_the_default_endpoints_cap(tmp_path):
    """300 one-second conversations at --concurrency 300: all at once, not ten at a time."""
    with FakeOpenAI(latency=1.0, api_key=FAKE_KEY) as fake:
        suite = many(tmp_path, 300)
        out = tmp_path / "out.json"
        result = subprocess.run(
            [str(EVALSITE), "run", str(suite), "--concurrency", "300", "--quiet", "--json", str(out)],
            cwd=tmp_path, env=env_for(fake, tmp_path), capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert result.returncode == 0, result.stdout + result.stderr
        assert fake.max_in_flight > 200
    assert "held to" not in result.stderr
    assert RunReport.model_validate_json(out.read_text()).totals.duration_s < 6


def test_control_characters_in_a_reply_are_shown_escaped_never_acted_on(tmp_path):
    """A reply that would recolour the terminal, retitle it, clear it, overwrite a line or reverse the text
    after it is printed with those characters escaped, in the report and in its prompt line; --json keeps
    the reply as the model wrote it."""
    reply = "before \x1b[31mRED\x1b[0m \x1b]0;PWNED\x07 \x1b[2J back\rover \u202eevil \x9b"
    with FakeOpenAI(latency=0.01, api_key=FAKE_KEY) as fake:
        fake.rule("Question", reply)
        suite = many(tmp_path, 2, failing=(1,))
        suite.write_text(suite.read_text().replace("prompt: Question 1?", 'prompt: "Question 1? \\e[1mbold"'))
        out = tmp_path / "out.json"
        result = subprocess.run(
            [str(EVALSITE), "run", str(suite), "--json", str(out)],
            cwd=tmp_path, env=env_for(fake, tmp_path), capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert result.returncode == 1, result.stdout + result.stderr
    for acting in ("\x1b", "\x07", "\r", "\u202e", "\x9b"):
        assert acting not in result.stdout + result.stderr
    # A carriage return starts a line of its own, as the report shows every line break of a reply.
    shown = (
        "Response: before \\x1b[31mRED\\x1b[0m \\x1b]0;PWNED\\x07 \\x1b[2J back\n      over \\u202eevil \\x9b"
    )
    assert shown in result.stdout
    assert "Question 1? \\x1b[1mbold" in result.stdout
    report = RunReport.model_validate_json(out.read_text(encoding="utf-8"))
    assert {item.turns[0].response for item in report.evals} == {reply}
