"""Every request costs bounded memory. A body over its limit is refused with 413 before anything reads it (a
page, JSON under /api/, a fragment for htmx): EVALSITE_MAX_UPLOAD_BYTES for what carries attached files (a
multipart upload, the API's launch), EVALSITE_MAX_REQUEST_BYTES for the rest and for an upload's form
fields. No refusal sends the body back: a suite over its 1 MB is refused as it came, not parsed, not shown
again in the editor.

The first tests use Django's client; the last serve the app with gunicorn, as `make run` does, and measure
its process while 50 MB bodies are sent to every write path."""

from __future__ import annotations

import html
import json
import re
import select
import socket
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from evalsite.cli.common import UserError
from evalsite.cli.remote import Server
from suites.models import Suite, SuiteVersion
from suites.services import create_suite
from tests.conftest import ROOT
from tests.web.test_evalserve import children, free_port, set_up_var

GOOD = "name: keep-me\nmodel: mock\nevals:\n  - prompt: hi\n    checks:\n      - match: '*'\n"
MB = 1_000_000
UPLOADS = "this server accepts at most 25.0 MB in one request (EVALSITE_MAX_UPLOAD_BYTES)"
REQUESTS = "this server accepts at most 4.0 MB in one request (EVALSITE_MAX_REQUEST_BYTES)"


def refusal(url: str) -> str:
    """What a refusal says at `url` as `declaring` sends to it: multipart pages and the API's launch take
    uploads, the rest of the API plain requests."""
    return REQUESTS if url.startswith("/api/") and url != "/api/runs" else UPLOADS


@pytest.fixture
def suite(user):
    return create_suite(owner=user, source=GOOD)


def write_paths(suite: Suite) -> dict[str, str]:
    """Every URL that takes a body: the editor's forms and uploads, Import, the launch form and the API."""
    return {
        "validate": reverse("suites:validate"),
        "new": reverse("suites:new"),
        "save": reverse("suites:detail", args=[suite.public_id]),
        "upload": reverse("suites:upload"),
        "attach": reverse("suites:attach_files", args=[suite.public_id]),
        "remove": reverse("suites:remove_file", args=[suite.public_id]),
        "launch": reverse("suites:launch", args=[suite.public_id]),
        "import": reverse("suites:import"),
        "api runs": "/api/runs",
        "api validate": "/api/suites/validate",
    }


def declaring(client: Client, url: str, size: int, **extra):
    """A POST that declares `size` bytes and carries a few: what is refused must not be read to find out."""
    content_type = "application/json" if url.startswith("/api/") else "multipart/form-data; boundary=b"
    return client.generic(
        "POST", url, b"--b--\r\n", content_type=content_type, CONTENT_LENGTH=str(size), **extra
    )


@pytest.mark.django_db
def test_a_body_over_the_limit_is_refused_on_every_write_path_before_it_is_read(suite, user):
    # CSRF checks on: a 413, not a 403, shows the refusal came before anything read the form.
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    for name, url in write_paths(suite).items():
        response = declaring(client, url, 50 * MB)
        assert response.status_code == 413, name
        text = html.unescape(response.content.decode())
        assert "This request's body is 50.0 MB; " + refusal(url) in text, name
        assert len(response.content) < 20_000, name
        if url.startswith("/api/"):
            assert response.json() == {"detail": "This request's body is 50.0 MB; " + refusal(url) + ". Nothing was read or stored."}  # fmt: skip
        else:
            assert "<title>Request refused · evalsite</title>" in text, name
    assert SuiteVersion.objects.count() == 1


@pytest.mark.django_db
def test_an_htmx_request_gets_a_line_to_show_where_it_was_aimed(suite, user):
    client = Client()
    client.force_login(user)
    response = declaring(client, reverse("suites:validate"), 30 * MB, HTTP_HX_REQUEST="true")
    assert response.status_code == 413 and response["HX-Reswap"] == "innerHTML"
    assert response.content.decode() == (
        f'<p class="error" role="alert">This request&#x27;s body is 30.0 MB; {UPLOADS}. '
        "Nothing was read or stored.</p>"
    )
    # The pages tell htmx to swap a 413 in (it drops 4xx answers unless told).
    page = client.get(reverse("suites:new")).content.decode()
    assert '{"code": "41[13]", "swap": true, "error": true}' in page


@pytest.mark.django_db
def test_each_limit_is_one_setting(suite, user, settings):
    settings.EVALSITE_MAX_UPLOAD_BYTES = 2 * MB
    settings.EVALSITE_MAX_REQUEST_BYTES = MB
    client = Client()
    client.force_login(user)
    assert declaring(client, reverse("suites:validate"), 2 * MB + 1).status_code == 413
    form = "application/x-www-form-urlencoded"
    response = client.generic("POST", reverse("suites:validate"), b"source=", content_type=form,
                              CONTENT_LENGTH=str(MB + 1))  # fmt: skip
    assert response.status_code == 413 and "(EVALSITE_MAX_REQUEST_BYTES)" in response.content.decode()
    # Under each limit, as a plain form and as an upload.
    response = client.post(reverse("suites:validate"), f"source={GOOD}", content_type=form)
    assert response.status_code == 200 and "problems" in response.content.decode()
    response = client.post(reverse("suites:validate"), {"source": GOOD + "#" * (MB // 2)})
    assert response.status_code == 200 and "problems" in response.content.decode()


@pytest.mark.django_db
def test_an_uploads_form_fields_are_held_to_the_smaller_limit(suite, user, settings):
    """An upload may be large for its files, which wait on disk; its text is read into memory, so a 16 MB
    suite sent as a form field is refused, as a plain form of that size is, and not sent back."""
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = MB
    client = Client()
    client.force_login(user)
    for name in ("validate", "new", "save"):
        response = client.post(write_paths(suite)[name], {"source": GOOD + "#" * 16 * MB, "note": "big"})
        assert response.status_code == 413, name
        text = html.unescape(response.content.decode())
        assert "form fields are larger than 1.0 MB" in text and len(response.content) < 20_000, name
    assert SuiteVersion.objects.count() == 1


@pytest.mark.django_db
@pytest.mark.parametrize("path", ["validate", "new", "save"])
def test_a_suite_over_1_mb_is_refused_without_being_sent_back(suite, user, path):
    client = Client()
    client.force_login(user)
    source = GOOD + "#" + "é" * 800_000  # 1.6 MB of UTF-8, 0.8 M characters
    response = client.post(write_paths(suite)[path], {"source": source, "note": "big"})
    text = response.content.decode()
    assert "the suite is larger than 1 MB; nothing was stored" in text
    assert "é" * 100 not in text and len(response.content) < 200_000
    assert SuiteVersion.objects.count() == 1


@pytest.mark.django_db
def test_import_refuses_a_pasted_suite_over_1_mb_without_sending_it_back(user):
    client = Client()
    client.force_login(user)
    for fields in ({"pasted": GOOD + "#" * 2 * MB}, {"action": "create", "source": GOOD + "#" * 2 * MB}):
        response = client.post(reverse("suites:import"), fields)
        assert response.status_code == 400
        assert "larger than 1 MB" in response.content.decode() and "#" * 1000 not in response.content.decode()
        assert len(response.content) < 200_000
    assert not Suite.objects.exists()


# --- a real process -------------------------------------------------------------------------------------------

CHUNK = 64 * 1024


class Served:
    """gunicorn serving the app with one sync process, as `make run` does; a signed-in session to use it."""

    def __init__(self, server: subprocess.Popen, port: int, worker: int, cookies: dict[str, str]):
        self.server, self.port, self.worker, self.cookies = server, port, worker, cookies

    def memory(self) -> tuple[int, int]:
        """The worker's resident memory now and at its peak, in MB."""
        status = Path(f"/proc/{self.worker}/status").read_text()
        now, peak = (
            int(re.search(rf"{key}:\s+(\d+) kB", status).group(1)) // 1024 for key in ("VmRSS", "VmHWM")
        )
        return now, peak

    def headers(self) -> dict[str, str]:
        cookie = "; ".join(f"{key}={value}" for key, value in self.cookies.items())
        return {
            "Cookie": cookie,
            "X-CSRFToken": self.cookies["csrftoken"],
            "Referer": f"http://127.0.0.1:{self.port}/",
        }

    def send(self, method: str, path: str, body: Iterable[bytes] = (), *, length: int | None = 0,
             headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:  # fmt: skip
        """One request over a raw socket, the body streamed (so this process never holds it); sending stops
        as soon as an answer arrives, as a browser's does. `length` None sends it chunked."""
        body = iter(body)
        head = {"Host": f"127.0.0.1:{self.port}", "Connection": "close", **self.headers(), **(headers or {})}
        head["Content-Length" if length is not None else "Transfer-Encoding"] = str(length) if length is not None else "chunked"  # fmt: skip
        with socket.create_connection(("127.0.0.1", self.port), timeout=120) as sock:
            sock.sendall(f"{method} {path} HTTP/1.1\r\n".encode() + "".join(f"{k}: {v}\r\n" for k, v in head.items()).encode() + b"\r\n")  # fmt: skip
            try:
                for chunk in body:
                    if select.select([sock], [], [], 0)[0]:
                        break  # answered before the body was all sent
                    sock.sendall(chunk if length is not None else b"%x\r\n%s\r\n" % (len(chunk), chunk))
                else:
                    if length is None:
                        sock.sendall(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                pass
            raw = b""
            try:
                while data := sock.recv(CHUNK):
                    raw += data
            except ConnectionResetError:
                pass
        head_bytes, _, content = raw.partition(b"\r\n\r\n")
        lines = head_bytes.decode("latin-1").split("\r\n")
        answer_headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
        if answer_headers.get("Transfer-Encoding") == "chunked":
            content = _unchunk(content)
        return int(lines[0].split()[1]), answer_headers, content


def _unchunk(data: bytes) -> bytes:
    out = b""
    while data:
        size_line, _, data = data.partition(b"\r\n")
        size = int(size_line.split(b";")[0] or b"0", 16)
        if size == 0:
            break
        out, data = out + data[:size], data[size + 2 :]
    return out


def multipart(fields: dict[str, str], file_field: str | None, size: int) -> tuple[str, int, Iterator[bytes]]:
    """A multipart body of `fields`, then `size` bytes of '#' as a file (or as the last field's value when
    `file_field` is None): its content type, length and parts, made as they are sent."""
    boundary = "----evalsite-limit"
    lead = "".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'
        for k, v in fields.items()
    )
    if file_field:
        lead += (
            f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; filename="big.jsonl"\r\n'
        )
        lead += "Content-Type: application/octet-stream\r\n\r\n"
    else:
        lead = lead.removesuffix("\r\n")
    tail = f"\r\n--{boundary}--\r\n".encode()
    return f"multipart/form-data; boundary={boundary}", len(lead.encode()) + size + len(tail), _parts(lead.encode(), size, tail)  # fmt: skip


def _parts(lead: bytes, size: int, tail: bytes) -> Iterator[bytes]:
    yield lead
    block = b"#" * CHUNK
    for _ in range(size // CHUNK):
        yield block
    yield b"#" * (size % CHUNK)
    yield tail


def big_json(key: str, size: int, extra: dict | None = None) -> tuple[str, int, Iterator[bytes]]:
    prefix = json.dumps(extra or {})[:-1] + (", " if extra else "") + f'"{key}": "'
    return "application/json", len(prefix) + size + 2, _parts(prefix.encode(), size, b'"}')


@pytest.fixture(scope="module")
def gunicorn(tmp_path_factory):
    """One server for the module's tests: its start and sign-in are most of a test's time."""
    tmp_path = tmp_path_factory.mktemp("gunicorn")
    var_env = set_up_var(tmp_path / "var")
    port = free_port()
    log = (tmp_path / "gunicorn.log").open("wb")
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "evalsite.wsgi:application", "--worker-class", "sync", "--workers", "1",
         "--timeout", "300", "--bind", f"127.0.0.1:{port}", "--control-socket", str(tmp_path / "gunicorn.ctl")],
        cwd=ROOT, env=var_env, stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        workers = []
        while not workers:
            assert time.monotonic() < deadline and server.poll() is None, (
                tmp_path / "gunicorn.log"
            ).read_text()
            workers = [pid for pid, command in children(server.pid) if "gunicorn" in command]
            time.sleep(0.2)
        site = Served(server, port, workers[0], {"csrftoken": ""})
        while True:
            try:
                status, headers, page = site.send("GET", "/accounts/login/")
                break
            except OSError:
                assert time.monotonic() < deadline, (tmp_path / "gunicorn.log").read_text()
                time.sleep(0.2)
        site.cookies["csrftoken"] = re.search(r"csrftoken=([^;]+)", headers["Set-Cookie"]).group(1)
        password = (Path(var_env["EVALSITE_VAR_DIR"]) / "admin-password").read_text().strip()
        form = urllib.parse.urlencode({"username": "admin", "password": password, "csrfmiddlewaretoken": site.cookies["csrftoken"]}).encode()  # fmt: skip
        status, headers, _ = site.send("POST", "/accounts/login/", iter([form]), length=len(form),
                                       headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
        assert status == 302, headers
        site.cookies["sessionid"] = re.search(r"sessionid=([^;]+)", headers["Set-Cookie"]).group(1)
        yield site
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log.close()


@pytest.fixture
def served(gunicorn):
    """The module's server, its worker's peak memory reset to what it holds now, so that each test measures
    only its own requests."""
    workers = [pid for pid, command in children(gunicorn.server.pid) if "gunicorn" in command]
    assert workers == [gunicorn.worker], f"gunicorn's worker was replaced: {workers}, {gunicorn.worker}"
    Path(f"/proc/{gunicorn.worker}/clear_refs").write_text("5")
    now, peak = gunicorn.memory()
    assert peak - now < 5, (now, peak)
    return gunicorn


def _suite_id(site: Served) -> str:
    _, _, page = site.send("GET", "/suites/")
    return re.search(rb'href="/suites/([0-9a-f-]{36})/"', page).group(1).decode()


def _bodies(suite_id: str, size: int) -> dict[str, tuple[str, tuple[str, int, Iterator[bytes]]]]:
    """Each write path with a body of about `size` bytes, shaped as its page or client sends it."""
    return {
        "validate": ("/suites/validate/", multipart({"source": ""}, None, size)),
        "new": ("/suites/new/", multipart({"note": "x", "source": ""}, None, size)),
        "save": (f"/suites/{suite_id}/", multipart({"note": "x", "source": ""}, None, size)),
        "upload": ("/suites/upload/", multipart({"suite": suite_id}, "file", size)),
        "attach": (f"/suites/{suite_id}/files/", multipart({}, "files", size)),
        "import": ("/suites/import/", multipart({}, "files", size)),
        "launch": (f"/suites/{suite_id}/launch/", multipart({"concurrency": "1", "model": ""}, None, size)),
        "api runs": ("/api/runs", big_json("yaml", size)),
        "api validate": ("/api/suites/validate", big_json("source", size)),
    }


@pytest.mark.timeout(600)
def test_50_mb_to_every_write_path_leaves_gunicorn_within_100_mb_and_is_answered_briefly(served):
    suite_id = _suite_id(served)
    for name, (path, (content_type, length, parts)) in _bodies(suite_id, 1_000).items():  # warm every path up
        status, _, _ = served.send("POST", path, parts, length=length, headers={"Content-Type": content_type})
        assert status < 500, name
    start, _ = served.memory()
    for name, (path, (content_type, length, parts)) in _bodies(suite_id, 50 * MB).items():
        began = time.monotonic()
        status, _, content = served.send(
            "POST", path, parts, length=length, headers={"Content-Type": content_type}
        )
        assert status == 413, (name, content[:300])
        assert len(content) < 20_000 and b"50.0 MB" in content, name
        assert time.monotonic() - began < 5, name
    now, peak = served.memory()
    print(f"gunicorn worker: {start} MB before, {now} MB after, peak {peak} MB")
    assert peak - start < 100


@pytest.mark.timeout(600)
def test_16_mb_suites_leave_gunicorn_within_100_mb_and_are_not_sent_back(served):
    """A 16 MB suite: as a form field, held to the smaller limit and refused before it is read whole; as the
    API's launch, whose body may carry attached files, read but over its 1 MB, so refused, never parsed,
    copied or shown again (each took 2.2 GB and answered 22.9 MB)."""
    suite_id = _suite_id(served)
    bodies = _bodies(suite_id, 1_000)
    for name in ("validate", "new", "save"):
        path, (content_type, length, parts) = bodies[name]
        served.send("POST", path, parts, length=length, headers={"Content-Type": content_type})
    start, _ = served.memory()
    for name, (path, (content_type, length, parts)) in _bodies(suite_id, 16 * MB).items():
        if name not in ("validate", "new", "save", "api validate", "api runs"):
            continue
        status, _, content = served.send(
            "POST", path, parts, length=length, headers={"Content-Type": content_type}
        )
        if name == "api runs":
            assert status == 422 and b"larger than 1 MB" in content, (name, status, content[:300])
        else:
            assert status == 413 and re.search(rb"larger than|at most", content), (
                name,
                status,
                content[:300],
            )
        assert len(content) < 200_000 and b"#" * 1000 not in content, name
    # A browser's plain form, as htmx posts an existing suite's editor.
    form = b"source=" + b"%23" * (5 * MB)
    status, _, content = served.send("POST", "/suites/validate/", iter([form]), length=len(form),
                                     headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert status == 413 and b"EVALSITE_MAX_REQUEST_BYTES" in content, content[:300]
    now, peak = served.memory()
    print(f"gunicorn worker: {start} MB before, {now} MB after, peak {peak} MB")
    assert peak - start < 100


@pytest.mark.timeout(300)
def test_a_chunked_body_is_read_only_to_the_limit(served):
    content_type, _, parts = multipart({"source": ""}, None, 50 * MB)
    start, _ = served.memory()
    status, _, content = served.send(
        "POST", "/suites/validate/", parts, length=None, headers={"Content-Type": content_type}
    )
    assert status == 413 and b"more than that" in content, content[:3000]
    now, peak = served.memory()
    assert peak - start < 100
    # A small chunked body is read like any other.
    content_type, _, parts = multipart({"source": ""}, None, 10)
    status, _, content = served.send(
        "POST", "/suites/validate/", parts, length=None, headers={"Content-Type": content_type}
    )
    assert status == 200 and b"the file is empty" in content, content[:3000]  # read, not idle


@pytest.mark.timeout(300)
def test_the_command_says_why_a_server_cut_off_a_large_body(served):
    """urllib sends the whole body before it reads an answer, so it sees the refused connection break."""
    server = Server(f"http://127.0.0.1:{served.port}", "evs_not-needed-to-be-refused")
    with pytest.raises(UserError) as refused:
        server.call("POST", "/api/runs", {"yaml": "#" * 30 * MB})
    assert str(refused.value).endswith(
        "closed the connection while 30.0 MB were sent: it takes at most EVALSITE_MAX_UPLOAD_BYTES in one "
        "request (25 MB unless its operator set more)"
    )
