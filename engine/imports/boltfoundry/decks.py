"""Bolt Foundry's grader decks: `*.deck.md` markdown whose `![alt](file)` embeds pull in other cards and
decks (inlined, recursively) and TOML files (removed from the text) holding `[contexts.<name>]` questions and
`[samples.<id>]` ground truth; the assembled deck is the judge's prompt, as aibff renders it."""

from __future__ import annotations

import json
import posixpath
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field

from ..common import ImportProblem, Report, short
from .samples import parse_file, sample_rows, sample_shape

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


IMAGES = (".png", ".jpg", ".jpeg", ".gif", ".svg", ".webp")
MAX_DEPTH = 20


def is_deck(name: str) -> bool:
    return name.lower().endswith(".deck.md")


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


# A grader deck's words: aibff reads a `score` from its answer, and its decks call themselves graders.
GRADING_WORDS = re.compile(r"\b(?:scor(?:e|es|ed|ing)|grad(?:e|es|ed|er|ers|ing))\b", re.I)


def grades(deck: Deck) -> bool:
    """Whether a deck grades, as aibff tells its grader decks from the decks whose replies they grade (its
    GUI keeps an actor deck and a grader deck). aibff renders only the contexts a deck asks for, so a deck
    asking for the sample (userMessage, assistantResponse, fullConversation) or the answer's format
    (outputFormat, as its grader base deck does) grades; so does one that asks for a score (calibrate reads
    `score` from the answer), calls itself a grader, or names the graders beside it."""
    if any(key in deck.contexts for key in SAMPLE_CONTEXTS) or deck.graders:
        return True
    return "grader" in posixpath.basename(deck.name).lower() or bool(GRADING_WORDS.search(deck.text))


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
            if (
                sample_shape(data)
                and sample_rows(path, data)
                and depth == 0
                and path not in deck.sample_files
            ):
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
