"""What running a suite produces: turn records, check results, eval results and the run report.

These models are the JSON output format (`evalsite.results/1`, documented in docs/results-format.md) and
also what the web app stores in its JSON columns, so the CLI, the API and the pages agree on one shape.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Literal

from pydantic import BaseModel, Field, computed_field, model_validator

from .gates import GateResult
from .outcomes import FINISHED, GRADED, Status, TerminationKind
from .schema import Style
from .stats import IteratedResult, overall_status

RESULTS_FORMAT = "evalsite.results/1"


class Usage(BaseModel):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    # True when the endpoint reported no usage and the numbers are our estimate (about 4 characters a token).
    estimated: bool = False

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            estimated=self.estimated or other.estimated,
        )


CRITERION = "criterion"  # the type of one weighted criterion of an llm_judge check, one of its children


class CallRef(BaseModel):
    """A tool call of an earlier turn of the conversation: the turn's number (TurnRecord.turn) and the call's
    0-based position in that turn's `tool_calls`."""

    turn: int
    call: int


class CheckResult(BaseModel):
    type: str
    label: str  # how the check reads to a person, e.g. match "*105*"
    passed: bool
    score: float | None = None
    reason: str
    raw: str | None = None  # the judge's raw answer, kept for review
    # How a judge's answer was read (engine.verdicts): json, fenced-json, embedded-json, number, prose or
    # words; what the score was read from, unless the answer was the JSON alone; and the first answer, when
    # it could not be read and the judge was asked again (`raw` is then its second answer).
    parsed_from: str | None = None
    read_from: str | None = None
    first_answer: str | None = None
    children: list[CheckResult] = Field(default_factory=list)  # members of an `or` block
    # llm_judge only: the judge's score on its own scale (None when its answer held none) and its reason as
    # it gave it, so that readers (calibration, comparisons) need not take them out of `reason`.
    judged: float | None = None
    judge_reason: str | None = None
    # llm_judge only: the judge's score looked like one on another scale (0.8 on 0-100), said as a note; the
    # score stands as given.
    scale_note: str | None = None
    # A reviewer overturned this outcome (engine.overrides): `passed` and `score` are the reviewer's, the
    # check's own are in `reason` and `raw`.
    overridden: bool = False
    # A tool check: the calls of its turn it matched (counted, found breaking it, or whose result it read), as
    # 0-based positions in the turn's `tool_calls`; None for the other checks.
    matched_calls: list[int] | None = None
    # A `scope: conversation` tool check: the calls of earlier turns it matched, as `matched_calls` counts
    # them, each by its turn; None for the other checks.
    matched_earlier_calls: list[CallRef] | None = None

    @property
    def is_criterion(self) -> bool:
        return self.type == CRITERION


class TurnGrade(BaseModel):
    """A turn graded against its ground truth (Letta's per_turn_grades), or the conversation's one grade."""

    turn: int
    score: float
    passed: bool
    rationale: str = ""
    submission: str  # what the extractor took from the reply (or the conversation)
    ground_truth: str
    grader: str = ""  # its kind: exact_match, contains, regex_match, llm_judge, or check
    raw: str | None = None  # an llm_judge grader's raw answer
    parsed_from: str | None = None  # how the judge's answer was read, as in CheckResult
    read_from: str | None = None
    first_answer: str | None = None
    name: str | None = None  # a named grader's name (suite `graders`); None for the eval's unnamed grader
    threshold: float | None = None  # the score it needed to pass
    overridden: bool = False  # a reviewer overturned it (engine.overrides)


class ConditionResult(BaseModel):
    """A stop condition (`simulate.stop_when`) as evaluated after one reply, with the members of all/any/not.

    `all` and `any` stop at the first member that decides them (so a judge is not asked needlessly); the
    members after it are recorded with `met` None, so the whole condition shows and nothing is charged."""

    kind: str  # all, any, not, after_turns, natural_language, or a check type
    label: str  # how the condition reads, e.g. natural_language "Booked?", field_equals status = "confirmed"
    met: bool | None  # None: not evaluated, an earlier member of its all/any had decided
    reason: str = ""  # what was compared, the check's reason, or the judge's reason
    confidence: float | None = None  # natural_language: the judge's confidence (0-1) that the answer is yes
    score: float | None = None  # a check: its score, as in CheckResult
    threshold: float | None = None  # the confidence or score needed, when there is one
    raw: str | None = None  # the judge's answer exactly as returned
    parsed_from: str | None = None  # how the judge's answer was read, as in CheckResult
    read_from: str | None = None
    first_answer: str | None = None
    usage: Usage | None = None  # the judge or embedding calls this condition made; None when it made none
    cost: float = 0.0
    children: list[ConditionResult] = Field(default_factory=list)  # members of all / any / not

    @property
    def answer(self) -> str:
        """The outcome without its reason: "no", "yes (0.91 ≥ 0.70)", "not evaluated"."""
        if self.met is None:
            return "not evaluated"
        answer = "yes" if self.met else "no"
        compared = self._compared()
        return f"{answer} ({compared})" if compared else answer

    @property
    def outcome(self) -> str:
        """How the verdict reads in a transcript: "no (0.35 < 0.70)", "yes: turn 3 ≥ 3", "not evaluated"."""
        if self.met is not None and self._compared() is None and self.reason and not self.children:
            return f"{self.answer}: {self.reason}"
        return self.answer

    def _compared(self) -> str | None:
        value = self.confidence if self.confidence is not None else self.score
        if value is None or self.threshold is None:
            return None
        return f"{value:.2f} {'≥' if value >= self.threshold else '<'} {self.threshold:.2f}"


class SimulatedUserCall(BaseModel):
    """What the simulated user was sent to write a turn's prompt, and its answer (tokens: user_usage)."""

    model: str
    messages: list[dict]  # its persona, instructions and the conversation so far; then the ask
    reply: str  # exactly as returned; the prompt is this with a role label or surrounding quotes removed


class ToolCall(BaseModel):
    """One tool call the model made within a turn, and the result that went back to it as a `tool` message."""

    id: str  # the call's id, as the model gave it (the tool message answers it)
    name: str
    arguments: dict | None = None  # as parsed; None when the model's arguments were no JSON object
    raw_arguments: str = ""  # exactly as the model sent them
    result: str = ""  # the `tool` message's content
    # What went wrong, in words: the model's mistake (no function name, an unknown tool, bad arguments) or
    # the tool's own error (a stub's `error`, a handler that raised, an MCP error result); None when it ran.
    error: str | None = None
    mistake: bool = False  # the error is the model's (no name, unknown tool, bad arguments), not the tool's
    source: str = ""  # where the result came from: returns, responses, error, code, llm, replay, mcp, or none
    latency_ms: int = 0
    # What the model that played the tool spent on this call (an `llm` tool); None when none was called. The
    # turn's judge_usage and judge_cost count it too.
    usage: Usage | None = None
    cost: float = 0.0


class ToolRound(BaseModel):
    """One model call of a turn that answered with tool calls: its text beside them, if any, and the calls."""

    text: str = ""
    calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    cost: float = 0.0
    latency_ms: int = 0
    # A round that did not finish (cut off at the token limit, filtered, refused, ended in an error): how it
    # ended, and why, in words. Its calls were not carried out (their arguments may be cut short), it is the
    # turn's last round, and its text is the turn's `response`, treated by the `incomplete_reply` rule.
    finish_reason: str | None = None
    incomplete: str | None = None


class TurnRecord(BaseModel):
    """One user message and the model's reply, graded. Written once, never updated."""

    turn: int  # 1-based position in the conversation
    node: str = ""  # where the prompt lives in the suite, e.g. evals[0].checks[1]
    prompt: str
    response: str
    usage: Usage = Field(default_factory=Usage)
    cost: float = 0.0
    latency_ms: int = 0
    checks: list[CheckResult] = Field(default_factory=list)
    passed: bool | None = None  # every check of this turn passed
    followup_reason: str | None = None  # why this follow-up was sent
    grade: TurnGrade | None = None  # scripted turns: this turn against its ground truth
    # Named graders (suite/eval `graders`): one grade per grader, for this turn (per-turn grading) or, on the
    # last turn, for the whole conversation. In the graders' order.
    grades: list[TurnGrade] = Field(default_factory=list)
    termination: str | None = None  # simulated: why the conversation ended after this turn, in words
    termination_kind: TerminationKind | None = None  # and as a kind
    termination_detail: str | None = None  # what decided it: the condition, the max turns
    user_usage: Usage = Field(default_factory=Usage)  # simulated user that wrote this turn's prompt
    user_cost: float = 0.0
    judge_usage: Usage = Field(default_factory=Usage)
    judge_cost: float = 0.0
    stop_when: ConditionResult | None = None  # simulated: the stop condition as evaluated after this reply
    simulated_user: SimulatedUserCall | None = None  # simulated: how the simulated user wrote this prompt
    # How the reply ended when the endpoint said something other than `stop` (`length`, `content_filter`,
    # `tool_calls`, …), and the model's refusal when it sent one.
    finish_reason: str | None = None
    refusal: str | None = None
    # Why the reply is no finished one, in words (cut off, filtered, refused, empty); None for an ordinary
    # reply. Such a turn is graded by the eval's `incomplete_reply` rule: ungraded under `error`, failed
    # under `fail` (no checks ran either way), graded as given under `grade`.
    incomplete: str | None = None
    # With tools offered: each model call of this turn that answered with tool calls, in order, before the
    # reply in `response`. `usage`, `cost` and `latency_ms` count every round.
    tool_rounds: list[ToolRound] = Field(default_factory=list)
    # The response cache (engine.cache): whether the model's reply came from it, how many of the turn's calls
    # did (the reply, the simulated user's, the judges'), and what they cost when first asked (not spent).
    cached: bool = False
    cached_calls: int = 0
    saved_cost: float = 0.0
    # The endpoints without prices that this turn's calls went to (engine.meter), sorted; the mock is never one.
    # Their calls count 0 in its costs, which are then unknown, or a lower bound. The last turn's names the
    # endpoints of the graders that judge the conversation after it too, as its judge_cost counts them.
    unpriced: list[str] = Field(default_factory=list)

    @computed_field
    @property
    def tool_calls(self) -> list[ToolCall]:
        """Every tool call of this turn, in the order the model made them: `tool_rounds`' calls, flat, also in
        the JSON for readers that look for calls rather than rounds (read back, it is rebuilt from the rounds)."""
        return [call for round_ in self.tool_rounds for call in round_.calls]

    @property
    def spent(self) -> float:
        """What the turn cost in all: the model's calls, its judges' and its simulated user's, as a run's spend
        counts it."""
        return self.cost + self.judge_cost + self.user_cost

    @model_validator(mode="before")
    @classmethod
    def _kind_of_termination(cls, data):
        # A record written by an older evalsite carries the termination in words only.
        if isinstance(data, dict) and data.get("termination") and "termination_kind" not in data:
            data = {**data, "termination_kind": TerminationKind.read(data["termination"])}
        return data


class Totals(BaseModel):
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    judge_tokens: int = 0
    user_tokens: int = 0  # the simulated user's
    cost: float = 0.0  # agent + judge + simulated user
    agent_cost: float = 0.0
    judge_cost: float = 0.0
    user_cost: float = 0.0
    estimated: bool = False
    cached_calls: int = 0  # calls answered from the response cache
    saved_cost: float = 0.0  # what they cost when first asked

    @classmethod
    def of(cls, turns: list[TurnRecord]) -> Totals:
        # One pass over the turns, as every conversation's end counts them: the sums, in the turns' order,
        # are the ones sum() would give (each from 0, so that costs add up exactly as before).
        prompt = completion = judge = user = cached = 0
        cost = agent_cost = judge_cost = user_cost = saved = 0
        estimated = False
        for turn in turns:
            usage, judge_usage, user_usage = turn.usage, turn.judge_usage, turn.user_usage
            prompt += usage.prompt_tokens
            completion += usage.completion_tokens
            estimated = estimated or usage.estimated
            judge += judge_usage.prompt_tokens + judge_usage.completion_tokens
            user += user_usage.prompt_tokens + user_usage.completion_tokens
            cost += turn.cost + turn.judge_cost + turn.user_cost
            agent_cost += turn.cost
            judge_cost += turn.judge_cost
            user_cost += turn.user_cost
            cached += turn.cached_calls
            saved += turn.saved_cost
        return cls(
            turns=len(turns),
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=prompt + completion,
            judge_tokens=judge,
            user_tokens=user,
            cost=round(cost, 8),
            agent_cost=round(agent_cost, 8),
            judge_cost=round(judge_cost, 8),
            user_cost=round(user_cost, 8),
            estimated=estimated,
            cached_calls=cached,
            saved_cost=round(saved, 8),
        )


class GraderResult(BaseModel):
    """One named grader's verdict on a whole eval: its turns' scores combined by the eval's aggregation."""

    name: str
    kind: str  # exact_match, contains, regex_match, llm_judge or check
    score: float | None  # None: it graded nothing (the conversation errored before any graded turn)
    passed: bool | None
    threshold: float
    turns_graded: int = 0  # how many grades it gave (one per graded turn, or one for the conversation)
    # Graded once for the conversation (not per turn): that grade, with its rationale and raw judge answer.
    grades: list[TurnGrade] = Field(default_factory=list)


class OverrideRecord(BaseModel):
    """A reviewer's outcome for one check of one turn (`checks[i]`) or its ground-truth grade (`grade`)."""

    turn: int
    target: str
    passed: bool
    note: str
    by: str = ""
    at: str = ""  # ISO 8601


class OriginalVerdict(BaseModel):
    """An overridden conversation's verdict as the run gave it."""

    status: Status
    score: float | None = None
    verdict: str = ""
    passed_on_turn: int | None = None


class EvalResult(BaseModel):
    index: int
    id: str
    tags: list[str] = Field(default_factory=list)  # the eval's tags, to filter and group results by
    kind: Literal["single-turn", "multi-turn"]
    conversation: Style = Style.TREE
    iteration: int = 0  # which repetition of the eval (iterations > 1)
    prompt: str  # the first user message
    status: Status  # queued and running only in a web report of a run still in progress
    score: float | None = None
    passed_on_turn: int | None = None
    verdict: str  # "passed on turn 2", "failed after 3 turns", "error on turn 1: ..."
    reason: str = ""  # the verdict without how the conversation ended, which `termination` says
    error: str | None = None
    history: list[dict] = Field(default_factory=list)  # given messages sent before the live turns
    # What was sent before the live turns, as AgentV records it: the system message (the suite's
    # `system` with any `.instructions.md` guidelines as `=== name ===` blocks) and the given history as the
    # formatted question (`[Role]:` markers where there is conversational structure).
    system: str = ""
    question: str = ""
    termination: str | None = None  # simulated: condition met (which), max turns, inputs exhausted, error
    termination_kind: TerminationKind | None = None  # the same, as a kind
    termination_detail: str | None = None  # what decided it: the condition, the max turns
    # A re-grade only: the turn at which this version parts from the stored conversation (a message changed
    # or removed, a simulated user asked otherwise, a turn never stored). Graded up to the turn before; only a
    # new run can grade it further, so a retry of the re-grade cannot change it.
    diverged_at: int | None = None
    turns: list[TurnRecord] = Field(default_factory=list)
    turns_passed: int | None = None  # graded units (turns, or the conversation) that passed
    turns_total: int | None = None
    per_turn_grades: list[TurnGrade] = Field(default_factory=list)
    graders: list[GraderResult] = Field(default_factory=list)  # named graders, in the suite's order
    totals: Totals = Field(default_factory=Totals)
    # Reviewers' overrides of check outcomes (engine.overrides), and the verdict the run gave before them;
    # status, score and verdict above are the reviewed ones. Empty / None: nobody overrode anything.
    overrides: list[OverrideRecord] = Field(default_factory=list)
    original: OriginalVerdict | None = None

    def grader(self, name: str) -> GraderResult | None:
        return next((item for item in self.graders if item.name == name), None)

    @property
    def unpriced(self) -> list[str]:
        """The endpoints without prices that the conversation's calls went to (its turns'), sorted."""
        return unpriced_in(self.turns)

    @model_validator(mode="before")
    @classmethod
    def _structured_verdict(cls, data):
        # A document written by an older evalsite has the verdict and the ending in words only.
        if isinstance(data, dict):
            if "reason" not in data and data.get("verdict"):
                data = {**data, "reason": data["verdict"]}
            if data.get("termination") and "termination_kind" not in data:
                data = {**data, "termination_kind": TerminationKind.read(data["termination"])}
        return data


class RunTotals(BaseModel):
    evals: int = 0
    passed: int = 0
    failed: int = 0
    error: int = 0
    cancelled: int = 0
    skipped: int = 0  # a re-grade's evals that the source run never played: in none of the counts above
    turns: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    judge_tokens: int = 0
    user_tokens: int = 0
    cost: float = 0.0
    agent_cost: float = 0.0
    judge_cost: float = 0.0
    user_cost: float = 0.0
    cached_calls: int = 0
    saved_cost: float = 0.0
    duration_s: float | None = None

    @classmethod
    def of(cls, evals: list[EvalResult], duration_s: float | None = None) -> RunTotals:
        totals = cls(duration_s=duration_s)
        for result in evals:
            totals.add(result)
        return totals

    def add(self, result: EvalResult) -> None:
        """Count one more eval in: a streamed report adds its evals one at a time."""
        self.evals += 1
        if result.status in FINISHED:
            setattr(self, result.status, getattr(self, result.status) + 1)
        self.turns += result.totals.turns
        self.prompt_tokens += result.totals.prompt_tokens
        self.completion_tokens += result.totals.completion_tokens
        self.total_tokens += result.totals.total_tokens
        self.judge_tokens += result.totals.judge_tokens
        self.user_tokens += result.totals.user_tokens
        self.cost = round(self.cost + result.totals.cost, 8)
        self.agent_cost = round(self.agent_cost + result.totals.agent_cost, 8)
        self.judge_cost = round(self.judge_cost + result.totals.judge_cost, 8)
        self.user_cost = round(self.user_cost + result.totals.user_cost, 8)
        self.cached_calls += result.totals.cached_calls
        self.saved_cost = round(self.saved_cost + result.totals.saved_cost, 8)


def unpriced_in(turns: Iterable[TurnRecord]) -> list[str]:
    """The endpoints without prices that these turns' calls went to, sorted."""
    return sorted({name for turn in turns for name in turn.unpriced})


def gated_status(evals: list[EvalResult], gates: list[GateResult], iterated=()) -> Status:
    """With gates, the gates decide between passed and failed (single evals may fail); errors still win.
    Iterated evals count by their pass rate, not by each iteration."""
    status = overall_status(evals, list(iterated))
    if not gates or status not in GRADED:
        return status
    return Status.PASSED if all(gate.passed for gate in gates) else Status.FAILED


class SuiteRef(BaseModel):
    name: str
    version: int | None = None
    sha256: str | None = None


def stream_report(head: dict, evals: Iterable[EvalResult], duration_s: float | None = None) -> Iterator[str]:
    """A RunReport as JSON text, piece by piece, for runs too big to hold: `head` holds every field but
    `evals` and `totals` (as RunReport.model_dump(mode="json") gives them); the evals are written as they
    come and the totals added up on the way. Parsed, it is the same document as the RunReport's."""
    totals = RunTotals(duration_s=duration_s)
    yield json.dumps({"format": RESULTS_FORMAT, **head}, indent=2)[:-2] + ',\n  "evals": ['
    for n, result in enumerate(evals):
        totals.add(result)
        yield ("\n    " if n == 0 else ",\n    ") + result.model_dump_json()
    yield '\n  ],\n  "totals": ' + totals.model_dump_json() + "\n}\n"


DEFAULT_ENDPOINT = "default"  # the endpoint that OPENAI_BASE_URL and OPENAI_API_KEY configure


class RunReport(BaseModel):
    format: Literal["evalsite.results/1"] = RESULTS_FORMAT
    suite: SuiteRef
    model: str
    endpoint: str
    mock: bool = False
    # The suite's variables as the run filled them (engine.suitevars); secrets are never here.
    vars: dict[str, str] | None = None
    # The generation settings the run sent, per role ({model, judge, user}; engine.clients.settings).
    settings: dict[str, dict] | None = None
    status: Status
    # Why the run stopped short of its conversations ("cost limit $5.00 reached"); None when it did not.
    stop_reason: str | None = None
    gates: list[GateResult] = Field(default_factory=list)
    evals: list[EvalResult]  # one per conversation: every iteration of every eval
    iterated: list[IteratedResult] = Field(default_factory=list)  # evals run more than once, with statistics
    totals: RunTotals
    # The endpoints without prices that the run's calls went to (its turns' `unpriced`), the mock aside: their
    # calls count 0 in every cost and `saved_cost`, so those figures are unknown, or a lower bound when some
    # endpoint has prices. An endpoint without prices that the run never called leaves its cost known.
    unpriced: list[str] = Field(default_factory=list)

    @computed_field
    @property
    def cost_known(self) -> bool:
        """Whether every cost is whole: no call the run made went to an endpoint without prices (read back,
        it is worked out from `unpriced` again)."""
        return not self.unpriced
