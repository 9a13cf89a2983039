"""What a conversation driver is: the plan of each turn (Step), how a conversation may end (Ending), how it
came out (Verdict), and the methods every driver has (Driver).

A driver decides; it never calls a model and never stores anything. The loop that plays it
(engine.conversation.run_eval) sends each Step's prompt, grades the reply, asks the simulated user when a
Step says so, and hands the driver the graded turns to choose what comes next. So the same drivers can be
played by a threaded loop or by an asyncio one.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from ..outcomes import Status, TerminationKind
from ..results import CheckResult, ConditionResult, TurnRecord
from ..schema import Check, Condition, Extractor


@dataclass
class Defaults:
    """Suite-level defaults for grading against a ground truth."""

    grader: str | None = None
    extractor: Extractor | None = None
    rubric: str | None = None
    pass_threshold: float | None = None
    graders: dict = field(default_factory=dict)  # the suite's named graders (engine.schema.NamedGrader)
    pass_rule: object = "all"  # the suite's pass_rule
    incomplete_reply: str | None = None  # the suite's rule for replies that did not finish (engine.replies)
    rubric_prompt: str = "evalsite"  # how rubric judges send their rubric (engine.grading)
    judge_system: str | None = None  # their system message when it goes as written
    tools: list = field(default_factory=list)  # the suite's tools (engine.schema.ToolEntry)
    max_tool_rounds: int | None = None  # the suite's max_tool_rounds

    @classmethod
    def of(cls, suite) -> Defaults:
        """A suite's grading defaults (engine.schema.Suite)."""
        return cls(
            suite.grader,
            suite.extractor,
            suite.rubric,
            suite.pass_threshold,
            suite.graders,
            suite.pass_rule,
            suite.incomplete_reply,
            suite.rubric_prompt,
            suite.judge_system,
            tools=suite.tools or [],
            max_tool_rounds=suite.max_tool_rounds,
        )


@dataclass(frozen=True)
class UserAsk:
    """The simulated user writes a turn's prompt: the loop sends it `messages` on `model` (None: the suite's
    judge model), and its answer, cleaned of role labels, is what the model under test is sent."""

    model: str | None
    messages: list[dict]


@dataclass(frozen=True)
class Step:
    """One turn as its driver plans it: what the user says, what grades the reply, and where in the suite
    the turn comes from. The turn's record (engine.results.TurnRecord) is made from it."""

    prompt: str | None  # None: the model replies to the given history alone, or `ask` writes it
    checks: list[Check]  # grade the reply
    node: str  # where the prompt lives in the suite, e.g. evals[0].checks[1]
    reason: str | None = None  # why this follow-up was sent
    ground_truth: str | None = None  # grade this step's reply against it
    grade_conversation: str | None = None  # grade the whole conversation against it, after this step
    stop_when: Condition | None = None  # evaluated after the reply, for the driver's `ending`
    final_checks: list[Check] = field(default_factory=list)  # instead of `checks` when the reply ends it
    ask: UserAsk | None = None  # the simulated user writes `prompt`
    reply: str | None = None  # the reply is given: graded as it stands, the model is not asked
    replayed_ms: int = 0  # a re-graded reply: the latency it had when the model gave it


@dataclass(frozen=True)
class Ending:
    """Why a conversation ends after a reply: a kind, and what particular (which condition, what limit)."""

    kind: TerminationKind
    detail: str | None = None

    @property
    def text(self) -> str:
        return self.kind.describe(self.detail)


@dataclass(frozen=True)
class Verdict:
    """How a conversation came out, in fields, so that no reader parses a sentence.

    `reason` is the verdict without how the conversation ended ("passed after 3 turns"), which its
    termination says; `text` is the whole sentence ("passed after 3 turns: condition met: …"), the same as
    `reason` for conversations that end when their script does.
    """

    outcome: Status
    score: float | None
    reason: str
    text: str = ""
    passed_on_turn: int | None = None

    def __post_init__(self) -> None:
        if not self.text:
            object.__setattr__(self, "text", self.reason)


@dataclass(frozen=True)
class TurnScores:
    """A scripted conversation's graded turns: their scores, how they combine, and whether it stopped before
    its last turn (a stopped conversation fails, whatever its score)."""

    scores: list[float]
    aggregation: str  # mean, min or max
    stopped: bool


def checks_score(checks: Sequence[CheckResult]) -> float | None:
    """The mean of a turn's check scores, each clamped to 0-1 (a check without a score of its own counts 1 or
    0); None without checks. A conversation tree's or simulated conversation's score, so that iterations
    of one eval show how well each did (a judge's 0.6 or 0.9), not only whether it passed."""
    scores = [
        min(1.0, max(0.0, check.score if check.score is not None else float(check.passed)))
        for check in checks
    ]
    return sum(scores) / len(scores) if scores else None


class Driver(ABC):
    """Plays one style of conversation (engine.schema.Style): the first turn, each next one, whether a
    reply ends the conversation, and the verdict. Built as `Driver(ev, index, defaults)`: the eval, its
    index in the suite and the suite's grading defaults."""

    # Whether this driver ends conversations itself (`ending`); an error then ends it too.
    has_endings: ClassVar[bool] = False
    # Whether each turn is graded on its own, a unit of the conversation's score (turns_passed of
    # turns_total), so that readers show every turn's pass or fail. Each driver says so itself.
    graded_per_turn: ClassVar[bool]
    multi_turn: bool  # planned for more than one turn, whatever the replies

    @abstractmethod
    def first(self) -> Step:
        """The first turn."""

    @abstractmethod
    def next(self, step: Step, turns: Sequence[TurnRecord]) -> Step | None:
        """The turn after `step`, given every turn so far (the last one is `step`'s); None: it is over."""

    def ending(
        self, step: Step, position: int, condition: ConditionResult | None, decided: str | None
    ) -> Ending | None:
        """Whether the reply to `step` (turn `position`) ends the conversation, given its stop condition as
        evaluated (`decided` names what decided it). Most drivers end when `next` has no turn left."""
        return None

    def tally(self, turns: Sequence[TurnRecord]) -> tuple[int, int] | None:
        """(passed, total) of the graded units so far, for drivers that count them; None otherwise."""
        return None

    def turn_scores(self, turns: Sequence[TurnRecord]) -> TurnScores | None:
        """The graded turns' scores, for drivers that score each turn apart (a pass rule `with_turns` counts
        them beside the named graders); None otherwise."""
        return None

    def out_of_script(self, turns: Sequence[TurnRecord]) -> bool:
        """Whether the conversation ended after `turns` because the eval had no message left to send, not
        because a reply decided it. A re-grade whose stored conversation went on has then lost a turn the
        new version removed, and diverged."""
        return True

    @abstractmethod
    def verdict(self, turns: Sequence[TurnRecord]) -> Verdict:
        """How the conversation came out, once `next` has said it is over (at least one turn)."""
