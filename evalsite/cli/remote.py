"""`evalsite run suite.yaml --server URL`: the suite runs on an evalsite server, this process watches.

The suite is validated here first, so a typo is found before anything is sent, then sent with its attached
files to `POST /api/runs`. In CI it goes with the ref it runs from (ci.py), and the server keeps it under that
ref, off the suite's line; otherwise the server saves it as the next version of the user's suite. The launch
carries an Idempotency-Key made for this invocation, so one that lost its answer is sent again safely.
What the run may cost is said on stderr as a run here says it, from the estimate the server's launch answers
(it knows the endpoints' prices); progress is polled and said on stderr; the results come back in the
documented JSON format, so the report, the exports, the exit code and a stopped run's last line are those of
a local run; once the run is launched, losing it (the token revoked meanwhile, the server away) is exit 3
with its URL, as it goes on there. Ctrl-C cancels the run on the server. Plain urllib: a CI job needs
nothing installed beyond evalsite itself.
"""

from __future__ import annotations

import http.client
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid
from argparse import Namespace
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlencode

from tenacity import RetryCallState, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from engine import suitevars
from engine.calls import Slow, SlowReporter
from engine.compare import Change, Comparison, compare_runs
from engine.failures import failures
from engine.outcomes import ACTIVE, Status
from engine.report import Detail, format_report
from engine.results import RunReport
from engine.text import plural

from .ci import ci_ref, gated_exit_code
from .common import BROKEN, UserError, read_suite_file, suite_to_run
from .options import run_options
from .outputs import exit_code, say_costs, say_stopped, write_outputs

POLL_SECONDS = 1.0
LARGE_BODY = 1_000_000  # bytes: past this, a connection that breaks while sending is likely a refusal


LAUNCH_TRIES = 4  # a launch whose answer was lost is sent again this many times in all, with the same key
GATEWAY_AWAY = (502, 503, 504)  # a proxy's answer while the app behind it restarts


class _Unreachable(Exception):
    """No answer from the app: the connection failed or dropped, or a proxy said the app is away."""

    def __init__(self, reason: object):
        super().__init__(str(reason))
        self.reason = reason


class Server:
    def __init__(self, url: str, token: str):
        self.base = url.rstrip("/")
        self.token = token

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
        return self._answer(method, path, lambda: self._send(method, path, body, {}))

    def launch(self, body: dict, path: str = "/api/runs") -> tuple[int, object]:
        """POST /api/runs (or /api/matrices) with one Idempotency-Key for this invocation. A launch that got no
        answer (the connection failed or dropped, a proxy said the app is away) may have made its run: it is
        sent again with the same key, and the server answers with what it made, if anything, instead of
        another."""
        key = f"evalsite-cli-{uuid.uuid4()}"

        def say_retry(state: RetryCallState) -> None:
            print(f"the launch got no answer ({state.outcome.exception()}); sending it again with the same "
                  "Idempotency-Key", file=sys.stderr, flush=True)  # fmt: skip

        retrying = Retrying(
            stop=stop_after_attempt(LAUNCH_TRIES),
            wait=wait_exponential(multiplier=1, max=8),
            retry=retry_if_exception_type(_Unreachable),
            before_sleep=say_retry,
            reraise=True,
        )
        headers = {"Idempotency-Key": key}
        return self._answer("POST", path, lambda: retrying(self._send, "POST", path, body, headers))

    def _answer(self, method: str, path: str, send) -> tuple[int, object]:
        try:
            status, payload = send()
        except _Unreachable as exc:
            if isinstance(exc.reason, int):
                status, payload = exc.reason, None
            else:
                raise UserError(
                    f"cannot reach the server at {self.base}: {exc.reason}", code=BROKEN
                ) from None
        if status == 401:
            raise UserError(
                f"the server at {self.base} refused the token (401): check --token or EVALSITE_TOKEN, "
                "or make one on its API tokens page"
            )
        if status >= 500:
            raise UserError(f"the server at {self.base} failed ({status}) on {method} {path}", code=BROKEN)
        return status, payload

    def _send(self, method: str, path: str, body: dict | None, headers: dict[str, str]) -> tuple[int, object]:
        # Non-ASCII text as UTF-8, not \u escapes: the body stays about the size of the files it carries.
        data = json.dumps(body, ensure_ascii=False).encode() if body is not None else None
        request = urllib.request.Request(
            self.base + path,
            data=data,
            method=method,
            headers={
                "Authorization": f"Bearer {self.token}",
                "Accept": "application/json",
                **({"Content-Type": "application/json"} if data is not None else {}),
                **headers,
            },
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, _decode(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code in GATEWAY_AWAY:
                raise _Unreachable(exc.code) from None
            return exc.code, _decode(exc.read())
        except (urllib.error.URLError, TimeoutError, ConnectionError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", exc)
            if data is not None and len(data) > LARGE_BODY and isinstance(reason, ConnectionError):
                # A server refuses a body over its limit before reading it and closes the connection, so
                # the sender sees the connection break rather than the answer.
                raise UserError(
                    f"the server at {self.base} closed the connection while {len(data) / 1_000_000:,.1f} MB "
                    "were sent: it takes at most EVALSITE_MAX_UPLOAD_BYTES in one request (25 MB unless "
                    "its operator set more)"
                ) from None
            raise _Unreachable(reason) from None


def _decode(raw: bytes) -> object:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


def _detail(payload: object) -> str:
    return payload.get("detail", "") if isinstance(payload, dict) else str(payload)[:200]


def launch_body(args: Namespace, files: dict[str, str]) -> dict:
    """What a launch on the server sends for this command line, a run's or a matrix's: the suite and its
    files, the concurrency, the variables, the options (engine.options) and the CI ref it comes from. A
    --concurrency given is a demand, which the server refuses when the endpoint allows fewer; none given
    leaves the server's default, held to the endpoint's cap."""
    body = {"yaml": read_suite_file(args.file).decode("utf-8-sig"), "files": files}
    if getattr(args, "concurrency_given", True):
        body["concurrency"] = args.concurrency
    if given := suitevars.parse_assignments(getattr(args, "vars", None)):
        body["vars"] = given
    options = run_options(args)
    if not options.is_empty():
        body["options"] = options.stored()
    given = getattr(args, "ref", None)
    if getattr(args, "as_latest", False):
        if given:
            raise UserError(
                "--ref keeps the suite under a ref and --as-latest makes it the latest: choose one"
            )
        return body
    # A terminal says a person launches; a CI job, a cron job or a pipe has none.
    ref, commit = ci_ref(given, os.environ, args.file.parent, attended=sys.stdin.isatty())
    if ref:
        body.update(ref=ref, commit=commit)
    return body


def run_on_server(args: Namespace) -> int:
    token = args.token or os.environ.get("EVALSITE_TOKEN", "")
    if not token.strip():
        raise UserError("--server needs an API token: set EVALSITE_TOKEN (or pass --token)")
    suite, files = suite_to_run(args.file, "nothing was sent")
    server = Server(args.server, token.strip())
    baseline = None
    if args.baseline == PINNED:
        args.baseline = _pinned_baseline(server, suite.name)
    if args.baseline:  # asked first: a wrong baseline id should not cost a run
        status, payload = server.call("GET", f"/api/runs/{args.baseline}/results")
        if status != 200:
            raise UserError(
                f"--baseline {args.baseline}: no such run on the server ({status} {_detail(payload)})"
            )
        baseline = RunReport.model_validate(payload)
    body = {**launch_body(args, files), "model": args.model}
    status, launched = server.launch(body)
    if status not in (200, 201):  # 200: a retry's answer, the run the first try made
        for problem in launched.get("problems", []) if isinstance(launched, dict) else []:
            where = (
                problem.get("file") or f"{args.file}:{problem['line']}:{problem['column']} {problem['path']}"
            )
            print(f"{where}: {problem['message']}", file=sys.stderr)
        raise UserError(f"the server did not start the run ({status}): {_detail(launched)}")
    run_id, run_url = launched["id"], launched["url"]
    under = f" from {launched['ref']}" if launched.get("ref") else ""
    print(f"Run {run_id} of {launched['suite']} v{launched['version']}{under} on {launched['model']}: {run_url}",
          file=sys.stderr, flush=True)  # fmt: skip
    if not under:  # said, since the people editing the suite see it next
        print(f"v{launched['version']} is the suite's latest version: its editor and launch form show it",
              file=sys.stderr, flush=True)  # fmt: skip
    say_costs(launched.get("estimate") or [])  # worked out by the server, as a run here says it
    try:
        with followed("the run", run_url):
            final = _watch(server, run_id)
    except KeyboardInterrupt:
        try:
            server.call("POST", f"/api/runs/{run_id}/cancel")
            print(f"\ncancelled run {run_id} on the server", file=sys.stderr)
        except UserError:
            print(f"\ncould not cancel run {run_id} on the server; cancel it at {run_url}", file=sys.stderr)
        raise
    with followed("the run", run_url):
        report = settled_results(server, run_id)
    print(format_report(report, getattr(args, "detail", Detail.VERBOSE)))
    comparison = baseline_url = None
    if baseline is not None:
        comparison = compare_runs(baseline.evals, report.evals)
        baseline_url = run_url.replace(str(run_id), str(args.baseline))
        print(_comparison_line(comparison, args.baseline))
    write_outputs(
        args, report, suite.system, comparison=comparison, run_url=run_url, baseline_url=baseline_url
    )
    print(f"Run page: {run_url}")
    code = exit_code(report)
    say_stopped(report)
    if final == Status.CANCELLED:
        code = BROKEN  # cancelled on the server: its result is unknown
    gating = args.fail_on_regression or getattr(args, "fail_on_new_failures", False)
    if gating and code != BROKEN:
        code = gated_exit_code(
            failures(report.evals, comparison), comparison,
            fail_on_regression=args.fail_on_regression, fail_on_new=args.fail_on_new_failures,
        )  # fmt: skip
    return code


@contextmanager
def followed(what: str, url: str) -> Iterator[None]:
    """Following something launched on the server: a refusal meanwhile (the token revoked, the server away)
    leaves its result unknown here, exit 3, not 2 ("nothing was run"), and says where it goes on."""
    try:
        yield
    except UserError as exc:
        raise UserError(f"{exc}; {what} goes on on the server: {url}", code=BROKEN) from None


def _watch(server: Server, run_id: str) -> str:
    """Poll until the run has finished; say its progress on stderr when it changes. Its final status. (A
    matrix's runs are followed together: following.py.)"""
    said = ""
    say_slow = SlowReporter(lambda line: print(line, file=sys.stderr, flush=True))
    while True:
        status, payload = server.call("GET", f"/api/runs/{run_id}")
        if status != 200:
            raise UserError(f"the run went missing on the server ({status}): {_detail(payload)}", code=BROKEN)
        progress = payload["progress"]
        counts = progress["counts"]
        line = (
            f"{progress['done']}/{plural(progress['total'], 'conversation')} done · {counts['passed']} passed · "
            f"{counts['failed']} failed · {counts['error']} errored"
        )
        if line != said:
            print(line, file=sys.stderr, flush=True)
            said = line
        calling = progress.get("calling") or {}
        if calling.get("count"):
            say_slow(Slow(calling["count"], calling["seconds"]))
        if payload["status"] not in ACTIVE:
            return payload["status"]
        time.sleep(POLL_SECONDS)


SETTLE_SECONDS = 30.0  # how long the results of a cancelled run are awaited for its last turns


def settled_results(server: Server, run_id: str) -> RunReport:
    """The run's results once none of its conversations still plays: a run cancelled on the server has ended
    while the turns in flight finish, and results read at once would show them half-played."""
    deadline = time.monotonic() + SETTLE_SECONDS
    while True:
        status, payload = server.call("GET", f"/api/runs/{run_id}/results")
        if status != 200:
            raise UserError(
                f"the server did not return the results ({status}): {_detail(payload)}", code=BROKEN
            )
        report = RunReport.model_validate(payload)
        if not any(result.status in ACTIVE for result in report.evals) or time.monotonic() > deadline:
            return report
        time.sleep(POLL_SECONDS)


PINNED = "pinned"  # `--baseline pinned`: the suite's pinned baseline on the server


def _pinned_baseline(server: Server, suite_name: str) -> str | None:
    """The id of the run pinned as `suite_name`'s baseline; None (said on stderr) when none is pinned yet, so
    that a pipeline's first run goes ahead and can be pinned."""
    query = urlencode({"suite_name": suite_name, "pinned": "true", "limit": 1})
    status, payload = server.call("GET", f"/api/runs?{query}")
    if status != 200:
        raise UserError(f"--baseline pinned: the server did not list runs ({status} {_detail(payload)})")
    runs = payload.get("runs", []) if isinstance(payload, dict) else []
    if not runs:
        print(
            f"--baseline pinned: no run of {suite_name!r} is pinned as its baseline yet; nothing to compare "
            "with (pin one on its run page)",
            file=sys.stderr,
        )
        return None
    print(f"Baseline: run {runs[0]['id']}, pinned for {suite_name!r}", file=sys.stderr)
    return runs[0]["id"]


def _comparison_line(comparison: Comparison, baseline: str) -> str:
    counts = comparison.counts
    line = (
        f"Against run {baseline}: {counts[Change.REGRESSION]} regressed, {counts[Change.FIX]} fixed, "
        f"{counts[Change.STILL_FAILING]} still failing, {counts[Change.UNCHANGED]} unchanged"
    )
    for row in comparison.regressions[:20]:
        line += f"\n  regressed: {row.id} ({row.before.status} → {row.after.status})"
    return line
