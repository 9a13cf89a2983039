"""`evalsite run --server` whose launch loses its answer: a proxy in front of the live server forwards the
first `POST /api/runs`, lets the server make the run, and drops the connection before the answer. The CLI
sends the launch again with the same Idempotency-Key and gets the first run back: one version, one run."""

from __future__ import annotations

import socket
import threading

import pytest

from runs.models import LaunchKey, Run
from runs.tokens import create_token
from suites.models import SuiteVersion
from tests.e2e.test_e2e_ci import evalsite
from tests.factories import MOCK_CI_SUITE

pytestmark = [pytest.mark.e2e]


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(rest) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        rest += chunk
    return head + b"\r\n\r\n" + rest


class DroppingProxy:
    """Forwards each connection to `upstream` (the client asks to close it after one request); the first
    `POST /api/runs` reaches the server and gets its whole answer there, and the client gets none."""

    def __init__(self, upstream: tuple[str, int], path: bytes = b"/api/runs"):
        self.upstream = upstream
        self.path = path
        self.dropped: list[bytes] = []
        self.launches: list[bytes] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._relay, args=(conn,), daemon=True).start()

    def _relay(self, conn: socket.socket) -> None:
        with conn, socket.create_connection(self.upstream) as upstream:
            request = _read_request(conn)
            upstream.sendall(request)
            answer = b""
            while chunk := upstream.recv(65536):
                answer += chunk
            if request.startswith(b"POST " + self.path + b" "):
                self.launches.append(request)
                if not self.dropped:
                    self.dropped.append(answer)
                    conn.shutdown(socket.SHUT_RDWR)  # the run is made; its answer is lost
                    return
            conn.sendall(answer)

    def close(self) -> None:
        self.listener.close()


def _launched_through_a_dropping_proxy(live_server, user, start_worker, tmp_path, path: bytes, *arguments):
    """`evalsite run --server` on the mock CI suite through a DroppingProxy for `path`: the CLI's result and the
    proxy."""
    start_worker()
    _, token = create_token(user, "ci")
    suite = tmp_path / "suite.yaml"
    suite.write_text(MOCK_CI_SUITE.format(name="dropped"))
    host, port = live_server.url.removeprefix("http://").split(":")
    proxy = DroppingProxy((host, int(port)), path)
    try:
        result = evalsite(str(suite), "--server", proxy.url, *arguments, token=token, cwd=tmp_path)
    finally:
        proxy.close()
    assert result.returncode == 0, result.stderr
    return result, proxy


def test_a_launch_whose_answer_was_lost_is_sent_again_and_returns_the_same_run(
    live_server, user, start_worker, tmp_path
):
    result, proxy = _launched_through_a_dropping_proxy(
        live_server, user, start_worker, tmp_path, b"/api/runs"
    )
    assert b" 201 " in proxy.dropped[0].split(b"\r\n", 1)[0]  # the server made the run the first time
    assert len(proxy.launches) == 2
    keys = [
        line.split(b":", 1)[1].strip()
        for request in proxy.launches
        for line in request.split(b"\r\n")
        if line.lower().startswith(b"idempotency-key:")
    ]
    assert len(keys) == 2 and keys[0] == keys[1] and keys[0].startswith(b"evalsite-cli-")
    assert "sending it again with the same Idempotency-Key" in result.stderr
    run = Run.objects.get()
    assert SuiteVersion.objects.count() == 1 and run.status == "passed"
    assert f"Run {run.pk} of dropped v1 from ci on mock" in result.stderr  # no terminal: kept under `ci`
    assert LaunchKey.objects.get().run == run


def test_a_matrix_launch_whose_answer_was_lost_is_sent_again_and_returns_the_same_matrix(
    live_server, user, start_worker, tmp_path
):
    from runs.models import RunMatrix

    result, proxy = _launched_through_a_dropping_proxy(
        live_server, user, start_worker, tmp_path, b"/api/matrices", "--model", "mock,mock@temperature=0.5"
    )
    assert len(proxy.launches) == 2 and "sending it again with the same Idempotency-Key" in result.stderr
    matrix = RunMatrix.objects.get()  # one matrix, its two runs, made by the first launch
    assert Run.objects.count() == 2 and LaunchKey.objects.get().matrix == matrix
