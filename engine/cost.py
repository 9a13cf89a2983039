"""What a run of a suite may cost, worked out before it starts from the endpoints' prices and the suite's size,
and the words that say what the figure rests on (which endpoints it may call have no prices); and the cost
limit's words. How a cost is said as far as prices tell (`spent`): a run's calls to endpoints without prices
count 0 in what it spent, and which endpoints those calls went to is noted as they are made (engine.meter).

The estimate counts model calls, not dollars spent: each conversation's turns (a tree's follow-up depth, a
scripted list's length, a simulated conversation's `max_turns`), each turn's judge calls, and tokens guessed
from the text (four characters a token, the history growing turn by turn). "≈" is every conversation ending at
its fewest turns with replies of DEFAULT_COMPLETION_TOKENS (or fewer under `max_tokens`); "up to" is every one
at its most turns with replies as long as `max_tokens` allows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from .cache import roles_of
from .clients.base import MOCK, EndpointConfig
from .schema import Check, Eval, Style, Suite, followup_depth
from .text import plural

CHARS_PER_TOKEN = 4
# A reply's length when nothing caps it: a short answer, as most evals ask for.
DEFAULT_COMPLETION_TOKENS = 200
# Without a cap the longest reply is taken to be this many times the usual one.
UNCAPPED_HIGH = 4
# What a judge's request adds to the reply it grades (its instructions, the JSON it asks for) and its answer.
JUDGE_OVERHEAD_TOKENS = 250
JUDGE_COMPLETION_TOKENS = 80
# A simulated user's message when the suite gives none to measure.
USER_MESSAGE_TOKENS = 40

Prices = Callable[[str], "tuple[str, EndpointConfig | None]"]


def tokens(text: str | None) -> int:
    return (len(text) + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN if text else 0


@dataclass
class Spend:
    """Calls and tokens at one endpoint, at its fewest and most."""

    calls: int = 0
    calls_high: int = 0
    prompt: int = 0
    completion: int = 0
    prompt_high: int = 0
    completion_high: int = 0

    def add(self, low: tuple[int, int, int], high: tuple[int, int, int]) -> None:
        self.calls += low[0]
        self.prompt += low[1]
        self.completion += low[2]
        self.calls_high += high[0]
        self.prompt_high += high[1]
        self.completion_high += high[2]


@dataclass
class Estimate:
    """A run's cost before it starts: `low` ("≈") and `high` ("up to") in USD, None when some endpoint it calls
    has no prices (`unpriced` names them)."""

    conversations: int
    turns_low: int  # per conversation, the fewest and the most any has
    turns_high: int
    model: Spend
    judges: Spend
    prices: dict[str, EndpointConfig | None] = field(default_factory=dict)  # endpoint name -> its config
    roles: dict[str, str] = field(default_factory=dict)  # "model" / "judges" -> endpoint name
    low: float | None = None
    high: float | None = None
    judges_low: float | None = None
    judges_high: float | None = None
    cached: bool = False  # the run has the response cache on: some of its calls may cost nothing

    @property
    def unpriced(self) -> list[str]:
        return sorted(
            name
            for name, config in self.prices.items()
            if name != MOCK and (config is None or not config.priced)
        )

    @property
    def some_priced(self) -> bool:
        return len(self.unpriced) < len([name for name in self.prices if name != MOCK])

    @property
    def free(self) -> bool:
        return all(name == MOCK for name in self.prices)

    def lines(self) -> list[str]:
        """What the estimate is and what it rests on, in one or two lines."""
        conversations = f"{self.conversations} conversation{'s' if self.conversations != 1 else ''}"
        turns = (
            f"{self.turns_low} turn{'s' if self.turns_high != 1 else ''}"
            if self.turns_low == self.turns_high
            else f"{self.turns_low}–{self.turns_high} turns"
        )
        calls = self.model.calls or 1
        per_call = f"~{self.model.prompt // calls} prompt + {self.model.completion // calls} completion tokens a call"
        if self.free:
            return [f"no cost: the mock endpoint ({conversations} × {turns})"]
        if self.low is None:
            names = ", ".join(self.unpriced)
            return [
                f"no prices set for endpoint {names}: cost unknown ({conversations} × {turns}, {per_call})"
            ]
        model = self.prices.get(self.roles.get("model", ""))
        rate = (
            f" at ${per_million(model.price_input)}/${per_million(model.price_output)} per M" if model else ""
        )
        head = f"≈ {money(self.low)} (up to {money(self.high)}): {conversations} × {turns}, {per_call}{rate}"
        if self.judges.calls_high:
            head += f"; judges and simulated users {money(self.judges_low)} (up to {money(self.judges_high)})"
        if self.cached:  # what the cache will answer is known only as the run goes
            head += "; every call counted, though the response cache may answer some for nothing"
        return [head]

    def text(self) -> str:
        return "\n".join(self.lines())


def money(usd: float | None) -> str:
    if usd is None:
        return "unknown"
    if usd and usd < 0.01:
        return f"${usd:.4f}"
    return f"${usd:,.2f}"


def per_million(usd: float) -> str:
    """A price as the admin typed it, with cents at least: 0.15, 0.60, 1000.00, 0.075."""
    return f"{usd:.2f}" if round(usd, 2) == usd else f"{usd:g}"


def limit_reached(limit: float) -> str:
    """Why a run stopped at its cost limit, as its page, the API and the CLI say it."""
    return f"cost limit {money(limit)} reached"


def no_prices(names: Sequence[str]) -> str:
    """Why a cost is unknown, or only part of it known: "no prices for endpoint fake"."""
    return f"no prices for endpoint{'s' if len(names) > 1 else ''} {', '.join(names)}"


def spent(usd: float, unpriced: Sequence[str], digits: int = 6) -> str | None:
    """An amount a run spent (or saved), as far as its endpoints' prices tell: "$0.001234"; "at least
    $0.001234" when some endpoint it called has no prices (`unpriced`); None (unknown) when they are all it
    paid for."""
    if not unpriced:
        return f"${usd:.{digits}f}"
    return f"at least ${usd:.{digits}f}" if usd else None


def variant_costs(found: list[tuple[str, Estimate]]) -> list[tuple[str, list[str]]]:
    """A matrix's estimate: each variant's lines, then their sum ("both variants", "all 3 variants") when
    every variant's is known."""
    costs = [(name, each.lines()) for name, each in found]
    estimates = [each for _, each in found]
    if estimates and all(each.low is not None for each in estimates) and not all(e.free for e in estimates):
        low, high = sum(each.low for each in estimates), sum(each.high for each in estimates)
        together = "both variants" if len(estimates) == 2 else f"all {plural(len(estimates), 'variant')}"
        costs.append((together, [f"≈ {money(low)} (up to {money(high)})"]))
    return costs


def before_run(found: list[tuple[str, Estimate]], limit: float | None) -> list[str]:
    """What a run may cost and its limit, as `evalsite run` says it before anything is spent, here or on a
    server (whose launch answers these lines): a line each, without the "cost: " the terminal puts first.
    `found`: the run's estimate with no name, or a matrix's, a (name, estimate) per variant, each a run with
    the limit of its own. Nothing when there is nothing to say: no endpoint with prices and no limit (the
    line would be the same on every run)."""
    if all(each.free for _, each in found):
        # Said, as the limit is: a run that spends nothing never reaches it.
        return [f"none, the mock endpoint · limit {money(limit)}, never reached"] if limit is not None else []
    if not any(each.some_priced for _, each in found) and limit is None:
        return []
    # A matrix's variants are runs of their own, each with the limit.
    each = " a variant" if len(found) > 1 else ""
    said = f" · limit {money(limit)}{each}" if limit is not None else ""
    if any(each.low is None for _, each in found) and limit is not None:
        # Only calls to endpoints with prices count towards the limit: it stops a run that makes any.
        if not any(each.some_priced for _, each in found):
            said += ", which spends nothing without prices and so never stops the run"
        elif all(each.some_priced for _, each in found):
            said += ", counting the calls to endpoints with prices"
        else:
            said += ", counting the calls to endpoints with prices (a variant with none never reaches it)"
    costs = variant_costs(found) if len(found) > 1 else [("", found[0][1].lines())]
    return [f"{f'{name}: ' if name else ''}{line}{said}" for name, lines in costs for line in lines]


def estimate(suite: Suite, resolve: Prices, model: str | None = None) -> Estimate:
    """The cost of running `suite` (with `model` over its own), from the endpoints `resolve` maps a model
    reference to: (endpoint name, its config, or None when it has none)."""
    model_ref = model or suite.model or MOCK
    judge_ref = suite.judge or model_ref
    prices: dict[str, EndpointConfig | None] = {}
    roles = {"model": _endpoint(resolve, model_ref, prices), "judges": _endpoint(resolve, judge_ref, prices)}
    settings = suite.model_settings
    agent, judges = Spend(), Spend()
    conversations, turns_low, turns_high = 0, None, 0
    cost_low = cost_high = 0.0
    judge_low = judge_high = 0.0
    priced = True
    for ev in suite.evals:
        times = ev.iterations or suite.iterations
        if times < 1:
            continue
        conversations += times
        cap = _cap(settings.merged(ev.model_settings) if settings else ev.model_settings)
        plan = _plan(ev, suite)
        fewest, most = plan.fewest, len(plan.messages)
        turns_low = fewest if turns_low is None else min(turns_low, fewest)
        turns_high = max(turns_high, most)
        low_reply = min(DEFAULT_COMPLETION_TOKENS, cap) if cap else DEFAULT_COMPLETION_TOKENS
        high_reply = cap or DEFAULT_COMPLETION_TOKENS * UNCAPPED_HIGH
        low = _calls(plan, fewest, low_reply)
        high = _calls(plan, most, high_reply)
        agent.add(_times(low, times), _times(high, times))
        judged_low = _judge_calls(plan, fewest, low_reply)
        judged_high = _judge_calls(plan, most, high_reply)
        judge_endpoint = roles["judges"]
        if ev.simulate is not None and ev.simulate.model:
            judge_endpoint = _endpoint(resolve, ev.simulate.model, prices)
        judges.add(_times(judged_low, times), _times(judged_high, times))
        for name, low_, high_, into in (
            (roles["model"], low, high, "model"),
            (judge_endpoint, judged_low, judged_high, "judge"),
        ):
            config = prices.get(name)
            if name == MOCK or (low_[0] == 0 and high_[0] == 0):
                continue
            if config is None or not config.priced:
                priced = False
                continue
            a = times * _usd(config, low_)
            b = times * _usd(config, high_)
            cost_low += a
            cost_high += b
            if into == "judge":
                judge_low += a
                judge_high += b
    result = Estimate(
        conversations=conversations,
        turns_low=turns_low or 0,
        turns_high=turns_high,
        model=agent,
        judges=judges,
        prices=prices,
        roles=roles,
        cached=roles_of(suite) is not None,
    )
    if priced:
        result.low, result.high = round(cost_low, 6), round(cost_high, 6)
        result.judges_low, result.judges_high = round(judge_low, 6), round(judge_high, 6)
    return result


def _endpoint(resolve: Prices, ref: str, prices: dict) -> str:
    name, config = resolve(ref)
    prices.setdefault(name, config)
    return name


def _cap(settings) -> int | None:
    if settings is None:
        return None
    return settings.max_completion_tokens or settings.max_tokens


def _times(counts: tuple[int, int, int], times: int) -> tuple[int, int, int]:
    return tuple(value * times for value in counts)  # type: ignore[return-value]


def _usd(config: EndpointConfig, counts: tuple[int, int, int]) -> float:
    return (counts[1] * config.price_input + counts[2] * config.price_output) / 1e6


@dataclass
class Plan:
    """One conversation as the estimate sees it: the tokens sent before any turn, each turn's user message,
    the fewest turns it may take, and the judge calls (with the tokens of their instructions) on each turn."""

    prefix: int
    messages: list[int]
    fewest: int
    judges: list[list[int]]  # per turn, each judge call's own tokens (rubric, criteria)
    simulated: bool = False
    persona: int = 0  # a simulated user's instructions, read on each of its calls
    given: int | None = None  # a given reply's tokens: the judges read it, and the model is not called
    graded: list[int] = field(default_factory=list)  # judges grading the whole conversation once, at its end


def _plan(ev: Eval, suite: Suite) -> Plan:
    plan = _turns(ev, suite.system)
    # Rubric judges grade a conversation once, after its last turn: `grader: llm_judge` and named llm_judge
    # graders, each reading its rubric.
    if (ev.grader or suite.grader) == "llm_judge" and ev.ground_truth is not None:
        plan.graded.append(tokens(ev.rubric or suite.rubric))
    for grader in (ev.graders or {}).values():
        if grader.kind == "llm_judge":
            plan.graded.append(tokens(grader.rubric))
        elif grader.kind == "check" and grader.check is not None:
            plan.graded += _judged([grader.check])
    return plan


def _turns(ev: Eval, system: str | None) -> Plan:
    prefix = tokens(system) + sum(tokens(_text(m.content)) for m in ev.messages or [])
    style = ev.style
    if style == Style.GIVEN:
        return Plan(prefix, [0], 1, [_judged(ev.checks or [])], given=tokens(ev.reply))
    if style == Style.TREE:
        depth = followup_depth(ev.checks or [])
        prompts = [tokens(ev.prompt)] + _followups(ev.checks or [])[:depth]
        prompts += [prompts[-1]] * (depth + 1 - len(prompts))
        level = _judged(ev.checks or [])
        return Plan(prefix, prompts, 1, [level] * len(prompts))
    if style == Style.SCRIPTED:
        inputs = [ev.input] if isinstance(ev.input, str) else list(ev.input or [])
        level = _judged(ev.checks or [])
        return Plan(prefix, [tokens(text) for text in inputs], len(inputs), [level] * len(inputs))
    if style == Style.TURNS:
        turns = ev.turns or []
        return Plan(
            prefix, [tokens(t.input) for t in turns], len(turns), [_judged(t.checks or []) for t in turns]
        )
    if style == Style.SIMULATED:
        spec = ev.simulate
        first = tokens(ev.first_text) if ev.prompt or ev.input else USER_MESSAGE_TOKENS
        persona = (
            spec.persona if isinstance(spec.persona, str) else " ".join(s.text for s in spec.persona or [])
        )
        stop = [tokens(str(spec.stop_when))] if spec.stop_when is not None else []
        # Each turn but the first the simulated user writes (one call, its persona and the history in it),
        # and a stop condition is one more judge call.
        level = _judged(ev.checks or []) + stop
        messages = [first] + [USER_MESSAGE_TOKENS] * (spec.max_turns - 1)
        return Plan(prefix, messages, 1, [level] * spec.max_turns, simulated=True, persona=tokens(persona))
    return Plan(prefix, [USER_MESSAGE_TOKENS if not ev.messages else 0], 1, [_judged(ev.checks or [])])


def _text(content) -> str:
    if isinstance(content, str):
        return content
    return " ".join(part.value for part in content or [] if part.type == "text")


def _followups(checks: list[Check]) -> list[int]:
    """The follow-up prompts down the first branch that has them, in order."""
    for item in checks:
        if item.prompt is not None:
            return [tokens(item.prompt)] + _followups(item.checks or [])
        if item.or_:
            found = _followups(item.or_)
            if found:
                return found
    return []


def _judged(checks: Iterable[Check]) -> list[int]:
    """The judge calls grading one reply under these checks (this level's, not the follow-ups'), each as the
    tokens of its own instructions."""
    calls = []
    for item in checks:
        if item.llm_judge is not None:
            criteria = item.llm_judge.criteria
            calls.append(tokens(criteria if isinstance(criteria, str) else str(criteria)))
        if item.semantic is not None:
            calls.append(tokens(item.semantic.expected))
        if item.or_:
            calls += _judged(item.or_)
    return calls


def _calls(plan: Plan, turns: int, reply: int) -> tuple[int, int, int]:
    """Calls, prompt and completion tokens of the model under test over `turns` turns: each call sends the
    history so far (every earlier message and reply) and this turn's message."""
    if plan.given is not None:
        return 0, 0, 0
    prompt, history = 0, plan.prefix
    for message in plan.messages[:turns]:
        history += message
        prompt += history
        history += reply
    return turns, prompt, turns * reply


def _judge_calls(plan: Plan, turns: int, reply: int) -> tuple[int, int, int]:
    """Judges' (and a simulated user's) calls and tokens over `turns` turns: a judge reads the turn's message,
    the reply and its own instructions; a simulated user reads its persona and the whole history."""
    calls = prompt = completion = 0
    history = plan.prefix
    if plan.given is not None:
        reply = plan.given
    for turn in range(turns):
        message = plan.messages[turn]
        for own in plan.judges[turn] if turn < len(plan.judges) else []:
            calls += 1
            prompt += JUDGE_OVERHEAD_TOKENS + own + message + reply
            completion += JUDGE_COMPLETION_TOKENS
        history += message + reply
        if plan.simulated and turn + 1 < turns:
            calls += 1
            prompt += JUDGE_OVERHEAD_TOKENS + plan.persona + history
            completion += USER_MESSAGE_TOKENS
    for own in plan.graded if turns else []:
        calls += 1
        prompt += JUDGE_OVERHEAD_TOKENS + own + history  # a rubric judge reads the whole conversation
        completion += JUDGE_COMPLETION_TOKENS
    return calls, prompt, completion
