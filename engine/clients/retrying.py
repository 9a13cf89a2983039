"""One call's retries, shared by the threaded and the asyncio clients: each attempt's bookkeeping, how long
to wait, when to stop, what to report, and waits that end early when the endpoint answers someone else."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable

from tenacity import RetryCallState, retry_if_exception_type, wait_random_exponential

from ..calls import came_back, going_out
from ..retries import RetryWait, async_wait_out, report_wait, wait_out
from .answers import RATE_LIMIT_WAIT, Transient
from .base import DEFAULT, EndpointError

# The longest backoff we choose ourselves (a dropped connection, a 5xx without Retry-After). A server that
# wants longer says so with Retry-After, honoured up to `retry_max_wait`; past this, a longer wait only
# delays noticing the endpoint is back (a waiting call is also woken by another call's answer, but across
# processes that takes up to a second, and a lone call has no one to wake it).
BACKOFF_MAX_WAIT = 8.0

# Calls waiting out a backoff, per endpoint, in this process: an answer while some wait tells them (and,
# through the board, other processes) to retry now.
_waiting: dict[str, int] = {}
_waiting_lock = threading.Lock()


def _count_waiting(endpoint: str, change: int) -> None:
    with _waiting_lock:
        _waiting[endpoint] = _waiting.get(endpoint, 0) + change


# What a client makes of its transport's exception during a call named `what`: the failure to raise
# instead (a Transient or an EndpointError), or None for one it does not know, which goes through as it is.
Translate = Callable[[str, BaseException], Exception | None]


class _Attempt:
    """One request, noted as it goes out and comes back (engine.calls), its failure told to the loop and
    raised as the client's translation of it."""

    __slots__ = ("call", "loop", "translate")

    def __init__(self, loop: RetryLoop, translate: Translate) -> None:
        self.loop = loop
        self.translate = translate

    def __enter__(self) -> None:
        self.call = going_out()

    def __exit__(self, kind, exc, traceback) -> bool:
        if exc is None:
            came_back(self.call, answered=True)
            self.loop.answered()
            return False
        # A Transient here is an answer that was no chat completion.
        failure = exc if isinstance(exc, Transient) else self.translate(self.loop.what, exc)
        if failure is not None:
            self.loop.failed()
        came_back(self.call, answered=False)
        if failure is None or failure is exc:
            return False
        raise failure from None


class RetryLoop:
    """One call's retries, as tenacity's Retrying (threads) or AsyncRetrying (asyncio) runs them, for the
    client (an engine.clients.http.OpenAIClient) making the call."""

    def __init__(self, client, what: str) -> None:
        self.client = client
        self.what = what
        self.endpoint = client.endpoint
        self.label = client.label
        self.started = client._clock()
        # When the latest attempt failed (epoch seconds: boards are shared between processes), and whether
        # the coming wait is a backoff of ours, to cut short when the endpoint answers another call.
        self.failed_at = 0.0
        self.wakeable = False
        self.unreadable = 0  # 200 answers that were no chat completion, said on the page while it waits
        self.delay = 0.0  # the coming wait this call's own failure asks for (a 429's is everyone's)
        self.paused = 0.0  # what is left of another call's pause of the endpoint, when the wait was chosen
        # When the coming wait does not fit in what is left of the budget: (the wait, seconds left).
        self.over_budget: tuple[float, float] | None = None
        self.backoff = wait_random_exponential(
            multiplier=0.5, min=0.1, max=min(BACKOFF_MAX_WAIT, self.endpoint.retry_max_wait)
        )

    def attempt(self, translate: Translate) -> _Attempt:
        return _Attempt(self, translate)

    def retrying(self, kind, sleep):
        """tenacity's `kind` (Retrying or AsyncRetrying) running this loop, sleeping with `sleep`."""
        return kind(
            retry=retry_if_exception_type(Transient),
            wait=self.wait,
            stop=self.stop,
            before_sleep=self.before_sleep,
            sleep=sleep,
            reraise=True,
        )

    def held_back(self) -> float:
        """Seconds to hold back before the first attempt while another call has the endpoint paused after a
        rate limit (reported), spread out a little so the callers held back do not all arrive at once."""
        remaining = self.client._pause_remaining()
        if remaining <= 0:
            return 0.0
        seconds = remaining + random.uniform(0, min(1.0, 0.2 * remaining))
        report_wait(RetryWait(self.label, RATE_LIMIT_WAIT, seconds, 0))
        return seconds

    def failed(self) -> None:
        self.failed_at = time.time()

    def answered(self) -> None:
        if self.failed_at or _waiting.get(self.label):
            # Back after failing this call, or answering while others wait: they may retry now.
            self.client._pauses.recovered(self.label, time.time())

    def wait(self, state: RetryCallState) -> float:
        failure: Transient = state.outcome.exception()
        self.wakeable = failure.retry_after is None and not failure.rate_limited
        delay = failure.retry_after if failure.retry_after is not None else self.backoff(state)
        self.delay = delay = min(delay, self.endpoint.retry_max_wait)
        # Another call may have paused the endpoint for longer: wait that out too, whole.
        self.paused = paused = self.client._pause_remaining()
        self.wakeable = self.wakeable and paused <= delay
        return max(delay, paused)

    def stop(self, state: RetryCallState) -> bool:
        if self.endpoint.max_retries is not None and state.attempt_number > self.endpoint.max_retries:
            return True
        left = self.endpoint.retry_seconds - (self.client._clock() - self.started)
        if state.upcoming_sleep > left:
            self.over_budget = (state.upcoming_sleep, max(0.0, left))
            return True
        return False

    def before_sleep(self, state: RetryCallState) -> None:
        failure: Transient = state.outcome.exception()
        if failure.rate_limited:
            # Everyone else holds back too, instead of each meeting the limit; only once this call is sure to
            # wait it out: a call that gives up holds no one back for a wait no one asked to make.
            self.client._pauses.pause(self.label, time.time() + self.delay)
        reason = failure.reason
        if failure.unreadable:
            self.unreadable += 1
            if self.unreadable > 1:
                reason = f"{reason} ({self.unreadable} times)"
        report_wait(RetryWait(self.label, reason, state.upcoming_sleep, state.attempt_number))

    def woken(self) -> bool:
        return self.client._pauses.recovered_at(self.label) > self.failed_at

    def sleep(self, seconds: float) -> None:
        # A sleep passed in (tests' fake time) returns at once: no other call can answer meanwhile.
        if not self.wakeable or self.client._sleep is not time.sleep:
            wait_out(seconds, self.client._sleep)
            return
        _count_waiting(self.label, 1)
        try:
            wait_out(seconds, self.client._sleep, self.woken)
        finally:
            _count_waiting(self.label, -1)

    async def asleep(self, seconds: float) -> None:
        if self.client._sleep is not time.sleep:  # tests' fake time: returns at once, as in `sleep`
            wait_out(seconds, self.client._sleep)
            return
        if not self.wakeable:
            await async_wait_out(seconds)
            return
        _count_waiting(self.label, 1)
        try:
            await async_wait_out(seconds, self.woken)
        finally:
            _count_waiting(self.label, -1)

    def gave_up(self, failure: Transient, statistics: dict) -> EndpointError:
        attempts = statistics.get("attempt_number", 1)
        spent = self.client._clock() - self.started
        suffix = f" (gave up after {attempts} attempts in {spent:.0f} s)" if attempts > 1 else ""
        return EndpointError(failure.message + self._too_long(failure) + suffix)

    def _too_long(self, failure: Transient) -> str:
        """Why a wait the endpoint asked for was not made, in words; "" when the budget ran out otherwise."""
        if self.over_budget is None:
            return ""
        wait, left = self.over_budget
        if failure.retry_after is not None and self.delay >= wait:
            asked = f"Retry-After {failure.retry_after:.0f} s"
        elif self.paused >= wait and self.paused > self.delay:  # another call's 429 paused the endpoint
            asked = f"the endpoint's rate-limit pause ({wait:.0f} s more)"
        else:  # a backoff of our own: the budget simply ran out
            return ""
        budget = self.endpoint.retry_seconds
        whole = budget - left < 1
        of = (
            f"the {budget:g} s retry budget"
            if whole
            else f"the {left:.0f} s left of the {budget:g} s retry budget"
        )
        setting = (
            "EVALSITE_RETRY_SECONDS"
            if self.endpoint.name == DEFAULT
            else "the endpoint's retry for in the admin, else EVALSITE_RETRY_SECONDS"
        )
        return f"; {asked} is longer than {of} ({setting})"
