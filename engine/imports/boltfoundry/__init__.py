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
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..common import Converted, ImportProblem, Report, Section, safe_file_name
from .decks import OUTPUT_FORMAT, assemble, grades, is_deck, judge_messages
from .samples import Sample, parse_file, read_samples, sample_rows, sample_shape

PLACEHOLDER = "Describe what a good reply does (no grader deck was given with the samples)"


MAX_JUDGES = 10
NO_SIGN = "userMessage, assistantResponse, fullConversation or outputFormat context"


# --- the whole upload ---------------------------------------------------------------------------------------


@dataclass
class Unit:
    """One calibration set among the files: grader decks (judged side by side) and the samples they grade."""

    graders: list[str]
    sample_files: list[str]
    files: list[str] = field(default_factory=list)  # every file the set reads
    # Decks that embed its samples but do not grade (the deck whose replies the graders grade).
    left_out: list[str] = field(default_factory=list)
    unsure: list[str] = field(default_factory=list)  # its judges that show no sign of grading


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
    listed = set().union(*(deck.graders for deck in decks.values())) if decks else set()
    tops = sorted(with_samples - parts)
    grading = [name for name in tops if name in listed or grades(decks[name])]
    # A deck that embeds the samples a grader grades, but grades nothing itself, is left out of the judges.
    # With no grader on its samples it stays their judge, as aibff would run it.
    graded = set().union(*(decks[name].sample_files for name in grading)) if grading else set()
    actors = [name for name in tops if name not in grading and graded & set(decks[name].sample_files)]
    groups: dict[tuple, Unit] = {}
    for name in [n for n in tops if n not in actors]:
        unit = groups.setdefault(tuple(decks[name].sample_files), Unit([], list(decks[name].sample_files)))
        for grader in (name, *decks[name].graders):  # a deck's front matter may list its graders
            if grader not in unit.graders:
                unit.graders.append(grader)
    units = list(groups.values())
    for name in actors:
        own = set(decks[name].sample_files)
        max(units, key=lambda unit: len(own & set(unit.sample_files))).left_out.append(name)
    for unit in units:
        unit.unsure = [name for name in unit.graders if name not in grading and name not in listed]
    referenced = set().union(*(deck.referenced for deck in decks.values())) if decks else set()
    loose = [
        n for n, data in parsed.items() if n not in referenced and sample_shape(data) and sample_rows(n, data)
    ]
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
        tops = [name for name in tops if grades(decks[name])] or tops
        alone = not units  # no deck embeds samples: any deck may be the one these samples were given
        for folder, names in folders.items():
            near = [deck for deck in tops if posixpath.dirname(deck) == folder] or (tops if alone else [])
            units.append(Unit(_matching(near, names), names))
    units.sort(key=lambda unit: -len(unit.graders))
    for unit in units:
        read = [*unit.graders, *unit.sample_files, *unit.left_out]
        for name in [*unit.graders, *unit.left_out]:
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
    for name in units[0].left_out:
        used[name]  # noqa: B018
        report.skip(
            f"{name}: left out of the judges, not a grader deck — it embeds these samples but asks neither for "
            f"the sample (a {NO_SIGN}) nor for a score, and does not call itself a grader: it is taken for the "
            "deck whose replies the graders grade"
        )
    for name in units[0].unsure:
        report.skip(
            f"{name}: shows no sign of grading (no {NO_SIGN}, no score, not called a grader); it is the judge "
            "all the same, as no other deck grades its samples — check that it answers with a score"
        )
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
                # Which deck graded them was said on bff-eval's command line, not in a file: a guess, said
                # where a folder import's report and the set's header say it too.
                report.skip(
                    f"{name}: samples no deck embeds (bff-eval was given them on its command line), calibrated "
                    f"with {', '.join(graders)} beside them — check that they were scored for "
                    f"{'these decks' if len(graders) > 1 else 'this deck'}"
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


__all__ = [
    "OUTPUT_FORMAT",
    "Unit",
    "convert",
    "convert_files",
    "is_deck",
    "parse_file",
    "plan",
    "sample_shape",
]
