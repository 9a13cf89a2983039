"""Bolt Foundry's calibrate (aibff, bff-eval) files, as an evalsite calibration set (docs/calibration.md).

aibff keeps a grader in a deck: `*.deck.md` markdown whose `![alt](file)` embeds pull in other cards and
decks (inlined, recursively) and TOML files (`*.deck.toml`, removed from the text), which hold
`[contexts.<name>]` questions and `[samples.<id>]` ground truth. `aibff calibrate deck.md` sends the judge
the assembled markdown as its system message, then each context as the deck's question (assistant) and its
value (user): `userMessage` is the sample's last user message, `assistantResponse` its last assistant
message, `fullConversation` the whole sample, `outputFormat` the JSON it wants back (as bff-eval's eval
filled it), any other context its `default` (one with no value is not asked). The judge answers
`{score, reason}` on -3..3 at temperature 0, compared with each sample's flat `score` (1 when it has none).

Samples come keyed (`[samples.<id>]` with `score`, `description` and `messages`, or the older
`userMessage` / `assistantResponse`), as bff-eval JSONL rows (`userMessage`, `assistantResponse`, `score`,
`id`, `description`), or as `[[samples]]` tables. They are written to one attached JSONL file in
evalsite's sample form; the deck becomes the judge's `criteria` and its `messages`.
"""

from __future__ import annotations

import json
import posixpath
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field

from .common import (
    Converted,
    ImportProblem,
    Report,
    Section,
    as_number,
    is_yaml_name,
    non_finite,
    parse_yaml,
    safe_file_name,
    short,
)

PLACEHOLDER = "Describe what a good reply does (no grader deck was given with the samples)"
SAMPLE_KEYS = {"messages", "userMessage", "assistantResponse"}
REASON_KEYS = ("description", "explanation", "reasoning", "reason")
KNOWN_KEYS = {*SAMPLE_KEYS, "score", "expected", "id", "tags", *REASON_KEYS}
# The contexts aibff fills from each sample; any other context is asked only with its `default`.
OUTPUT_FORMAT = json.dumps(
    {"score": "<number from -3 to 3>", "reason": "<brief explanation of your scoring>"}, indent=2
)  # what aibff's eval answers to a deck's outputFormat context
SAMPLE_CONTEXTS = {
    "userMessage": "{{input}}",
    "assistantResponse": "{{output}}",
    "fullConversation": "{{conversation}}",
    "outputFormat": OUTPUT_FORMAT,
}
# The contexts bff-eval's makeGraderDeckBuilder added to every grader deck, with its questions.
GRADER_CONTEXTS = {
    "userMessage": "What was the user's original message?",
    "assistantResponse": "What was the assistant's response?",
    "outputFormat": "What format would you like for the output?",
}
EMBED = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FRONTMATTER = re.compile(r"\A\s*(\+\+\+|---)[ \t]*\n(.*?)\n\1[ \t]*(\n|\Z)", re.S)
MAX_JUDGES = 10
IMAGES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")
MAX_DEPTH = 20


def is_deck(name: str) -> bool:
    return name.lower().endswith(".deck.md")


def sample_shape(data: object) -> bool:
    """Whether parsed data (TOML, or JSONL rows as a list) holds calibrate samples or a deck's contexts."""
    if isinstance(data, list):  # JSONL rows
        rows = [row for row in data if not isinstance(row, Unreadable)]
        return bool(rows) and all(isinstance(row, dict) and _row_shape(row) for row in rows)
    if not isinstance(data, dict) or {"evals", "judge", "judges", "tests"} & set(data):
        return False
    examples = data.get("examples")  # the aibff GUI's ground truth: input, expected_output and a score
    if isinstance(examples, list) and examples and "samples" not in data:
        return all(isinstance(e, dict) and {"input", "expected_output"} <= set(e) for e in examples)
    samples = data.get("samples")
    if isinstance(samples, list):
        return bool(samples) and all(isinstance(s, dict) and SAMPLE_KEYS & set(s) for s in samples)
    if isinstance(samples, dict):
        rows = [row for row in samples.values() if isinstance(row, dict)]
        return bool(rows) and any(SAMPLE_KEYS & set(row) for row in rows)
    contexts = data.get("contexts")  # a deck's questions: each asks the assistantQuestion (or question)
    return (
        isinstance(contexts, dict)
        and bool(contexts)
        and all(isinstance(c, dict) and {"assistantQuestion", "question"} & set(c) for c in contexts.values())
    )


def _row_shape(row: dict) -> bool:
    if "userMessage" in row or "assistantResponse" in row:
        return True
    return isinstance(row.get("messages"), list) and "score" in row  # aibff's messages with a flat score


# --- reading sample files ----------------------------------------------------------------------------------


@dataclass
class Sample:
    id: str
    messages: list[dict]
    score: float
    reason: str = ""
    tags: list[str] = field(default_factory=list)
    legacy: bool = False  # written as userMessage / assistantResponse


def parse_file(name: str, text: str) -> object:
    """A TOML (or YAML) file as a dict, a JSONL file as its rows; ImportProblem when it cannot be read."""
    if is_yaml_name(name):
        return parse_yaml(name, text)
    if name.lower().endswith(".toml"):
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ImportProblem(f"{name} is not valid TOML: {exc}") from None
    rows: list[object] = []
    for number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            rows.append(Unreadable(number, str(exc)))
    if rows and all(isinstance(row, Unreadable) for row in rows):
        raise ImportProblem(
            f"{name} line {rows[0].line} is not valid JSON (a JSONL file holds one object a line)"
        )
    return rows


@dataclass
class Unreadable:
    """A JSONL line that is not JSON: the sample it held is lost, the others are read."""

    line: int
    error: str


def _rows(name: str, data: object) -> list[tuple[str, str | None, object]]:
    """(where, id, row) for each sample a file holds."""
    if isinstance(data, list):
        return [(f"{name} line {n + 1}", None, row) for n, row in enumerate(data)]
    samples = data.get("samples") if isinstance(data, dict) else None
    if isinstance(samples, list):
        return [(f"{name} samples[{n}]", None, row) for n, row in enumerate(samples)]
    if isinstance(samples, dict):
        return [(f"{name} samples.{key}", key, row) for key, row in samples.items()]
    examples = data.get("examples") if isinstance(data, dict) else None
    if isinstance(examples, list):
        return [(f"{name} examples[{n}]", None, _example(row)) for n, row in enumerate(examples)]
    return []


def _example(row: object) -> object:
    """A ground-truth example of the aibff GUI as a sample: its input asked, its expected output replied."""
    if not isinstance(row, dict) or "messages" in row:
        return row
    out = {k: v for k, v in row.items() if k not in ("input", "expected_output")}
    return {"userMessage": row.get("input"), "assistantResponse": row.get("expected_output"), **out}


def read_samples(name: str, data: object, report: Report, taken: set[str]) -> list[Sample]:
    out = []
    for where, key, row in _rows(name, data):
        if isinstance(row, Unreadable):
            report.lose(f"{where}: not valid JSON ({row.error}); the sample it held is left out")
            continue
        if not isinstance(row, dict):
            report.skip(f"{where}: not a table, left out")
            continue
        sample = _sample(where, key, row, report)
        if sample is None:
            continue
        wanted = sample.id or where.rsplit(" ", 1)[-1]
        sample.id, number = wanted, 2
        while sample.id in taken:
            sample.id, number = f"{wanted}-{number}", number + 1
        taken.add(sample.id)
        out.append(sample)
    return out


def _sample(where: str, key: str | None, row: dict, report: Report) -> Sample | None:
    if "messages" in row:
        messages = row["messages"]
    elif "userMessage" in row or "assistantResponse" in row:
        messages = [
            {"role": role, "content": row[source]}
            for role, source in (("user", "userMessage"), ("assistant", "assistantResponse"))
            if row.get(source) not in (None, "")
        ]
    else:
        report.lose(f"{where}: no messages (nor userMessage / assistantResponse): the sample is left out")
        return None
    if not isinstance(messages, list) or non_finite(messages):
        report.lose(f"{where}.messages: not a list of messages: the sample is left out")
        return None
    clean = []
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            report.lose(f"{where}.messages: a message without a role: the sample is left out")
            return None
        content = message.get("content")
        if not isinstance(content, str):
            content = "" if content is None else json.dumps(content, ensure_ascii=False)
        if content.strip():
            clean.append({"role": message["role"], "content": content})
    if not any(m["role"] == "assistant" for m in clean):
        report.group("no assistant message, so no reply to judge: the sample is left out", where, lost=True)
        return None
    expected = row.get("expected")
    written = row.get("score")
    reason = next((row[k] for k in REASON_KEYS if isinstance(row.get(k), str)), "")
    if written is None and isinstance(expected, dict):
        written = expected.get("score")
        reason = reason or (expected.get("reason") if isinstance(expected.get("reason"), str) else "")
    elif written is None:
        written = expected
    score = as_number(written)
    if score is None and isinstance(written, str):
        try:
            score = as_number(float(written))
        except ValueError:
            score = None
    if written is not None and score is None:
        report.group(f"score {short(written, 30)} is not a number: the sample is left out", where, lost=True)
        return None
    tags = row.get("tags")
    tags = [str(tag) for tag in tags] if isinstance(tags, list) else []
    if score is None:
        # aibff calibrate compares a sample nobody scored with a score of 1; the tag keeps them apart.
        report.group(
            "no score: expected score 1, as aibff calibrate assumes, tagged `unlabelled`", where, mapped=True
        )
        score, tags = 1, [*tags, "unlabelled"]
    for extra in sorted(set(row) - KNOWN_KEYS):
        report.group(f"{extra} ({short(row[extra], 30)}): not a sample field evalsite keeps, left out", where)
    identifier = key if key is not None else row.get("id")
    name = str(identifier) if identifier not in (None, "") else ""
    return Sample(name, clean, float(score), reason, tags, legacy="messages" not in row)


# --- assembling a deck -------------------------------------------------------------------------------------


@dataclass
class Deck:
    name: str
    text: str = ""
    contexts: dict[str, dict] = field(default_factory=dict)
    sample_files: list[str] = field(default_factory=list)  # referenced by the deck itself, in order
    included: set[str] = field(default_factory=set)  # markdown it inlines (at any depth)
    referenced: set[str] = field(default_factory=set)  # every file it reads
    graders: list[str] = field(default_factory=list)  # decks its front matter's `graders` lists


def resolve(files: Mapping[str, str], base: str, target: str) -> str | None:
    """The uploaded file an embed names: its path relative to the including file, else the one upload of
    that base name (the web page flattens folders)."""
    path = target.split("#", 1)[0].split("?", 1)[0].strip()
    if not path or re.match(r"^[a-z]+://", path):
        return None
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(base), path.lstrip("/")))
    if joined in files:
        return joined
    same = [name for name in files if posixpath.basename(name) == posixpath.basename(path)]
    return same[0] if len(same) == 1 else None


def strip_frontmatter(text: str) -> tuple[str, dict]:
    found = FRONTMATTER.match(text)
    if not found:
        return text, {}
    meta: dict = {}
    if found.group(1) == "+++":
        try:
            meta = tomllib.loads(found.group(2))
        except tomllib.TOMLDecodeError:
            meta = {}
    return text[found.end() :], meta


def assemble(files: Mapping[str, str], name: str, report: Report) -> Deck:
    deck = Deck(name)
    body, meta = strip_frontmatter(files[name])
    for key, value in meta.items():
        if key == "graders" and isinstance(value, list):
            found = [resolve(files, name, str(path)) for path in value]
            deck.graders = [path for path in found if path and is_deck(path)]
            for path, listed in zip(found, value, strict=True):
                if path is None:
                    report.lose(
                        f"{name} +++ graders: {listed} is not among the files, so it is not calibrated"
                    )
            continue
        report.skip(f"{name} +++ {key} ({short(value, 50)}): deck metadata, not part of the judge's prompt")
    text = _inline(files, name, body, deck, report, depth=0, stack=(name,))
    text = "\n".join(line.rstrip() for line in text.split("\n"))
    deck.text = re.sub(r"\n\s*\n\s*\n", "\n\n", text).strip()
    return deck


def _inline(files, name: str, text: str, deck: Deck, report: Report, depth: int, stack: tuple) -> str:
    def replace(found: re.Match) -> str:
        target = found.group(1)
        if target.split("#", 1)[0].lower().endswith(IMAGES):
            report.skip(f"{name}: {found.group(0)}: an image, not part of the judge's text prompt")
            return ""
        path = resolve(files, name, target)
        if path is None:
            embedded = target.split("#", 1)[0]  # one line per file, however many parts of it are embedded
            report.lose(
                f"{name}: ![…]({embedded}) is not among the files: the judge's prompt is assembled without it"
            )
            return ""
        deck.referenced.add(path)
        lowered = path.lower()
        if lowered.endswith((".toml", ".jsonl")):
            try:
                data = parse_file(path, files[path])
            except ImportProblem as problem:
                report.lose(f"{name}: {problem}; its contexts and samples are left out")
                return ""
            contexts = data.get("contexts") if isinstance(data, dict) else None
            for key, value in contexts.items() if isinstance(contexts, dict) else ():
                if isinstance(value, dict):
                    deck.contexts[key] = value  # a later file's context replaces it in place, as in aibff
            if isinstance(data, dict) and data.get("tools"):
                report.skip(f"{path} [[tools]]: a judge calls no tools in a calibration, left out")
            if sample_shape(data) and _rows(path, data) and depth == 0 and path not in deck.sample_files:
                deck.sample_files.append(path)
            return ""  # aibff removes embedded TOML from the text
        if path in stack or depth >= MAX_DEPTH:
            report.lose(f"{name}: {found.group(0)} includes itself; the judge's prompt stops there")
            return ""
        deck.included.add(path)
        body, _ = strip_frontmatter(files[path])
        return _inline(files, path, body, deck, report, depth + 1, (*stack, path))

    return EMBED.sub(replace, text)


def judge_messages(deck: Deck, report: Report) -> list[dict]:
    """The judge's prompt as aibff renders the deck for a sample: the assembled text, then each context's
    question and value."""
    messages = [{"role": "system", "content": "{{criteria}}"}]
    shown = False
    for key, context in deck.contexts.items():
        question = context.get("assistantQuestion", context.get("question"))
        if key in SAMPLE_CONTEXTS:
            value = SAMPLE_CONTEXTS[key]
            shown = shown or key != "outputFormat"
        elif "default" in context:
            default = context["default"]
            value = default if isinstance(default, str) else json.dumps(default, ensure_ascii=False)
        else:
            report.skip(
                f"{deck.name} contexts.{key}: no value in a calibration (no default), not asked, as aibff does"
            )
            continue
        if not isinstance(question, str) or not question.strip():
            report.lose(f"{deck.name} contexts.{key}: no assistantQuestion, so its value is not sent")
            continue
        if not str(value).strip():
            continue
        messages += [{"role": "assistant", "content": question}, {"role": "user", "content": str(value)}]
    if not shown:
        # bff-eval's grader builder asked these of every deck; without them the judge never sees the sample.
        asked = {m["content"] for m in messages[1::2]}
        for key, question in GRADER_CONTEXTS.items():
            if question not in asked:
                messages += [
                    {"role": "assistant", "content": question},
                    {"role": "user", "content": SAMPLE_CONTEXTS[key]},
                ]
        report.map(
            f"{deck.name}: the deck asks for none of userMessage / assistantResponse / fullConversation; the "
            "judge is asked them as bff-eval's grader builder asked every deck"
        )
    return messages


# --- the whole upload ---------------------------------------------------------------------------------------


@dataclass
class Unit:
    """One calibration set among the files: grader decks (judged side by side) and the samples they grade."""

    graders: list[str]
    sample_files: list[str]
    files: list[str] = field(default_factory=list)  # every file the set reads


def plan(files: Mapping[str, str]) -> tuple[list[Unit], dict[str, object]]:
    """The calibration sets among the files, the fullest first, and the sample files as parsed.

    A grader deck embeds samples itself (one that another grader inlines is a part of it); graders that
    embed the same sample files are one set. Sample files no deck embeds join the one set there is, or
    make their own with the deck named like them (bff-eval gave samples and grader on the command line)."""
    parsed: dict[str, object] = {}
    for name in files:
        if name.lower().endswith((".toml", ".jsonl", ".yaml", ".yml")):
            try:
                parsed[name] = parse_file(name, files[name])
            except ImportProblem:
                if len(files) == 1:
                    raise
    decks = {name: assemble(files, name, Report()) for name in files if is_deck(name)}
    inlined = set().union(*(deck.included for deck in decks.values())) if decks else set()
    with_samples = {name for name, deck in decks.items() if deck.sample_files}
    parts = set().union(*(decks[name].included for name in with_samples)) if with_samples else set()
    groups: dict[tuple, Unit] = {}
    for name in sorted(with_samples - parts):
        unit = groups.setdefault(tuple(decks[name].sample_files), Unit([], list(decks[name].sample_files)))
        for grader in (name, *decks[name].graders):  # a deck's front matter may list its graders
            if grader not in unit.graders:
                unit.graders.append(grader)
    units = list(groups.values())
    referenced = set().union(*(deck.referenced for deck in decks.values())) if decks else set()
    loose = [n for n, data in parsed.items() if n not in referenced and sample_shape(data) and _rows(n, data)]
    folders: dict[str, list[str]] = {}
    for name in loose:
        near = [u for u in units if any(posixpath.dirname(g) == posixpath.dirname(name) for g in u.graders)]
        if len(near) > 1:  # beside several sets' decks: the set whose deck is named like the samples
            named = _matching([g for u in near for g in u.graders], [name])
            near = [u for u in near if set(named) & set(u.graders)]
        if len(units) == 1 or len(near) == 1:  # beside the one set there is, or beside one set's decks
            (near or units)[0].sample_files.append(name)
        else:
            folders.setdefault(posixpath.dirname(name), []).append(name)
    if folders:
        tops = [name for name in decks if name not in inlined and name not in with_samples]
        alone = not units  # no deck embeds samples: any deck may be the one these samples were given
        for folder, names in folders.items():
            near = [deck for deck in tops if posixpath.dirname(deck) == folder] or (tops if alone else [])
            units.append(Unit(_matching(near, names), names))
    units.sort(key=lambda unit: -len(unit.graders))
    for unit in units:
        read = [*unit.graders, *unit.sample_files]
        for name in unit.graders:
            read += sorted(decks[name].referenced)
        unit.files = list(dict.fromkeys(read))
    return units, parsed


def convert_files(files: Mapping[str, str], report: Report) -> tuple[str, Converted]:
    """The calibration set among the files (name -> text; names may hold folders): its grader decks as
    judges and their samples. Other sets among them are listed as lost. Returns the main file's name too."""
    used, files = files, dict(files)  # read from the copy; `used[name]` marks an upload as used
    units, parsed = plan(files)
    if not units:
        missing = Report()
        for name in files:
            if is_deck(name):
                assemble(files, name, missing)
        why = f" ({'; '.join(missing.lost[:3])})" if missing.lost else ""
        raise ImportProblem(
            f"no calibrate samples among the files{why}: a deck embeds a samples file "
            "(![samples](samples.deck.toml) with [samples.<id>] tables), or upload a samples .toml or .jsonl file"
        )
    for other in units[1:]:
        what = ", ".join(other.graders) or ", ".join(other.sample_files)
        report.lose(f"{what}: another calibration set among the files, not in this one; import it apart")
    graders, loose = units[0].graders, units[0].sample_files
    if len(graders) > MAX_JUDGES:
        for name in graders[MAX_JUDGES:]:
            report.lose(
                f"{name}: evalsite calibrates at most {MAX_JUDGES} judges at once; import this deck apart"
            )
        graders = graders[:MAX_JUDGES]
    judges, sample_files = [], []
    for name in graders:
        deck = assemble(files, name, report)  # again, with the real report: its losses are this import's
        for path in (name, *deck.referenced):
            used[path]  # noqa: B018
        messages = judge_messages(deck, report)
        judge = {"name": re.sub(r"\.deck\.md$", "", posixpath.basename(name), flags=re.I)[:100]}
        judge |= {
            "criteria": deck.text or f"(the deck {name} is empty)",
            "scale": "-3..3",
            "temperature": 0,  # aibff asks its grader at temperature 0
            "messages": messages,
        }
        judges.append(judge)
        sample_files += [path for path in deck.sample_files if path not in sample_files]
        report.map(
            f"{name}: the deck, assembled as aibff renders it → judge {judge['name']!r}: criteria and messages"
        )
    for name in loose:
        if name not in sample_files:
            sample_files.append(name)
            if graders:
                report.map(
                    f"{name}: samples no deck refers to, calibrated with the deck{'s' if len(graders) > 1 else ''}"
                )
    if not sample_files:
        raise ImportProblem(
            "no calibrate samples among the files: a deck embeds a samples file (![samples](samples.deck.toml) "
            "with [samples.<id>] tables), or upload a samples .toml or .jsonl file"
        )
    taken: set[str] = set()
    samples: list[Sample] = []
    for name in sample_files:
        used[name]  # noqa: B018
        data = parsed.get(name)
        if data is None:
            data = parse_file(name, files[name])
        read = read_samples(name, data, report, taken)
        samples += read
        report.map(
            f"{name}: {len(read)} sample{'s' if len(read) != 1 else ''} → {len(read)} calibration sample{'s' if len(read) != 1 else ''}"
        )
    if not samples:
        raise ImportProblem(
            f"no sample evalsite can calibrate with in {', '.join(sample_files)}: {'; '.join(report.problems())}"
        )
    legacy = sum(sample.legacy for sample in samples)
    if legacy:
        report.map(
            f"userMessage / assistantResponse ({legacy} sample{'s' if legacy != 1 else ''}) → messages: [user, assistant]"
        )
    scale = _scale([s.score for s in samples])
    if not judges:
        code = [
            name for name in files if name.endswith((".js", ".ts")) and "GraderDeckBuilder" in files[name]
        ]
        report.lose(
            f"{sample_files[0]}: the grader (a *.deck.md deck) is not among the files; the judge's criteria "
            "are a placeholder to fill in"
            + (f" ({', '.join(code)}: a grader written as code is not read)" if code else "")
        )
        judges = [{"criteria": PLACEHOLDER, "scale": scale}]
    elif scale != "-3..3":  # a deck grades on -3..3: a score off it is a mistake in that sample
        for sample in [s for s in samples if not -3 <= s.score <= 3]:
            report.lose(f"{sample.id}: score {sample.score:g} is outside aibff's -3..3 scale; left out")
            samples.remove(sample)
        scale = "-3..3"
        if not samples:
            raise ImportProblem(f"no sample of {', '.join(sample_files)} is scored on aibff's -3..3 scale")
    main = graders[0] if graders else sample_files[0]
    stem = re.sub(r"(\.deck)?\.(md|toml|jsonl)$", "", posixpath.basename(main), flags=re.I) or "imported"
    samples_name = safe_file_name(f"{stem}.samples.jsonl")
    lines = []
    for sample in samples:
        score = int(sample.score) if sample.score.is_integer() else sample.score
        expected = {"score": score} | ({"reason": sample.reason} if sample.reason else {})
        row = {"id": sample.id, "messages": sample.messages, "expected": expected}
        lines.append(json.dumps(row | ({"tags": sample.tags} if sample.tags else {}), ensure_ascii=False))
    report.map(f"scores → expected scores on the judge's {scale} scale; description → the expected reason")
    header = [
        f"Imported from Bolt Foundry calibrate {main} by evalsite: a calibration set (docs/calibration.md).",
        "Name the judge's model (or pass --model to `evalsite calibrate`).",
    ]
    sections = [Section("name", stem[:200])]
    if len(judges) == 1:
        judge = dict(judges[0])
        judge.pop("name", None)
        sections.append(Section("judge", judge))
    else:
        sections.append(Section("judges", judges))
    sections.append(Section("samples_file", samples_name, blank_before=True))
    return main, (header, sections, {samples_name: "\n".join(lines) + "\n"})


def _matching(decks: list[str], samples: list[str]) -> list[str]:
    """The decks that grade sample files no deck embeds (bff-eval gave them on the command line): the one
    deck there is, else those whose name begins as a sample file's does (team-summary-analysis-grader for
    team-summary-test-samples)."""
    if len(decks) <= 1:
        return decks

    def shared(deck: str, sample: str) -> int:
        a, b = posixpath.basename(deck).lower(), posixpath.basename(sample).lower()
        return len(posixpath.commonprefix([a, b]))

    best = max(shared(deck, sample) for deck in decks for sample in samples)
    return [deck for deck in decks if best >= 4 and any(shared(deck, s) == best for s in samples)]


def _scale(scores: list[float]) -> str:
    """calibrate scores on -3..3; a file whose scores leave that range is read on 0-100."""
    return "-3..3" if all(-3 <= score <= 3 for score in scores) else "0-100"


def convert(name: str, data: object, files: dict[str, str], report: Report) -> Converted:
    """The converter's common entry: `name` is one calibrate file among `files`."""
    return convert_files(files, report)[1]
