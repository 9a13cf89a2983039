"""What `evalsite run` shows while a suite plays, here or on a server: on a terminal, a live line (rich) under
the report as it grows (a matrix on a server: a line per variant); elsewhere, as in CI, a plain line every few
seconds. Progress goes to stderr, the report to stdout.
"""

from __future__ import annotations

import sys
import threading
import time

from engine.calls import Calls
from engine.cost import spent
from engine.outcomes import Status
from engine.results import EvalResult
from engine.text import plural, terminal_safe

# Refreshes a second of the live line: enough for a counter, little CPU beside a run of hundreds of calls.
LIVE_REFRESH_PER_SECOND = 4


def clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02}:{seconds:02}" if hours else f"{minutes}:{seconds:02}"


class Tally:
    """The run so far: conversations counted as each ends, the spend as each turn is played (`paid`, the
    runner's on_spend); `playing` is the runner's set of the conversations in flight (engine.runner.run_suite's
    `watched`), whose calls out are counted when the line is drawn."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = self.passed = self.failed = self.errors = 0
        self.spend = 0.0
        # The runners' sets of the endpoints without prices their requests went to (engine.runner.Play's
        # `unpriced`, one a matrix variant): what the run spends is not known.
        self.called: list[set[str]] = []
        self.playing: set[Calls] = set()
        self.started = time.monotonic()

    def calls_unpriced(self) -> set[str]:
        """A set for a runner to fill with the endpoints without prices its requests go out to."""
        called: set[str] = set()
        self.called.append(called)
        return called

    @property
    def unpriced(self) -> list[str]:
        return sorted({name for called in self.called for name in _copy(called)})

    def paid(self, amount: float) -> None:
        self.spend += amount

    def add(self, result: EvalResult) -> None:
        self.done += 1
        if result.status == Status.PASSED:
            self.passed += 1
        elif result.status == Status.FAILED:
            self.failed += 1
        elif result.status == Status.ERROR:
            self.errors += 1

    def in_flight(self) -> int:
        return sum(len(calls.out) for calls in _copy(self.playing))

    def line(self, width: int | None = None) -> str:
        """The run in one line, most telling first; within `width` (a terminal's columns) in short words, as
        `12/20 ✓10 ✗1 !1 · 4 out · $0.0123 · 0:05 ETA 0:03`, so a narrow terminal keeps every figure."""
        elapsed = time.monotonic() - self.started
        left = self.total - self.done
        eta = clock(elapsed / self.done * left) if self.done and left else None
        in_flight = self.in_flight()
        spent = self.spent()
        line = (
            f"{self.done}/{self.total} · {self.passed} passed · {self.failed} failed · "
            f"{plural(self.errors, 'error')} · {plural(in_flight, 'call')} in flight · "
            f"{spent} · {clock(elapsed)}{f', ETA {eta}' if eta else ''}"
        )
        if width is None or len(line) <= width:
            return line
        short = spent.replace("at least ", "≥").replace("cost unknown", "$?")
        return (
            f"{self.done}/{self.total} ✓{self.passed} ✗{self.failed} !{self.errors} · {in_flight} out · "
            f"{short} · {clock(elapsed)}{f' ETA {eta}' if eta else ''}"
        )

    def live(self, width: int | None = None) -> str:
        """What the live display shows: the line."""
        return self.line(width)

    def spent(self) -> str:
        """What the run has spent so far, as far as prices tell: "$0.0123", "at least $0.0123" or "cost
        unknown" (every endpoint it paid for has no prices)."""
        return spent(self.spend, self.unpriced, 4) or "cost unknown"


def _copy(playing: set) -> list:
    # The set changes on the event loop's thread while another thread draws the line.
    while True:
        try:
            return list(playing)
        except RuntimeError:
            continue


class Progress:
    """Shows a Tally (or anything with its `live` and `line`: following.MatrixTally) while a run plays and
    prints the report's pieces as they come (`say`).

    `live`: a rich display on stderr (`tally.live`), redrawn in place, with the report printed above it
    (through rich when stdout is the terminal too, else straight to stdout). Otherwise a plain line on stderr
    every `every` seconds (`tally.line`; 0: none), and the report straight to stdout."""

    def __init__(self, tally: Tally, *, live: bool, every: float) -> None:
        self.tally = tally
        self.live = None
        self.every = every
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if live:
            # Imported only on a terminal: rich costs a run in CI start-up time it does not need.
            from rich.console import Console
            from rich.live import Live
            from rich.text import Text

            self._text = Text
            console = Console(file=sys.stderr, emoji=False, highlight=False, markup=False)
            self.live = Live(
                self._render(),
                console=console,
                refresh_per_second=LIVE_REFRESH_PER_SECOND,
                transient=True,
                redirect_stdout=False,
                redirect_stderr=False,
                get_renderable=self._render,
            )
            self._through_rich = sys.stdout.isatty()

    def _render(self):
        width = self.live.console.width if self.live is not None else None
        return self._text(self.tally.live(width), no_wrap=True, overflow="ellipsis")

    def __enter__(self) -> Progress:
        if self.live is not None:
            self.live.start()
        elif self.every > 0:
            self._thread = threading.Thread(target=self._tick, name="evalsite-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        if self.live is not None:
            self.live.stop()
        if self._thread is not None:
            self._thread.join(timeout=1)

    def _tick(self) -> None:
        while not self._stop.wait(self.every):
            print(f"progress: {self.tally.line()}", file=sys.stderr, flush=True)

    def say(self, text: str | None) -> None:
        """A piece of the report, on stdout; above the live line when both share the terminal."""
        if text is None:
            return
        if self.live is not None and self._through_rich:
            self.live.console.out(text, highlight=False)
            self.live.refresh()  # the counts under it include what it just said
        else:
            print(text, flush=True)

    def note(self, text: str) -> None:
        """A note on stderr (a retry, a slow call), above the live line when there is one; an endpoint's words in
        it are shown, never acted on."""
        text = terminal_safe(text)
        if self.live is not None:
            self.live.console.out(text, highlight=False)
        else:
            print(text, file=sys.stderr, flush=True)
