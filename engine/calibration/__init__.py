"""Calibration: conversations people have scored, for checking an LLM judge against them.

`sets` is the calibration set format and its loading; `playing` plays a set as a suite and reads its
judgements back; `report` computes the figures (engine/agreement.py) and compares two calibrations; `run`
is the CLI's calibration, played by the engine's runner. Here are the set's names and its suite's.
"""

from .playing import CalibrationSuite, Judged, as_suite, judge_conversation, judgement
from .sets import (
    MAX_JUDGES,
    MAX_REPEATS,
    CalibrationGates,
    CalibrationSet,
    LoadedSet,
    NamedJudge,
    Sample,
    load_calibration,
    load_parsed,
)

__all__ = [
    "MAX_JUDGES",
    "MAX_REPEATS",
    "CalibrationGates",
    "CalibrationSet",
    "CalibrationSuite",
    "Judged",
    "LoadedSet",
    "NamedJudge",
    "Sample",
    "as_suite",
    "judge_conversation",
    "judgement",
    "load_calibration",
    "load_parsed",
]
