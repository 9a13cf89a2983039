"""`evalsite run --server` once the run is launched: losing it meanwhile (the token revoked, the server away)
leaves its result unknown, exit 3, and says that the run goes on on the server, at its URL. In-process, with
the server's answers made here."""

from __future__ import annotations

import pytest

from evalsite.cli import matrix, remote
from evalsite.cli.main import main

SUITE = "name: s\nmodel: m\nevals:\n  - {prompt: hi, checks: [{contains: x}]}\n"
RUNNING = {
    "status": "running",
    "progress": {"done": 0, "total": 1, "counts": {"passed": 0, "failed": 0, "error": 0}},
}
REFUSED = (401, {"detail": "Unauthorized"})


class Server(remote.Server):
    """Launches run r1 (or a matrix of r1 and r2), sees it running once, then refuses the token."""

    def _send(self, method, path, body, headers):
        if method == "POST" and path == "/api/runs":
            launched = {"id": "r1", "url": "http://server/runs/r1/", "suite": "s", "version": 1, "model": "m"}
            return 201, launched
        if method == "POST" and path == "/api/matrices":
            variants = [{"label": label, "run": {"id": f"r{n}"}} for n, label in enumerate(("m", "n"), 1)]
            return 201, {
                "id": "x",
                "suite": "s",
                "version": 1,
                "url": "http://server/matrices/x/",
                "variants": variants,
            }
        self.polls = getattr(self, "polls", 0) + 1
        return (200, RUNNING) if self.polls == 1 else REFUSED


@pytest.fixture
def suite(tmp_path, monkeypatch):
    monkeypatch.setattr(remote, "Server", Server)
    monkeypatch.setattr(matrix, "Server", Server)
    monkeypatch.setattr(remote, "POLL_SECONDS", 0)
    monkeypatch.setenv("EVALSITE_TOKEN", "evs_revoked-meanwhile")
    path = tmp_path / "s.yaml"
    path.write_text(SUITE)
    return path


def test_a_token_revoked_while_the_run_plays_is_exit_3_naming_the_run_that_goes_on(suite, capsys):
    code = main(["run", str(suite), "--server", "http://server", "--ref", "main"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert "refused the token (401)" in err
    assert err.rstrip().endswith("; the run goes on on the server: http://server/runs/r1/")


def test_so_is_a_matrix_whose_token_is_revoked_while_its_runs_play(suite, capsys):
    code = main(["run", str(suite), "--server", "http://server", "--model", "m,n", "--ref", "main"])
    err = capsys.readouterr().err
    assert code == 3, err
    assert err.rstrip().endswith("; the matrix goes on on the server: http://server/matrices/x/")
