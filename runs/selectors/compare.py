"""Comparing runs: the pinned baseline, the runs one can be compared with, and each conversation as a
comparison reads it."""

from __future__ import annotations

from dataclasses import dataclass

from ..models import Conversation, Run
from .access import runs_in, with_counts


def pinned_baseline(run: Run) -> Run | None:
    """The pinned baseline of `run`'s suite, whoever launched it (None when none is pinned)."""
    return (
        runs_in(run.project_id)
        .filter(suite_version__suite=run.suite_version.suite, pinned_at__isnull=False)
        .first()
    )


def baseline_besides(run: Run) -> bool:
    """Whether another run of `run`'s suite is pinned as the baseline (what the run page's
    Compare button compares with), without loading it."""
    return (
        Run.objects.filter(
            suite_version__suite_id=run.suite_version.suite_id,
            pinned_at__isnull=False,
        )
        .exclude(pk=run.pk)
        .exists()
    )


def comparable_runs(run: Run, limit: int = 20) -> list[Run]:
    """Runs to compare `run` with: its suite's, newest first, then none of other suites (evals are matched by
    id, so runs of another suite rarely compare)."""
    return with_counts(
        runs_in(run.project_id)
        .filter(suite_version__suite=run.suite_version.suite)
        .exclude(pk=run.pk)
        .order_by("-created_at")[:limit]
    )


@dataclass(frozen=True)
class _Totals:
    turns: int
    cost: float


@dataclass(frozen=True)
class Summary:
    """A conversation as a comparison reads it (engine.compare takes these as it takes EvalResults)."""

    id: str
    iteration: int
    prompt: str
    status: str
    score: float | None
    passed_on_turn: int | None
    totals: _Totals
    original: dict | None = None  # the run's own verdict, when a reviewer overrode it
    tool_names: tuple[str, ...] = ()  # the tools it called, in the order made (Conversation.tools_called)


def summaries(run: Run) -> list[Summary]:
    """The run's conversations as a comparison reads them (status, score, cost, turn count, the tools
    called), in one query over the columns it needs: comparing two runs loads no transcript and builds no
    result model."""
    rows = run.conversations.order_by("index", "iteration").values_list(
        "eval_id",
        "iteration",
        "prompt",
        "status",
        "score",
        "passed_on_turn",
        "turn_count",
        "cost",
        "original",
        "tools_called",
    )
    return [
        Summary(
            eval_id, iteration, prompt, status, score, passed_on_turn, _Totals(turns, cost), original or None,
            tuple(name for name in tools.split("\n") if name),
        )
        for eval_id, iteration, prompt, status, score, passed_on_turn, turns, cost, original, tools in rows
    ]  # fmt: skip


def conversation_by_eval(run: Run, eval_id: str, iteration: int = 0) -> Conversation | None:
    return run.conversations.filter(eval_id=eval_id, iteration=iteration).first()
