"""`evalsite run` and money: the estimate on stderr before the run, and `--max-cost`, which stops starting
conversations once spent, keeps the finished ones in the JSON and exits 3, the result being unknown."""

from __future__ import annotations

import json

from tests.engine.standalone import run_on

FIVE = "name: budget\nmodel: gpt-test\nevals:\n" + "".join(
    f"  - id: e{n}\n    input: question {n}\n    checks: [{{contains: OK}}]\n" for n in range(5)
)
# $1 a completion token on the default endpoint: each "OK" reply costs $1.
PRICED = {"EVALSITE_DEFAULT_PRICE_INPUT": "0", "EVALSITE_DEFAULT_PRICE_OUTPUT": "1000000"}


def test_max_cost_stops_the_run_keeps_the_finished_and_exits_3(fake, tmp_path):
    path = tmp_path / "budget.yaml"
    path.write_text(FIVE)
    out = tmp_path / "out.json"
    result = run_on(fake, path, "--max-cost", "2", "--concurrency", "1", "--json", str(out), **PRICED)
    assert result.returncode == 3, result.stdout + result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("cost: ≈ $1,000.00 (up to $4,000.00): 5 conversations × 1 turn")
    assert lines[0].endswith(" · limit $2.00")
    assert "stopped: cost limit $2.00 reached (spent $2.00; 2 of 5 conversations played" in result.stderr
    # What it did not play has no verdict: the report names it, counts it, and says STOPPED, not FAIL.
    assert "⏹ STOPPED not started (cost limit $2.00 reached): Eval 3, Eval 4, Eval 5\n" in result.stdout
    assert "Summary: 2 passed, 0 failed, 0 errors, 3 not started of 5 evals" in result.stdout
    assert "\nOverall: ⏹ STOPPED (cost limit $2.00 reached)\n" in result.stdout
    report = json.loads(out.read_text())
    assert report["status"] == "cancelled" and report["stop_reason"] == "cost limit $2.00 reached"
    assert [e["status"] for e in report["evals"]] == ["passed", "passed"] + ["cancelled"] * 3
    assert report["evals"][0]["turns"][0]["response"] == "OK"
    assert report["evals"][4]["verdict"] == "not started: cost limit $2.00 reached"
    assert len(fake.chat_requests()) == 2


def test_under_the_limit_the_run_plays_on_and_an_unpriced_endpoint_is_said(fake, tmp_path):
    path = tmp_path / "budget.yaml"
    path.write_text(FIVE)
    passed = run_on(fake, path, "--max-cost", "50", **PRICED)
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert "stopped" not in passed.stderr and len(fake.chat_requests()) == 5
    unpriced = run_on(fake, path, "--max-cost", "2")
    assert unpriced.returncode == 0, unpriced.stdout + unpriced.stderr
    assert unpriced.stderr.startswith("cost: no prices set for endpoint default: cost unknown")
    assert "never stops the run" in unpriced.stderr


def test_max_cost_must_be_an_amount(fake, tmp_path):
    path = tmp_path / "budget.yaml"
    path.write_text(FIVE)
    result = run_on(fake, path, "--max-cost", "-1")
    assert result.returncode == 2
    assert "'-1' is not an amount of US dollars above 0" in result.stderr


def test_a_matrix_says_each_variants_estimate_and_their_sum(fake, tmp_path):
    path = tmp_path / "budget.yaml"
    path.write_text(FIVE)
    fake.rule("question", "OK")
    result = run_on(fake, path, "--model", "gpt-test,gpt-test@max_tokens=2", **PRICED)
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("cost: ")]
    assert [line.split(": ")[1] for line in lines] == ["gpt-test", "gpt-test max_tokens=2", "both variants"]
    assert lines[0].startswith("cost: gpt-test: ≈ $1,000.00 (up to $4,000.00): 5 conversations × 1 turn")
    assert lines[1].startswith("cost: gpt-test max_tokens=2: ≈ $10.00 (up to $10.00): 5 conversations")
    assert lines[2] == "cost: both variants: ≈ $1,010.00 (up to $4,010.00)"


def test_a_limit_on_the_mock_endpoint_is_said_never_to_be_reached(fake, tmp_path):
    path = tmp_path / "mock.yaml"
    path.write_text(FIVE.replace("model: gpt-test", "model: mock"))
    result = run_on(fake, path, "--max-cost", "1")
    assert result.returncode == 1, result.stdout + result.stderr  # the mock answers no "OK"
    assert result.stderr.splitlines()[0] == "cost: none, the mock endpoint · limit $1.00, never reached"


def test_a_matrix_gives_each_variant_the_limit_and_says_what_each_stop_left_unplayed(fake, tmp_path):
    """Each variant is a run with the limit of its own: the estimate says so, and each variant's end line
    counts the evals it never started and says why, not only those it played."""
    path = tmp_path / "budget.yaml"
    path.write_text(FIVE)
    args = ("--model", "gpt-test,gpt-test@seed=1", "--max-cost", "2", "--concurrency", "1")
    result = run_on(fake, path, *args, **PRICED)
    assert result.returncode == 3, result.stdout + result.stderr
    costs = [line for line in result.stderr.splitlines() if line.startswith("cost: ")]
    assert len(costs) == 3 and all(line.endswith(" · limit $2.00 a variant") for line in costs)
    for name in ("[1/2] gpt-test", "[2/2] gpt-test seed=1"):
        assert (
            f"{name}: 2 passed, 0 failed, 0 errors, 3 not started (cost limit $2.00 reached) of 5"
            in result.stdout.splitlines()
        ), result.stdout
    assert (
        "gpt-test seed=1: stopped: cost limit $2.00 reached (spent $2.00; 2 of 5 conversations played, the "
        "rest not started)"
    ) in result.stderr
    assert "e4    not started  not started      incomplete" in result.stdout  # the grid says it too
    assert len(fake.chat_requests()) == 4
