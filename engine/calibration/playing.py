"""A calibration set played as a suite of given replies, and its judgements read back from what a run stored.

The judge sees each sample's conversation exactly as a suite's `llm_judge` sees a conversation it grades
(engine/judge.py's prompt, the `[Role]:` form), and no agent model is called. The CLI plays the suite with
engine.runner (engine.calibration.run) and the web with its workers; both read back each judge check's
result with `judgement`, so the two give the same figures (engine.calibration.report).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pydantic import PrivateAttr

from ..schema import Check, Eval, JudgeSpec, Message, Suite
from .sets import LoadedSet, NamedJudge, Sample


def judge_conversation(sample: Sample) -> list[dict]:
    """What the judge reads: the conversation up to and including the reply under judgement."""
    return sample.messages[: sample.reply_at + 1]


class CalibrationSuite(Suite):
    """A calibration set played as a suite: one eval per judge and sample, whose reply is the sample's last
    assistant message, given (engine.drivers.given), graded by that judge's llm_judge check, `repeats` times.
    Runs, workers, caps and pages then treat it like any suite; `calibration` keeps the set."""

    _calibration: LoadedSet | None = PrivateAttr(None)
    plays_repeats: ClassVar[bool] = True

    @property
    def calibration(self) -> LoadedSet:
        return self._calibration

    def files_used(self) -> list[str]:
        """The set's samples file is used as much as a suite's dataset: the pages must not call it unused."""
        names = super().files_used()
        samples_file = self._calibration.spec.samples_file if self._calibration else None
        return [samples_file, *names] if samples_file and samples_file not in names else names

    def judge_and_sample(self, index: int) -> tuple[NamedJudge, Sample]:
        """Which judge grades eval `index`, and on which sample (evals go judge by judge, samples in order)."""
        samples = self._calibration.samples
        return self._calibration.spec.all_judges[index // len(samples)], samples[index % len(samples)]


def as_suite(loaded: LoadedSet) -> CalibrationSuite:
    """The set as a CalibrationSuite, ready for the runner or the workers."""
    spec = loaded.spec
    evals = []
    for judge in spec.all_judges:
        check = Check(
            llm_judge=JudgeSpec.model_validate(judge.model_dump(exclude={"name"}, exclude_none=True))
        )
        for sample in loaded.samples:
            before = judge_conversation(sample)[:-1]
            evals.append(
                Eval(
                    id=f"{judge.name} {sample.label}"[:200],
                    tags=list(sample.tags),
                    messages=[Message.model_validate(m) for m in before] or None,
                    reply=sample.reply,
                    checks=[check],
                    iterations=spec.repeats,
                )
            )
    suite = CalibrationSuite(
        name=spec.name,
        description=spec.description,
        model=spec.all_judges[0].model,
        mock=spec.mock,
        evals=evals,
        cache=spec.cache,
    )
    suite._calibration = loaded
    return suite


@dataclass
class Judged:
    """One judge's answer about one sample, once."""

    judge: str
    sample: int
    repeat: int
    score: float | None  # on the judge's scale; None when the answer held no score or the call failed
    reason: str
    raw: str | None = None
    error: str | None = None


def judgement(
    suite: CalibrationSuite, index: int, iteration: int, check: dict | None, error: str = ""
) -> Judged:
    """One judgement from what a run stored: eval `index` (a judge and a sample), iteration `iteration` (the
    repeat), the judge check's result as a dict (None when the conversation ended before it was graded)."""
    judge, sample = suite.judge_and_sample(index)
    if check is None:
        return Judged(judge.name, sample.index, iteration, None, error or "not judged", None, error or None)
    raw = check.get("raw")
    if raw is None and check.get("children"):  # weighted criteria: each criterion's answer
        raw = "\n\n".join(f"{child['label']}: {child.get('raw') or ''}" for child in check["children"])
    reason = check.get("judge_reason") or check.get("reason") or ""
    return Judged(judge.name, sample.index, iteration, check.get("judged"), reason, raw)
