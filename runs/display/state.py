"""A run's state in words, as its header and progress card say it: the status badge and its reason, the
suite's gates, model calls waiting to retry, calls out longer than usual and workers too few to play it."""

from __future__ import annotations

import math

from engine.clients import RATE_LIMIT_WAIT, UNREADABLE_REPLY
from engine.clients.settings import SettingRefused, briefly
from engine.gates import GateResult
from engine.text import plural

from ..models import Run, Status

GATE_OPS = {">=": "≥", "<=": "≤", "==": "="}


def gates(results: list[GateResult], depth: int = 0) -> list[dict]:
    """The suite's gates as the run page shows them (runs.selectors.gate_results works them out). A logical
    gate's members follow it, one level deeper; `top` marks the gates the run's verdict counts."""
    rows = []
    for gate in results:
        logical = gate.kind in ("logical_and", "logical_or")
        rows.append(
            {
                "label": ("all of" if gate.kind == "logical_and" else "any of") if logical else gate.label,
                "text": gate.label
                if logical
                else f"{gate.metric} {GATE_OPS.get(gate.op, gate.op)} {gate.value:g}",
                "actual": "" if logical else ("n/a" if gate.actual is None else f"{round(gate.actual, 3):g}"),
                "logical": logical,
                "passed": gate.passed,
                "status": "passed" if gate.passed else "failed",
                "depth": depth,
                "top": depth == 0,
            }
        )
        rows += gates(gate.children, depth + 1)
    return rows


def in_flight(progress: dict) -> int:
    """Conversations still playing or about to; after a cancel they finish their current turn first."""
    return progress["counts"][Status.QUEUED] + progress["counts"][Status.RUNNING]


def progress_summary(progress: dict, stopped: bool = False) -> dict:
    """The progress card's count: conversations finished of all, and what a cancel left unplayed; for a run
    stopped by its cost limit or a refused setting (`stopped`), those it cut short apart from those it never
    started, as its header counts them. A cancelled conversation is not done, so a cancelled run never reads
    100%."""
    counts = progress["counts"]
    cancelled = counts[Status.CANCELLED]
    finished = progress["done"] - cancelled
    total = progress["total"]
    if cancelled and stopped:
        unplayed = progress.get("not_started", 0)
        parts = [f"{cancelled - unplayed} stopped"] if cancelled > unplayed else []
        parts += [f"{unplayed} not started"] if unplayed else []
        return {"done": finished, "total": total, "text": f"done, {', '.join(parts)}"}
    if cancelled:
        return {"done": finished, "total": total, "text": f"done, {cancelled} cancelled"}
    noun = "conversation" if total == 1 else "conversations"
    return {"done": finished, "total": total, "text": f"{noun} done · {progress['percent']}%"}


def status_words(run: Run) -> str:
    """The run's status as the runs list, the API and the CLI say it: "stopped: cost limit $5.00 reached" for a
    run its cost limit stopped ("stopping: …" while its last conversations finish), else its status."""
    if run.stop_reason:
        return f"{'stopping' if run.is_active else 'stopped'}: {run.stop_reason}"
    return run.status


def stopped_state(run: Run, progress: dict) -> dict:
    """A run its cost limit or a refused setting stopped: "stopping" while the conversations playing then
    finish, "stopped" after, with why and how its conversations ended. A refusal is named, its endpoint's
    words left to the notice under the header (refusal_notice)."""
    why = briefly(run.stop_reason).rstrip(".")
    finishing = in_flight(progress)
    if run.is_active or finishing:  # a refusal's stop ends the run at once, as a cancel does
        return {
            "label": "stopping",
            "tone": Status.CANCELLED,
            "live": True,
            "reason": f"{why}; {finishing} finishing",
        }
    return {
        "label": "stopped",
        "tone": Status.CANCELLED,
        "live": False,
        "reason": f"{why}; {stopped_counts(progress)}",
    }


def stopped_counts(progress: dict) -> str:
    """How a stopped run's conversations ended, as the terminal's summary counts them: "1 error, 2 stopped,
    9 not started of 12 conversations". Stopped: cut short as they played (or refused alike); not started:
    cancelled before their first call."""
    counts = progress["counts"]
    unplayed = progress.get("not_started", 0)
    parts = [f"{counts[status]} {status}" for status in (Status.PASSED, Status.FAILED) if counts[status]]
    parts += [plural(counts[Status.ERROR], "error")] if counts[Status.ERROR] else []
    parts += [f"{counts[Status.CANCELLED] - unplayed} stopped"] if counts[Status.CANCELLED] > unplayed else []
    parts += [f"{unplayed} not started"] if unplayed else []
    return f"{', '.join(parts) or 'none ended'} of {plural(progress['total'], 'conversation')}"


# Where the launch form takes each role's settings, for what to do about one the endpoint refused.
LAUNCH_FIELDS = {
    "model_settings": "Model settings",
    "judge_settings": "Judge settings",
    "user_settings": "Simulated user settings",
}


def refusal_notice(run: Run) -> dict | None:
    """The setting the run's endpoint refused, which stopped it, as the notice under its header says it
    once: which setting, the endpoint's words, and whether the launch or the suite set it (what to change).
    None for a run that no refusal stopped."""
    refused = SettingRefused.read(run.stop_reason)
    if refused is None:
        return None
    launched = (run.options or {}).get(refused.role or "") or {}
    return {
        "where": refused.where,
        "role": refused.role,
        "key": refused.key,
        "detail": refused.detail,
        "field": LAUNCH_FIELDS.get(refused.role or ""),
        "from_launch": refused.key in launched or refused.key in (launched.get("extra_body") or {}),
    }


def calibration_state(report) -> dict:
    """A calibration run's verdict and headline: how far each judge agrees with the labels and whether the
    set's gates hold (engine.calibration.report), not how many replies the judge failed, which is its job."""
    parts = []
    for judge in report.judges:
        metrics = judge.metrics
        scored = metrics.judgements - metrics.unscored
        agreed = round((metrics.exact_agreement or 0) * scored)
        who = f"{judge.name} agrees" if len(report.judges) > 1 else "the judge agrees"
        part = f"{who} with the labels on {agreed} of {plural(scored, 'judgement')}"
        failing = [gate for gate in judge.gates if not gate.passed]
        part += "".join(
            f"; gate {gate.name} ≥ {gate.minimum:g} failed"
            + (f": {round(gate.value, 3):g}" if gate.value is not None else "")
            for gate in failing
        )
        parts.append(part)
    return {"label": report.status, "tone": report.status, "live": False, "reason": "; ".join(parts)}


def run_state(
    run: Run, progress: dict, gate_rows: list[dict], eval_count: int, failed: int, calibration=None
) -> dict:
    """The run header's status badge and the reason beside it: "cancelling" while a cancelled run's
    conversations finish their turn, and why a run failed, errored or was cancelled, in words.

    From what the page has already loaded: the gates over the evals' scores, and how many evals there are and
    failed (an eval run several times counts once, by its pass rate), the inputs the run's verdict is decided on.
    `calibration`: a finished calibration run's report, whose agreement with the labels is its headline.
    """
    if run.stop_reason:
        return stopped_state(run, progress)
    counts = progress["counts"]
    finishing = in_flight(progress)
    if run.status == Status.CANCELLED and finishing:
        return {
            "label": "cancelling",
            "tone": Status.CANCELLED,
            "live": True,
            "reason": f"{finishing} finishing",
        }
    if calibration is not None and run.status in (Status.PASSED, Status.FAILED):
        return calibration_state(calibration)
    evals = plural(eval_count, "eval")
    reasons = []
    if run.status == Status.FAILED:
        failing = [gate for gate in gate_rows if gate.get("top", True) and not gate["passed"]]
        reasons = [
            f"gate {gate['text']} failed" + (f": {gate['actual']}" if gate["actual"] else "")
            for gate in failing
        ]
        if not failing and failed:
            reasons.append(f"{failed} of {evals} failed")
    elif run.status == Status.ERROR:
        if counts[Status.ERROR]:
            reasons.append(f"{plural(counts[Status.ERROR], 'conversation')} errored")
        if failed:
            reasons.append(f"{failed} of {evals} failed")
    elif run.status == Status.CANCELLED:
        finished = progress["done"] - counts[Status.CANCELLED]
        reasons.append(f"cancelled with {finished} of {plural(progress['total'], 'conversation')} finished")
    elif run.status == Status.PASSED and gate_rows and failed:
        reasons.append(f"every gate holds; {failed} of {evals} failed")
    if counts.get(Status.SKIPPED):  # a re-grade's evals that its version added: counted in no verdict
        reasons.append(f"{plural(counts[Status.SKIPPED], 'conversation')} not in the source run")
    return {"label": run.status, "tone": run.status, "live": False, "reason": "; ".join(reasons)}


def waiting(reason: str, until, now, count: int | None = None) -> dict | None:
    """A model call waiting to retry, as the run page and the transcript say it: "waiting for rate limit
    (retry in 8 s)", "endpoint unavailable (HTTP 503), retry in 4 s". `count`: how many conversations wait
    (the progress card), None for one conversation. None once the wait is over."""
    if until is None or until <= now:
        return None
    seconds = math.ceil((until - now).total_seconds())
    if count is not None and reason.startswith(UNREADABLE_REPLY):
        reason = UNREADABLE_REPLY  # how many times is one conversation's count, not the card's
    rate_limited = reason == RATE_LIMIT_WAIT
    lead = reason or "waiting to retry"
    if count is not None:
        lead = f"{plural(count, 'conversation')} {lead if rate_limited else 'waiting: ' + lead}"
    prefix = "next retry in" if count is not None and count > 1 else "retry in"
    countdown = f"{prefix} {seconds} s"
    return {
        "lead": lead,
        "prefix": prefix,
        "seconds": seconds,
        "until": until.isoformat(),
        "parenthesised": rate_limited,
        "text": f"{lead} ({countdown})" if rate_limited else f"{lead}, {countdown}",
    }


def calling(slow: dict | None, now) -> dict | None:
    """Model calls out longer than their run's usual latency, as the progress card says it: "3 calls waiting
    on the model for 45 s" (the longest-out call's time; app.js counts it on). None when there are none."""
    if not slow or not slow["count"] or slow["since"] is None:
        return None
    seconds = max(0, math.floor((now - slow["since"]).total_seconds()))
    lead = f"{plural(slow['count'], 'call')} waiting on the model for"
    return {
        "lead": lead,
        "seconds": seconds,
        "since": slow["since"].isoformat(),
        "text": f"{lead} {seconds} s",
    }


def workers(found: dict | None, progress: dict, concurrency: int) -> dict | None:
    """Who can play a run's queued conversations, when it is not as many as the run would play at once
    (`found`: runs.selectors live_workers): no worker at all (`none`), or fewer slots in all than its
    concurrency, or than the conversations it has left when they are fewer, or every slot in use, some by
    other runs (`playing`: the conversations workers play now, of every run). None when all is well or not
    known."""
    if found is None:
        return None
    if not found["count"]:
        return {"none": True, "text": "No worker is running, so nothing plays until one starts."}
    left = progress["counts"][Status.QUEUED] + progress["counts"][Status.RUNNING]
    if 0 < found["slots"] < min(concurrency, left):
        asked = (
            f"this run's concurrency of {concurrency}"
            if concurrency <= left
            else f"the {left} conversations this run has left to play"
        )
        text = f"The workers running ({found['count']}) play at most {found['slots']} conversations at once, fewer than {asked}."
        return {"none": False, "text": text}
    others = found.get("playing", 0) - progress["counts"][Status.RUNNING]
    if progress["counts"][Status.QUEUED] and others > 0 and found.get("playing", 0) >= found["slots"] > 0:
        text = (
            f"All {found['slots']} slots of the workers running are in use, {others} by other runs: this run's "
            "queued conversations start as those end."
        )
        return {"none": False, "text": text}
    return None
