"""`evalsite run suite.yaml --server URL --concurrency N`: a real `evalsite` process asks the live server, and a
real Celery worker plays against the fake endpoint. A concurrency above what the endpoint allows is refused in
one line, exit 2, before anything starts; a matrix's variants on one endpoint say that they share its slots,
and together never have more in flight than it allows; none given is no demand, held to the cap."""

from __future__ import annotations

import pytest

from endpoints.models import Endpoint
from runs.models import Run, RunMatrix, Status
from runs.tokens import create_token
from tests.e2e.test_e2e_ci import evalsite

pytestmark = [pytest.mark.e2e]


def suite(tmp_path, evals: int, name: str = "capped"):
    lines = [f"name: {name}", "model: fake/test-model", "evals:"]
    lines += [f"  - {{id: e{n}, prompt: 'Say OK {n}', checks: [{{match: '*OK*'}}]}}" for n in range(evals)]
    path = tmp_path / "suite.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def capped(fake_endpoint, fake_openai):
    """The fake endpoint, allowing 20 at once; it answers OK."""
    Endpoint.objects.filter(pk=fake_endpoint.pk).update(max_concurrency=20)
    fake_openai.rule("Say OK", "OK")
    return fake_openai


def test_a_concurrency_above_the_endpoints_cap_is_refused_in_one_line_and_nothing_runs(
    live_server, user, capped, tmp_path
):
    _, token = create_token(user, "ci")
    path = suite(tmp_path, 3)
    result = evalsite(
        str(path), "--server", live_server.url, "--concurrency", "40", token=token, cwd=tmp_path
    )
    assert result.returncode == 2 and result.stdout == ""
    [line] = result.stderr.splitlines()
    assert "concurrency 40: the endpoint fake allows 20 at once" in line
    assert "Endpoints → Endpoints → fake" in line and "nothing was started" in line
    assert not Run.objects.exists() and capped.chat_requests() == []


def test_a_matrix_shares_the_endpoints_slots_says_so_and_never_exceeds_them(
    live_server, user, capped, start_worker, tmp_path
):
    capped.latency = 0.3
    start_worker(concurrency=40)  # room for both variants' 15 at once: only the endpoint's cap holds them
    _, token = create_token(user, "ci")
    path = suite(tmp_path, 15, name="shared")
    result = evalsite(
        str(path), "--server", live_server.url, "--model", "fake/a,fake/b", "--concurrency", "15",
        token=token, cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert (
        "The variants on one endpoint share its slots: fake allows 20 at once, shared by its 2 variants"
        in result.stderr
    )
    runs = list(RunMatrix.objects.get().runs.all())
    assert [(run.concurrency, run.status) for run in runs] == [(15, Status.PASSED)] * 2
    assert len(capped.chat_requests()) == 30 and capped.max_in_flight <= 20


def test_no_concurrency_given_plays_the_default_held_to_the_cap(
    live_server, user, capped, start_worker, tmp_path
):
    Endpoint.objects.filter(name="fake").update(max_concurrency=4)
    capped.latency = 0.2
    start_worker(concurrency=10)
    _, token = create_token(user, "ci")
    result = evalsite(str(suite(tmp_path, 8)), "--server", live_server.url, token=token, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    run = Run.objects.get()
    assert (run.concurrency, run.status) == (4, Status.PASSED)
    assert capped.max_in_flight <= 4
