"""`evalsite run --server URL --model a,b,c`: every variant's run on the server followed at once, as the
workers play them together. One round polls each run still going; one display shows them all (progress.py's:
on a terminal a live line per variant, elsewhere a line every few seconds naming each), and each variant's
end is said as it comes, in the words a matrix played here says it."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from engine.calls import Slow, SlowReporter
from engine.matrix import end_line
from engine.outcomes import ACTIVE, Status
from engine.text import plural

from . import remote
from .common import BROKEN, UserError
from .progress import Progress, clock


@dataclass
class Followed:
    """One variant's run as last polled: its name on the lines (`[2/3] gpt-4o-mini`) and its state."""

    run_id: str
    name: str
    status: str = Status.QUEUED
    done: int = 0
    total: int | None = None  # unknown until the server first answers
    counts: dict[str, int] = field(default_factory=dict)
    stop_reason: str = ""  # why its run stopped short: its cost limit, a setting refused
    state_words: str = ""  # its status in words: "stopped: cost limit $5.00 reached"
    not_started: int | None = None  # of its cancelled conversations, those never started (None: not said)

    @property
    def active(self) -> bool:
        return self.status in ACTIVE

    def read(self, payload: dict) -> None:
        progress = payload["progress"]
        self.status = payload["status"]
        self.stop_reason, self.state_words = payload.get("stop_reason") or "", payload.get("state") or ""
        self.done, self.total, self.counts = progress["done"], progress["total"], progress["counts"]
        self.not_started = progress.get("not_started")

    def figures(self) -> str:
        """`40/100 conversations done · 38 passed · 2 failed · 0 errored`, as a run on a server says it."""
        if self.total is None:
            return "waiting for the server"
        counts = self.counts
        return (
            f"{self.done}/{plural(self.total, 'conversation')} done · {counts.get('passed', 0)} passed · "
            f"{counts.get('failed', 0)} failed · {counts.get('error', 0)} errored"
        )

    def state(self) -> str:
        """Its run's status, unless it plays (the figures say that): queued, or how it ended; and a run
        stopped short, why ("stopping: cost limit $5.00 reached" while its last conversations finish)."""
        if self.stop_reason:
            return f" · {self.state_words or self.stop_reason}"
        if self.status == Status.RUNNING or self.total is None:
            return ""
        return f" · {self.status}" if self.active else f" · ended: {self.status}"

    def ended(self) -> str:
        """Its end, as a matrix played here says a variant's (engine.matrix.end_line): `[1/3] gpt-4o: 9 passed,
        1 failed, 0 errors of 10`, what a run stopped short did not play and why, and how it ended when it
        did not end of itself."""
        counts = self.counts
        line = end_line(
            self.name, counts.get("passed", 0), counts.get("failed", 0), counts.get("error", 0),
            self.total or 0, stop_reason=self.stop_reason, cancelled=counts.get("cancelled", 0),
            not_started=self.not_started,
        )  # fmt: skip
        if self.stop_reason or self.status in (Status.PASSED, Status.FAILED):
            return line
        return f"{line} ({self.status} on the server)"

    @property
    def cancelled(self) -> bool:
        """Cancelled on the server by someone, not stopped short for a reason of its own."""
        return self.status == Status.CANCELLED and not self.stop_reason


class MatrixTally:
    """The matrix's runs for Progress: `live`, a line per variant, each within a terminal's width; `line`, one
    line that names each variant with its figures, then the time since they were launched."""

    def __init__(self, runs: list[Followed]) -> None:
        self.runs = runs
        self.started = time.monotonic()

    def live(self, width: int | None = None) -> str:
        lines = [f"{run.name}: {run.figures()}{run.state()}" for run in self.runs]
        return "\n".join(lines + [f"{clock(time.monotonic() - self.started)} since the launch"])

    def line(self, width: int | None = None) -> str:
        each = "; ".join(f"{run.name}: {run.figures()}{run.state()}" for run in self.runs)
        return f"{each} · {clock(time.monotonic() - self.started)}"


def follow_all(server, runs: list[Followed], *, every: float, live: bool | None = None) -> list[str]:
    """Poll every run still going, each round, until all have ended; show their progress together and say each
    variant's end on stdout as it comes. Each run's final status, in order."""
    tally = MatrixTally(runs)
    live = sys.stderr.isatty() if live is None else live
    with Progress(tally, live=live, every=every) as progress:
        slow = [SlowReporter(lambda text, run=run: progress.note(f"{run.name}: {text}")) for run in runs]
        while any(run.active for run in runs):
            for run, say_slow in zip(runs, slow, strict=True):
                if not run.active:
                    continue
                status, payload = server.call("GET", f"/api/runs/{run.run_id}")
                if status != 200:
                    raise UserError(
                        f"the run went missing on the server ({status}): {remote._detail(payload)}",
                        code=BROKEN,
                    )
                run.read(payload)
                calling = payload["progress"].get("calling") or {}
                if calling.get("count"):
                    say_slow(Slow(calling["count"], calling["seconds"]))
                if not run.active:
                    progress.say(run.ended())
            if any(run.active for run in runs):
                time.sleep(remote.POLL_SECONDS)
    return [run.status for run in runs]
