"""calibrate (Bolt Foundry's aibff) sample files: TOML `[[samples]]` with `messages` and `expected = {score,
reason}`, as an evalsite calibration set (docs/calibration.md).

calibrate keeps the grader (its "deck") apart from the samples, so the set gets a placeholder judge to fill
in. Samples in calibrate's old form, `userMessage` / `assistantResponse`, become a two-message array.
"""

from __future__ import annotations

import re

from .common import Converted, ImportProblem, Report, Section, as_number, non_finite, short

PLACEHOLDER = "Describe what a good reply does (calibrate keeps its grader apart from the samples)"


def _scale(scores: list[float]) -> str:
    """calibrate scores on -3..3; a file whose scores leave that range is read on 0-100."""
    return "-3..3" if all(-3 <= score <= 3 for score in scores) else "0-100"


def convert(name: str, data: dict, files: dict[str, str], report: Report) -> Converted:
    rows = data.get("samples") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ImportProblem(f"{name} has no [[samples]]: a calibrate file lists samples with messages")
    samples, legacy = [], 0
    for number, row in enumerate(rows, start=1):
        where = f"samples[{number - 1}]"
        if not isinstance(row, dict):
            report.skip(f"{where}: not a table, left out")
            continue
        sample: dict = {}
        if "messages" in row:
            sample["messages"] = row["messages"]
        elif "userMessage" in row or "assistantResponse" in row:
            sample["messages"] = [
                {"role": "user", "content": row.get("userMessage", "")},
                {"role": "assistant", "content": row.get("assistantResponse", "")},
            ]
        else:
            report.skip(f"{where}: no messages (nor userMessage / assistantResponse), left out")
            continue
        if non_finite(sample["messages"]):
            report.skip(f"{where}: a message holds NaN or an infinity, which no message can be; left out")
            continue
        legacy += "messages" not in row
        expected = row.get("expected")
        if non_finite(expected):
            report.skip(f"{where}.expected ({short(expected, 40)}): NaN or an infinity is no score; left out")
            expected = None
        if isinstance(expected, dict):
            sample["expected"] = {key: expected[key] for key in ("score", "reason") if key in expected}
            for key in expected:
                if key not in ("score", "reason"):
                    report.skip(f"{where}.expected.{key}: evalsite keeps score and reason, left out")
        elif expected is not None:
            sample["expected"] = expected
        if row.get("tags") and non_finite(row["tags"]):
            report.skip(f"{where}.tags: NaN or an infinity is no tag; left out")
        elif row.get("tags"):
            sample["tags"] = row["tags"]
        for key in row:
            if key not in ("messages", "userMessage", "assistantResponse", "expected", "tags"):
                report.skip(
                    f"{where}.{key} ({short(row[key], 40)}): not a sample field evalsite knows, left out"
                )
        samples.append(sample)
    if not samples:
        raise ImportProblem(f"{name} has no sample evalsite can read: {'; '.join(report.problems())}")
    if legacy:
        report.map(
            f"userMessage / assistantResponse (calibrate's old form, {legacy} sample{'s' if legacy != 1 else ''}) "
            "→ messages: [user, assistant]"
        )
    scores = [
        float(s["expected"]["score"])
        for s in samples
        if isinstance(s.get("expected"), dict) and as_number(s["expected"].get("score")) is not None
    ]
    scale = _scale(scores)
    report.map(
        f"[[samples]]: {len(samples)} sample{'s' if len(samples) != 1 else ''} → samples (messages, expected, tags)"
    )
    report.map(f"expected scores → the judge's {scale} scale")
    report.skip("the grader: calibrate keeps it in a deck apart from the samples; write the judge's criteria")
    stem = re.sub(r"\.(toml|ya?ml)$", "", name, flags=re.IGNORECASE) or "imported-calibration"
    header = [
        f"Imported from calibrate {name} by evalsite: a calibration set (docs/calibration.md).",
        "Fill in the judge's criteria and model before launching it.",
    ]
    sections = [
        Section("name", stem[:200]),
        Section("judge", {"criteria": PLACEHOLDER, "scale": scale}),
        Section("samples", samples, blank_before=True, item_comments=[[] for _ in samples]),
    ]
    return header, sections, {}
